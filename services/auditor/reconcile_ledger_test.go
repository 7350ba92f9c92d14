package auditor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestReconcileLedgerSources: reconciliation walks LEDGER back to EVENTS.
// An entry whose headers name the EVENTS message it was committed from,
// with that message's content and key, is sourced; every other entry is
// listed unsourced with its reason (its headers are the writer's choice,
// so only the EVENTS message counts), and the gauge says how many.
func TestReconcileLedgerSources(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	valid, err := os.ReadFile("../../schemas/testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		t.Fatal(err)
	}
	const subject = "events.pharmacy.dispense"
	a := e.startAuditor(t, testConfig(), nil)
	// Three events, each with its own transaction id, hence key.
	docs := make([][]byte, 3)
	keys := make([]string, 3)
	seqs := make([]uint64, 3)
	for i := range docs {
		docs[i] = bytes.Replace(valid, []byte(`"INV-2025-0181"`), fmt.Appendf(nil, `"INV-2025-%04d"`, 7000+i), 1)
		env, err := a.gate.Check(subject, docs[i])
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = env.IdempotencyKey
		ack, err := e.js.Publish(ctx, subject, docs[i])
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = ack.Sequence
	}
	reordered := []byte(`{"unit":"EA","transaction_id":"INV-2025-7000","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917",` +
		`"expiry":"2026-09-30","quantity_delta":"-30","event_type":"dispense","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412"}`)
	if idempotency.ContentHash("pharmacy", reordered) != idempotency.ContentHash("pharmacy", docs[0]) {
		t.Fatal("the reordered copy is not canonically equal")
	}
	other := bytes.Replace(docs[1], []byte(`"-30"`), []byte(`"-300"`), 1)
	type entry struct {
		name      string
		key       string
		data      []byte
		source    string // EVENTS sequence header ("" none)
		hash      string // content hash header ("" none)
		dlqID     string
		unsourced string // want: the reason, "" sourced
	}
	rows := []entry{
		{"the validator's commit", keys[0], reordered, strconv.FormatUint(seqs[0], 10), idempotency.ContentHash("pharmacy", reordered), "", ""},
		{"arbitrary JSON, no source", "pharmacy_00000000000000000000000000000001", []byte(`{"quantity_delta":"-300","note":"Müller & Söhne <Großhandel>"}`), "", "", "", api.UnsourcedNoSource},
		{"other content than its source", keys[1], other, strconv.FormatUint(seqs[1], 10), idempotency.ContentHash("pharmacy", other), "", api.UnsourcedContentMismatch},
		{"a content hash header that is not its payload's", keys[2], docs[2], strconv.FormatUint(seqs[2], 10), idempotency.ContentHash("pharmacy", other), "", api.UnsourcedContentMismatch},
		{"a real source under another key", "pharmacy_00000000000000000000000000000002", docs[0], strconv.FormatUint(seqs[0], 10), "", "", api.UnsourcedKeyMismatch},
		{"a source EVENTS never held", "pharmacy_00000000000000000000000000000003", docs[0], "999999", "", "", api.UnsourcedSourceMissing},
		{"a replay's chain the source does not name", "pharmacy_00000000000000000000000000000004", docs[2], strconv.FormatUint(seqs[2], 10), "", "pharmacy_ab", api.UnsourcedKeyMismatch},
	}
	want := map[uint64]string{}
	for _, r := range rows {
		m := nats.NewMsg(subjects.Ledger("pharmacy", r.key))
		m.Data = r.data
		if r.source != "" {
			m.Header.Set(envelope.SourceStream, subjects.EventsStream)
			m.Header.Set(envelope.SourceSeq, r.source)
		}
		if r.hash != "" {
			m.Header.Set(envelope.ContentHash, r.hash)
		}
		if r.dlqID != "" {
			m.Header.Set(envelope.DLQID, r.dlqID)
		}
		ack, err := e.js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if r.unsourced != "" {
			want[ack.Sequence] = r.unsourced
		}
	}
	var rep api.ReconcileReply
	request(t, e.nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s"}, &rep)
	lr := rep.Ledger
	if lr.Entries != len(rows) || lr.Sourced != 1 || lr.Unsourced != len(want) || len(lr.UnsourcedEntries) != len(want) {
		t.Fatalf("ledger %+v, want %d entries, 1 sourced, %d unsourced", lr, len(rows), len(want))
	}
	for _, u := range lr.UnsourcedEntries {
		if want[u.Seq] != u.Reason {
			t.Errorf("entry %d (%s): reason %q, want %q", u.Seq, u.Subject, u.Reason, want[u.Seq])
		}
	}
	if got := testutil.ToFloat64(a.metrics.unsourced); got != float64(len(want)) {
		t.Errorf("unsourced gauge %v, want %d", got, len(want))
	}
	// A domain's reconciliation walks that domain's entries only.
	request(t, e.nc, api.AuditReconcile, api.ReconcileRequest{Domain: "fsma", Grace: "0s"}, &rep)
	if rep.Ledger.Entries != 0 {
		t.Errorf("an fsma reconciliation examined %d pharmacy entries", rep.Ledger.Entries)
	}
}

// TestReconcileLedgerRekeyed: a LEDGER entry whose event the gate keys
// otherwise now (a DSCSA event without eventID committed under the key of
// an earlier derivation, before the CBV 2.0 event hash ID) is listed with
// its current key, whether its source is in EVENTS (then it is also
// unsourced key_mismatch) or not named at all; an entry under the key the
// gate derives now is not listed. Nothing is re-keyed.
func TestReconcileLedgerRekeyed(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	event, err := os.ReadFile("../../schemas/testdata/dscsa/valid/shipping-without-context-and-eventid.json")
	if err != nil {
		t.Fatal(err)
	}
	a := e.startAuditor(t, testConfig(), nil)
	subject := subjects.Event("dscsa", "shipping")
	env, err := a.gate.Check(subject, event)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := e.js.Publish(ctx, subject, event)
	if err != nil {
		t.Fatal(err)
	}
	// The key an earlier derivation gave it (the hash of its identity).
	const oldKey = "dscsa_5b1e0c8a2f6d4e9b8a7c6d5e4f3a2b1c"
	for _, r := range []struct {
		name, key, source string
		rekeyed           bool
	}{
		{"the validator's commit under the current key", env.IdempotencyKey, strconv.FormatUint(ack.Sequence, 10), false},
		{"committed under the earlier derivation's key", oldKey, strconv.FormatUint(ack.Sequence, 10), true},
		{"under another key, naming no source", "dscsa_00000000000000000000000000000009", "", true},
	} {
		m := nats.NewMsg(subjects.Ledger("dscsa", r.key))
		m.Data = event
		m.Header.Set(envelope.EventType, "shipping")
		if r.source != "" {
			m.Header.Set(envelope.SourceStream, subjects.EventsStream)
			m.Header.Set(envelope.SourceSeq, r.source)
		}
		if _, err := e.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
	var rep api.ReconcileReply
	request(t, e.nc, api.AuditReconcile, api.ReconcileRequest{Domain: "dscsa", Grace: "0s"}, &rep)
	lr := rep.Ledger
	if lr.Entries != 3 || lr.Sourced != 1 || lr.Unsourced != 2 || lr.Rekeyed != 2 || len(lr.RekeyedEntries) != 2 {
		t.Fatalf("ledger %+v, want 3 entries, 1 sourced, 2 unsourced, 2 keyed otherwise now", lr)
	}
	want := map[string]string{subjects.Ledger("dscsa", oldKey): api.UnsourcedKeyMismatch,
		subjects.Ledger("dscsa", "dscsa_00000000000000000000000000000009"): api.UnsourcedNoSource}
	for _, r := range lr.RekeyedEntries {
		if reason, ok := want[r.Subject]; !ok || r.Reason != reason || r.CurrentKey != env.IdempotencyKey {
			t.Errorf("rekeyed %+v, want reason %q and current key %s", r, reason, env.IdempotencyKey)
		}
	}
}
