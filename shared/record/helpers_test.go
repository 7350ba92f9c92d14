package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// t0 is the fixed clock of the tests.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 500_000_000, time.UTC)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// eventJSON returns a JSON event body of about size bytes.
func eventJSON(size int) []byte {
	head := `{"transaction_id":"TX-0001","event_type":"dispense","registrant_dea":"AB1234563","ndc":"00002-3227-30","lot":"L0<1>&","note":"`
	tail := `"}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		pad = 0
	}
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// testFailure returns a failure that sets every field.
func testFailure() Failure {
	et := time.Date(2025, 2, 28, 23, 59, 59, 0, time.FixedZone("X", 3600))
	return Failure{
		Class:   ClassExhausted,
		Code:    codes.DownstreamUnavailable,
		Detail:  "downstream answered 503",
		Domain:  "pharmacy",
		Subject: "events.pharmacy.dispense", Stream: "EVENTS", Seq: 42,
		Deliveries: 5,
		Published:  t0.Add(-time.Hour),
		Headers: map[string][]string{
			envelope.Traceparent: {testTraceparent},
			envelope.MsgID:       {"TX-0001"},
		},
		Payload: eventJSON(1024),
		Envelope: &envelope.Envelope{
			Domain: "pharmacy", EventType: "dispense",
			IdempotencyKey: "pharmacy_0123456789abcdef0123456789abcdef",
			KeySource:      "transaction_id", OrderingKey: "00002322730|L01",
			EventTime: et, PartyID: "AB1234563",
			// No pharmacy event has one; set to see FromFailure copy it.
			EventHashID: testEventHashID,
		},
		RedriveCount: 0,
		Attempts: []Attempt{
			{At: t0.Add(-3 * time.Minute), Stage: StageCommit, Code: codes.DownstreamUnavailable, Reason: "timeout", Delivery: 1},
			{At: t0.Add(-time.Minute), Stage: StageCommit, Code: codes.DownstreamUnavailable, Reason: "503", Delivery: 5},
		},
		FailedAt: t0,
	}
}

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// recordSchema compiles schemas/quarantine-record.schema.json once.
func recordSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	schemaOnce.Do(func() {
		b, err := schemas.Read("quarantine-record")
		if err != nil {
			schemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		id := schemas.ID("quarantine-record")
		if err := c.AddResource(id, bytes.NewReader(b)); err != nil {
			schemaErr = err
			return
		}
		schema, schemaErr = c.Compile(id)
	})
	if schemaErr != nil {
		t.Fatalf("compile schema: %v", schemaErr)
	}
	return schema
}

// validateSchema checks the stored record raw against the record schema.
func validateSchema(t testing.TB, raw []byte) error {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return recordSchema(t).Validate(v)
}

// mustSeal seals r, marshals it, and requires the stored bytes to validate
// against the record schema. It returns the sealed record and its bytes.
func mustSeal(t testing.TB, r Record) (Record, []byte) {
	t.Helper()
	r, raw := sealOnly(t, r)
	if err := validateSchema(t, raw); err != nil {
		t.Fatalf("record %d (%s) does not validate against the schema: %v\n%s", r.Index, r.Kind, err, raw)
	}
	return r, raw
}

// sealOnly seals and marshals r without the schema check (for records a
// test makes invalid on purpose).
func sealOnly(t testing.TB, r Record) (Record, []byte) {
	t.Helper()
	if err := Seal(&r); err != nil {
		t.Fatalf("Seal: %v", err)
	}
	raw, err := Marshal(r)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return r, raw
}

// follow returns an unsealed record of kind that follows prev in its chain.
func follow(prev Record, kind Kind) Record {
	r := Record{
		SchemaVersion: SchemaVersion, DLQID: prev.DLQID, Index: prev.Index + 1, Kind: kind,
		Domain: prev.Domain, Class: prev.Class, ErrorCode: prev.ErrorCode, ErrorDetail: prev.ErrorDetail,
		RedriveCount: prev.RedriveCount, FirstSeen: prev.FirstSeen,
		QuarantinedAt: prev.QuarantinedAt.Add(time.Minute), PrevHash: prev.AuditHash,
		TraceID: prev.TraceID, SpanID: prev.SpanID,
	}
	switch kind {
	case KindCorrected:
		r.Payload = NewPayload([]byte(fmt.Sprintf(`{"corrected":%d}`, r.Index)))
		r.Actor, r.Reason = "alice", "fixed the NDC"
	case KindPoisoned:
		r.Class = ClassPoison
		r.RedriveCount++
	case KindReplayFailed:
		r.RedriveCount++
		r.ErrorCode, r.ErrorDetail = codes.DownstreamRejected, "downstream answered 422"
		r.Attempts = []Attempt{{At: r.QuarantinedAt, Stage: StageRedrive, Code: codes.DownstreamRejected, Reason: "422"}}
	case KindReleased:
		r.Class = ClassExhausted
		r.Actor, r.Reason = "bob", "downstream fixed"
	case KindResolved:
		r.Actor, r.Reason = "carol", "handled by phone"
	case KindRedriveRequested:
		r.DrainID = "drain-1"
	case KindApproved:
		r.Actor, r.Reason = "dana", "reviewed the correction against the invoice"
		r.Signature = &Signature{
			ApprovalID: "appr-1", Action: "correct",
			Requester: "alice", RequestedAt: r.QuarantinedAt.Add(-time.Hour),
			Approver: "dana", ApproverRole: "approver", SignedAt: r.QuarantinedAt,
			Meaning: "reviewed the correction against the invoice",
		}
	case KindHoldPlaced, KindHoldLifted:
		r.Actor, r.Reason = "erin", "subpoena duces tecum"
		r.Hold = &HoldMark{HoldID: "hold-1", CaseID: "case-2026-001", At: r.QuarantinedAt.Add(-time.Hour), Status: statusAt(prev)}
	}
	return r
}

// statusAt is the status a chain whose last record is prev is in (the
// status a hold record keeps), as the last record alone tells it.
func statusAt(prev Record) Status {
	if prev.Hold != nil {
		return prev.Hold.Status
	}
	from := StatusOpen
	if prev.Class == ClassPoison {
		from = StatusPoison
	}
	return StatusAfter(from, prev.Kind)
}

// step is one record of a test chain: its kind and an optional change.
type step struct {
	kind Kind
	mod  func(*Record)
}

// chain builds and seals a chain: a first record of class from a test
// failure, then steps. Every record is schema-checked.
func chain(t testing.TB, class Class, steps ...step) ([]Record, [][]byte) {
	t.Helper()
	f := testFailure()
	f.Class = class
	return chainFor(t, f, steps...)
}

// otherChain is chain for another event (another dlq id).
func otherChain(t testing.TB, class Class, steps ...step) ([]Record, [][]byte) {
	t.Helper()
	f := testFailure()
	f.Class = class
	f.Envelope.IdempotencyKey = "pharmacy_fedcba9876543210fedcba9876543210"
	return chainFor(t, f, steps...)
}

// chainFor builds and seals the chain of failure f, then steps.
func chainFor(t testing.TB, f Failure, steps ...step) ([]Record, [][]byte) {
	t.Helper()
	first, raw := mustSeal(t, FromFailure(f, t0))
	recs, raws := []Record{first}, [][]byte{raw}
	for _, s := range steps {
		r := follow(recs[len(recs)-1], s.kind)
		if s.mod != nil {
			s.mod(&r)
		}
		r, raw := mustSeal(t, r)
		recs, raws = append(recs, r), append(raws, raw)
	}
	return recs, raws
}

// plain turns record kinds into steps without changes.
func plain(ks ...Kind) []step {
	s := make([]step, len(ks))
	for i, k := range ks {
		s[i] = step{kind: k}
	}
	return s
}

// testEventHashID is an event hash ID of the CBV 2.0 form.
const testEventHashID = "ni:///sha-256;6ae96341e0acc6d7a261364751f60e68278a81cdf51da0abb6b4e617014e39d7?ver=CBV2.0"
