package quarantiner

import (
	"maps"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
)

// TestSameMalformedBytesOneChain: the same malformed bytes published twice
// (two EVENTS messages, two failure reports, as the validator makes them)
// give one chain, carrying the identity the payload lets its domain derive;
// other bytes give another chain (issue 15, bug 3: each publish made a new
// chain, with no party id or ordering key).
func TestSameMalformedBytesOneChain(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	const subject = "events.pharmacy.dispense"
	// Parseable, schema-valid, but a Schedule II dispense without its lot.
	data := []byte(`{"transaction_id":"INV-1","registrant_dea":"BW4829137","ndc":"00406-0512-01","quantity_delta":"-30",` +
		`"unit":"EA","event_type":"dispense","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-1"}`)
	other := append([]byte(nil), data...)
	other[len(other)-3] = '2' // "RPH-2": other bytes, same identity
	report := func(b []byte) record.Failure {
		_, err := g.Check(subject, b)
		if codes.Of(err) != codes.MissingLot {
			t.Fatalf("example: %v", err)
		}
		f := structural(subject, e.publishEvent(t, subject, b, nil), b, codes.MissingLot)
		id := g.Identify(subject, b)
		f.Envelope = &id
		e.reportFailure(t, f)
		return f
	}
	f1, f2 := report(data), report(data)
	e.waitRecords(t, 1)
	e.intakeEmpty(t)
	if n := len(e.allRecords(t)); n != 1 {
		t.Fatalf("%d records for the same bytes published twice, want 1", n)
	}
	if record.DLQIDFor(f1) != record.DLQIDFor(f2) {
		t.Fatalf("dlq ids %s and %s", record.DLQIDFor(f1), record.DLQIDFor(f2))
	}
	r := e.allRecords(t)[0]
	if r.PartyID != "BW4829137" || r.OrderingKey != "BW4829137.00406051201." || r.IdempotencyKey == "" || r.EventTime == nil {
		t.Errorf("record identity: party %q, ordering key %q, key %q, time %v", r.PartyID, r.OrderingKey, r.IdempotencyKey, r.EventTime)
	}
	// The listed identifiers (the Records list's transaction id), and no
	// other payload value.
	if want := map[string]string{"transaction_id": "INV-1", "registrant_dea": "BW4829137"}; !maps.Equal(r.Identifiers, want) {
		t.Errorf("record identifiers %v, want %v", r.Identifiers, want)
	}
	verify(t, e.chainOf(t, "pharmacy", r.DLQID))

	f3 := report(other)
	e.waitRecords(t, 2)
	if record.DLQIDFor(f3) == r.DLQID {
		t.Fatal("other bytes share the chain")
	}
}

// TestExhaustedMalformedEventNamedByPayload: an event that does not pass
// the gate and reaches the quarantiner through the max-deliveries advisory
// (the validator could not store its failure report while a cluster
// elected a leader, until its deliveries ran out) is named as the
// validator names it, by its payload, so that the report that follows
// lands in the same chain and audit.reconcile finds it. It was named by
// its EVENTS position: a second chain, and reconcile called the event
// unaccounted (a chaos run on a 3-node cluster, 14 to 42 of 3,000 events).
func TestExhaustedMalformedEventNamedByPayload(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	const subject = "events.pharmacy.dispense"
	data := []byte(`{"transaction_id": "TX-9", "ndc": "bad"`)
	seq := e.publishEvent(t, subject, data, nil)
	e.exhaust(t, seq, 2)
	e.waitRecords(t, 1)
	want := record.PayloadDLQID("pharmacy", subject, data)
	if r := e.allRecords(t)[0]; r.DLQID != want {
		t.Fatalf("dlq id %s, want %s (by payload)", r.DLQID, want)
	}
	// The validator's report of the same event, arriving later.
	f := structural(subject, seq, data, codes.MalformedJSON)
	id := g.Identify(subject, data)
	f.Envelope = &id
	e.reportFailure(t, f)
	e.intakeEmpty(t)
	if n := len(e.allRecords(t)); n != 1 {
		t.Fatalf("%d records, want 1 chain of 1 record", n)
	}
}
