package redrive

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestRedriveOfDocumentEvent: the events of a document published while
// the downstream is down exhaust their deliveries and are quarantined one
// by one, each chain with the document's provenance; a redrive of one of
// them replays that event alone: it commits, and the document's other
// events stay uncommitted.
func TestRedriveOfDocumentEvent(t *testing.T) {
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	data, err := set.Document("SHIP-REDRIVE", 9_000, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := document.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.startRedriver(t, redriverConfig())
	events := make([]event, n)
	for i, ev := range doc.Events {
		m, err := gate.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		typ, _ := (dscsa.Checker{}).EventType(m)
		env, err := e.gate.Check(subjects.Event(dscsa.Name, typ), ev)
		if err != nil {
			t.Fatal(err)
		}
		events[i] = event{subject: subjects.Event(dscsa.Name, typ), data: ev, key: env.IdempotencyKey}
	}
	e.down.down.Store(true)
	if _, err := e.js.Publish(context.Background(), subjects.Event(dscsa.Name, subjects.DocumentType), data); err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		st := e.waitState(t, ev.key, func(st record.State) bool {
			return st.Status == record.StatusOpen && st.Class == record.ClassExhausted
		}, "open exhausted")
		if d := st.Document; d == nil || d.Index != i || d.Count != n || d.ID != "SHIP-REDRIVE" || d.SHA256 != doc.SHA256 || st.SourceSubject != ev.subject {
			t.Fatalf("event %d: chain on %s with document %+v", i, st.SourceSubject, st.Document)
		}
	}
	e.down.down.Store(false)
	var rep api.RedriveReply
	e.requestJSON(t, api.Redrive, api.RedriveRequest{DLQID: events[2].key}, &rep)
	if rep.Outcome != api.OutcomeReplayed {
		t.Fatalf("redrive %+v", rep)
	}
	e.committedOnce(t, events[2:3])
	for i, ev := range events {
		if got := e.down.acceptedOf(ev.key); i != 2 && got != 0 {
			t.Errorf("event %d: downstream accepted %d posts after a redrive of event 2", i, got)
		}
		ls, err := e.js.Stream(context.Background(), subjects.LedgerStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := ls.Info(context.Background(), jetstream.WithSubjectFilter(subjects.Ledger(dscsa.Name, ev.key)))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.State.Subjects[subjects.Ledger(dscsa.Name, ev.key)]; i != 2 && got != 0 {
			t.Errorf("event %d: %d LEDGER entries after a redrive of event 2", i, got)
		}
	}
}
