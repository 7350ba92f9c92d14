package record

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

func TestFromFailure(t *testing.T) {
	f := testFailure()
	// As the server stores an event of the publisher's account.
	f.Subject = subjects.Published("pharmacie-st-etienne", "pharmacy", "dispense")
	f.Envelope.Identifiers = map[string]string{"transaction_id": "TX-Müller & Söhne <7>", "registrant_dea": "AB1234563", "ndc11": "00002322730", "lot": "L1"}
	now := t0.In(time.FixedZone("CET", 3600))
	got := FromFailure(f, now)

	et := f.Envelope.EventTime.UTC()
	want := Record{
		SchemaVersion:  SchemaVersion,
		DLQID:          f.Envelope.IdempotencyKey,
		Index:          0,
		Kind:           KindQuarantined,
		Domain:         "pharmacy",
		Class:          ClassExhausted,
		ErrorCode:      f.Code,
		ErrorDetail:    f.Detail,
		Payload:        NewPayload(f.Payload),
		Headers:        f.Headers,
		SourceSubject:  f.Subject,
		SourceStream:   "EVENTS",
		SourceSeq:      42,
		Publisher:      "pharmacie-st-etienne",
		IdempotencyKey: f.Envelope.IdempotencyKey,
		OrderingKey:    f.Envelope.OrderingKey,
		PartyID:        "AB1234563",
		EventTime:      &et,
		EventHashID:    testEventHashID,
		Identifiers:    map[string]string{"transaction_id": "TX-Müller & Söhne <7>", "registrant_dea": "AB1234563"},
		Attempts:       f.Attempts,
		DeliveryCount:  5,
		RedriveCount:   0,
		FirstSeen:      f.Published,
		QuarantinedAt:  t0,
		TraceID:        "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:         "00f067aa0ba902b7",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromFailure\n got %+v\nwant %+v", got, want)
	}
	if got.QuarantinedAt.Location() != time.UTC || got.EventTime.Location() != time.UTC {
		t.Errorf("times not in UTC: %v %v", got.QuarantinedAt, got.EventTime)
	}

	// Every field a failure can fill is filled; only the fields of later
	// records and of the seal stay empty (and Conflict, which only an
	// IDEMPOTENCY_CONFLICT failure fills: TestFromFailureConflict).
	laterOnly := map[string]bool{"Index": true, "RedriveCount": true, "Actor": true, "Reason": true,
		"DrainID": true, "IgnoreOrder": true, "Signature": true, "Hold": true, "PrevHash": true, "AuditHash": true,
		"Conflict": true, "Document": true, "Decision": true}
	v := reflect.ValueOf(got)
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if v.Field(i).IsZero() != laterOnly[name] {
			t.Errorf("field %s: zero=%v, want zero=%v", name, v.Field(i).IsZero(), laterOnly[name])
		}
	}

	// The record owns its data.
	got.Headers[envelope.MsgID][0] = "changed"
	got.Attempts[0].Reason = "changed"
	if f.Headers[envelope.MsgID][0] == "changed" || f.Attempts[0].Reason == "changed" {
		t.Error("FromFailure shares headers or attempts with the failure")
	}
	mustSeal(t, FromFailure(f, now))
}

// TestFromFailureDocument: an event read from a document keeps its
// provenance in its first record (a copy), and the state folded from it
// shows it; the record still matches the record schema.
func TestFromFailureDocument(t *testing.T) {
	f := testFailure()
	doc := &envelope.Document{ID: "SHIP-4812 \"Müller & Söhne <Großhandel>\"", SHA256: strings.Repeat("ab", 32), Format: "xml", Index: 4811, Count: 10000,
		Sender: "urn:epc:id:sgln:4012345.00000.0", Created: "2024-05-01T08:00:00Z", Stream: "EVENTS", Seq: 42, Offset: 1234567, Length: 812}
	f.Envelope.Document = doc
	r := FromFailure(f, t0)
	if r.Document == nil || *r.Document != *doc || r.Document == doc {
		t.Fatalf("document %+v", r.Document)
	}
	sealedRec, _ := mustSeal(t, r)
	st, err := Fold([]Record{sealedRec})
	if err != nil || st.Document == nil || *st.Document != *doc {
		t.Fatalf("state document %+v (%v)", st.Document, err)
	}
}

// TestFromFailureConflict: an IDEMPOTENCY_CONFLICT failure gets a chain of
// its own, named by its key and content hash (never the key itself, which
// may name the committed event's chain), and its record names the
// committed LEDGER entry and both hashes; a replay of a chain that
// conflicts stays in that chain.
func TestFromFailureConflict(t *testing.T) {
	f := testFailure()
	f.Class, f.Code = ClassValidation, codes.IdempotencyConflict
	f.Conflict = &Conflict{LedgerStream: "LEDGER", LedgerSeq: 7,
		CommittedHash: strings.Repeat("a", 64), ContentHash: strings.Repeat("b", 64)}
	r := FromFailure(f, t0)
	if want := ConflictDLQID("pharmacy", f.Envelope.IdempotencyKey, f.Conflict.ContentHash); r.DLQID != want || r.DLQID == f.Envelope.IdempotencyKey {
		t.Errorf("dlq id %s, want %s (not the key)", r.DLQID, want)
	}
	if r.Conflict == nil || *r.Conflict != *f.Conflict || r.Conflict == f.Conflict {
		t.Errorf("conflict %+v, want a copy of %+v", r.Conflict, f.Conflict)
	}
	if other := ConflictDLQID("pharmacy", f.Envelope.IdempotencyKey, strings.Repeat("c", 64)); other == r.DLQID {
		t.Error("two conflicting contents share a chain")
	}
	mustSeal(t, r)
	f.DLQID, f.RedriveCount = "pharmacy_ab", 1
	if got := DLQIDFor(f); got != "pharmacy_ab" {
		t.Errorf("a replay's conflict: dlq id %s, want its chain's", got)
	}
}

// TestListedIdentifiers: the first record keeps, per domain, only the
// allow-listed identifiers of the envelope (never another payload
// value), and none that is empty, over-long or not UTF-8; the record
// seals and matches the schema with them.
func TestListedIdentifiers(t *testing.T) {
	long := strings.Repeat("9", MaxListedIdentifier+1)
	for _, tc := range []struct {
		name, dom string
		env       *envelope.Envelope
		want      map[string]string
	}{
		{"pharmacy", "pharmacy", &envelope.Envelope{EventType: "receive", Identifiers: map[string]string{"transaction_id": "TX \"Saint-Étienne\" & <1>", "registrant_dea": "AB1234563", "ndc11": "00002322730", "counterparty_dea": "BC7654321", "lot": "L-1"}},
			map[string]string{"transaction_id": "TX \"Saint-Étienne\" & <1>", "registrant_dea": "AB1234563"}},
		{"dscsa", "dscsa", &envelope.Envelope{EventType: "shipping", Identifiers: map[string]string{"gtin": "00312345678906", "serial": "S1", "lot": "LOT-Ü1", "expiry": "2027-01-31", "read_point": "urn:epc:id:sgln:0614141.00001.0"}},
			map[string]string{"lot": "LOT-Ü1", "event_type": "shipping"}},
		{"dscsa without a lot", "dscsa", &envelope.Envelope{EventType: "packing", Identifiers: map[string]string{"sscc": "106141412345678908"}},
			map[string]string{"event_type": "packing"}},
		{"fsma", "fsma", &envelope.Envelope{EventType: "receiving", Identifiers: map[string]string{"tlc": "TLC-Romaine & kale <fresh>", "supplier_id": "S", "location_gln": "0614141000012"}},
			map[string]string{"tlc": "TLC-Romaine & kale <fresh>"}},
		{"unknown domain", "unknown", &envelope.Envelope{EventType: "x", Identifiers: map[string]string{"transaction_id": "T"}}, nil},
		{"no envelope", "pharmacy", nil, nil},
		{"over-long and empty left out", "pharmacy", &envelope.Envelope{Identifiers: map[string]string{"transaction_id": long, "registrant_dea": ""}}, nil},
		{"not UTF-8 left out", "fsma", &envelope.Envelope{Identifiers: map[string]string{"tlc": "T\xff"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ListedIdentifiers(tc.dom, tc.env)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if tc.env == nil || tc.dom == "unknown" {
				return
			}
			f := testFailure()
			f.Domain, f.Envelope.Domain = tc.dom, tc.dom
			f.Envelope.EventType, f.Envelope.Identifiers = tc.env.EventType, tc.env.Identifiers
			r := FromFailure(f, t0)
			if !reflect.DeepEqual(r.Identifiers, tc.want) {
				t.Errorf("the first record's identifiers %v, want %v", r.Identifiers, tc.want)
			}
			_, raw := mustSeal(t, r)
			if err := validateSchema(t, raw); err != nil {
				t.Errorf("schema: %v", err)
			}
		})
	}
}

func TestFromFailureWithoutEnvelope(t *testing.T) {
	f := testFailure()
	f.Envelope, f.Domain, f.Headers = nil, "", nil
	f.Class, f.Payload = ClassValidation, []byte{0xff, 0x00}
	f.DLQID, f.RedriveCount = "pharmacy_0123456789abcdef0123456789abcdef", 2
	r := FromFailure(f, t0)
	if r.IdempotencyKey != "" || r.OrderingKey != "" || r.PartyID != "" || r.EventTime != nil {
		t.Errorf("envelope fields set without an envelope: %+v", r)
	}
	if r.Domain != UnknownDomain || r.TraceID != "" || r.SpanID != "" || r.RedriveCount != 2 || r.DLQID != f.DLQID {
		t.Errorf("got domain %q trace %q span %q redrives %d dlq %q", r.Domain, r.TraceID, r.SpanID, r.RedriveCount, r.DLQID)
	}
	if r.Payload.Encoding != EncodingBase64 {
		t.Errorf("payload encoding %q", r.Payload.Encoding)
	}
	mustSeal(t, r)
}

func TestDLQIDFor(t *testing.T) {
	withEnvelope := testFailure()
	redrive := testFailure()
	redrive.DLQID = "dscsa_ffffffffffffffffffffffffffffffff"
	bare := testFailure()
	bare.Envelope = nil
	unknown := bare
	unknown.Domain = ""
	emptyKey := testFailure()
	emptyKey.Envelope.IdempotencyKey = ""

	source := domain.Key("pharmacy", "source", "EVENTS", strconv.FormatUint(42, 10))
	tests := []struct {
		name string
		f    Failure
		want string
	}{
		{"redrive keeps its dlq id", redrive, "dscsa_ffffffffffffffffffffffffffffffff"},
		{"idempotency key of the envelope", withEnvelope, "pharmacy_0123456789abcdef0123456789abcdef"},
		{"hash of source stream and sequence", bare, source},
		{"envelope without a key", emptyKey, source},
		{"unknown domain", unknown, domain.Key(UnknownDomain, "source", "EVENTS", "42")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DLQIDFor(tt.f); got != tt.want {
				t.Errorf("DLQIDFor = %q, want %q", got, tt.want)
			}
		})
	}
	if source == domain.Key("pharmacy", "source", "EVENTS", "43") {
		t.Error("source dlq id does not depend on the sequence")
	}
}

func TestParseTraceparent(t *testing.T) {
	const trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	tests := []struct {
		name        string
		headers     map[string][]string
		trace, span string
	}{
		{"valid", map[string][]string{"traceparent": {testTraceparent}}, trace, span},
		{"valid, not sampled", map[string][]string{"traceparent": {"00-" + trace + "-" + span + "-00"}}, trace, span},
		{"surrounding spaces", map[string][]string{"traceparent": {" " + testTraceparent + " "}}, trace, span},
		{"header name in another case", map[string][]string{"Traceparent": {testTraceparent}}, trace, span},
		{"first value wins", map[string][]string{"traceparent": {testTraceparent, "garbage"}}, trace, span},
		{"future version with more fields", map[string][]string{"traceparent": {"cc-" + trace + "-" + span + "-01-what-the-future-holds"}}, trace, span},
		{"absent", map[string][]string{"other": {"x"}}, "", ""},
		{"no headers", nil, "", ""},
		{"empty value", map[string][]string{"traceparent": {""}}, "", ""},
		{"no value", map[string][]string{"traceparent": {}}, "", ""},
		{"upper-case hex", map[string][]string{"traceparent": {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}}, "", ""},
		{"version ff", map[string][]string{"traceparent": {"ff-" + trace + "-" + span + "-01"}}, "", ""},
		{"all-zero trace id", map[string][]string{"traceparent": {"00-00000000000000000000000000000000-" + span + "-01"}}, "", ""},
		{"all-zero span id", map[string][]string{"traceparent": {"00-" + trace + "-0000000000000000-01"}}, "", ""},
		{"short trace id", map[string][]string{"traceparent": {"00-" + trace[:31] + "-" + span + "-01"}}, "", ""},
		{"version 00 with more fields", map[string][]string{"traceparent": {testTraceparent + "-extra"}}, "", ""},
		{"future version, junk after flags", map[string][]string{"traceparent": {"01-" + trace + "-" + span + "-01x"}}, "", ""},
		{"non-hex flags", map[string][]string{"traceparent": {"00-" + trace + "-" + span + "-0g"}}, "", ""},
		{"wrong separators", map[string][]string{"traceparent": {"00_" + trace + "_" + span + "_01"}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFailure()
			f.Headers = tt.headers
			r := FromFailure(f, t0)
			if r.TraceID != tt.trace || r.SpanID != tt.span {
				t.Errorf("trace %q span %q, want %q %q", r.TraceID, r.SpanID, tt.trace, tt.span)
			}
		})
	}
}
