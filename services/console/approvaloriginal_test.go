package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// TestPayloadAsRequested: an approval's "Original" is the payload of the
// chain as it stood when the correction was asked for, also once the
// correction executed and the chain's current payload is the corrected
// one.
func TestPayloadAsRequested(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	original := []byte(`{"transaction_id":"TX-1","qty":50,"pharmacy":"Müller & Söhne <Apotheke>"}`)
	corrected := []byte(`{"transaction_id":"TX-1","qty":500,"pharmacy":"Müller & Söhne <Apotheke>"}`)
	first := record.FromFailure(record.Failure{
		Class: record.ClassValidation, Code: "SCHEMA_VIOLATION", Detail: "qty", Domain: "pharmacy",
		Subject: "events.pharmacy.dispense", Stream: "EVENTS", Seq: 7, Published: at, Payload: original,
		Envelope: &envelope.Envelope{Domain: "pharmacy", EventType: "dispense", IdempotencyKey: "pharmacy_0123456789abcdef0123456789abcdef",
			KeySource: "transaction_id", OrderingKey: "00002322730|L01", EventTime: at},
	}, at)
	if err := record.Seal(&first); err != nil {
		t.Fatal(err)
	}
	next := record.Record{SchemaVersion: record.SchemaVersion, DLQID: first.DLQID, Index: 1, Kind: record.KindCorrected,
		Domain: first.Domain, Class: first.Class, ErrorCode: first.ErrorCode, ErrorDetail: first.ErrorDetail,
		FirstSeen: first.FirstSeen, QuarantinedAt: at.Add(time.Minute), PrevHash: first.AuditHash,
		Payload: record.NewPayload(corrected), Actor: "amara.okafor", Reason: "qty as invoiced"}
	if err := record.Seal(&next); err != nil {
		t.Fatal(err)
	}
	raw := func(r record.Record) api.ChainRecord {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return api.ChainRecord{Record: b}
	}
	now, err := record.Fold([]record.Record{first, next})
	if err != nil {
		t.Fatal(err)
	}
	rep := api.GetReply{State: now, Records: []api.ChainRecord{raw(first), raw(next)}}
	for _, tc := range []struct {
		name         string
		chainRecords int
		want         []byte
	}{
		{"asked for on the one-record chain, executed since", 1, original},
		{"no expected length: the chain as it stands", 0, corrected},
		{"a length past the chain read: as it stands", 5, corrected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := payloadAsRequested(rep, tc.chainRecords)
			b, err := p.Bytes()
			if err != nil || string(b) != string(tc.want) {
				t.Errorf("got %s (%v), want %s", b, err, tc.want)
			}
		})
	}
}
