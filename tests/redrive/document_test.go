package redrive

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
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

// TestRedriveOfWholeDocument: a document that does not parse is
// quarantined whole (MALFORMED_DOCUMENT). Corrected with its complete
// bytes and redriven, its events are committed or quarantined on their own
// (one bad event here), and the document's own chain gets its outcome at
// once: replayed, on the replay's EVENTS message, naming how many events
// were committed, duplicates and quarantined; the redrive answers
// replayed without waiting for the outcome timeout, and a second redrive
// of the resolved chain writes nothing. A correction that still does not
// read as a document fails again on the chain (replay_failed
// MALFORMED_DOCUMENT).
func TestRedriveOfWholeDocument(t *testing.T) {
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	data, err := set.Document("SHIP-WHOLE & <Müller>", 9_500, n, map[int]bool{3: true})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := document.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		correction []byte
		outcome    string
	}{
		{"corrected: the whole document", data, api.OutcomeReplayed},
		{"corrected: still no EPCIS document", []byte(`{"type":"EPCISDocument","epcisBody":"Müller & Söhne <Großhandel>"}`), api.OutcomeReplayFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, 1, false)
			cfg := redriverConfig()
			// The redrive answers within RedriveWait, the outcome
			// observed within OutcomeTimeout: both longer than the test
			// may wait, the outcome must come from the chain.
			cfg.OutcomeTimeout, cfg.RedriveWait = 2*time.Minute, time.Minute
			e.startRedriver(t, cfg)
			subject := subjects.Event(dscsa.Name, subjects.DocumentType)
			cut := data[:len(data)/2]
			if _, err := e.js.Publish(context.Background(), subject, cut); err != nil {
				t.Fatal(err)
			}
			id := record.PayloadDLQID(dscsa.Name, subject, cut)
			st := e.waitState(t, id, func(st record.State) bool { return st.Status == record.StatusOpen }, "open")
			if st.ErrorCode != dscsa.MalformedDocument {
				t.Fatalf("chain %s: code %s, want %s", id, st.ErrorCode, dscsa.MalformedDocument)
			}
			start := time.Now()
			var rep api.RedriveReply
			e.requestJSON(t, api.Redrive, api.RedriveRequest{DLQID: id, Payload: tc.correction, Actor: access.DefaultPerson(access.RoleOperator),
				Reason: "the partner resent the shipment document"}, &rep)
			if rep.Outcome != tc.outcome {
				t.Fatalf("redrive %+v, want %s", rep, tc.outcome)
			}
			if waited := time.Since(start); waited >= cfg.RedriveWait {
				t.Fatalf("the redrive waited %v: its outcome timeout", waited)
			}
			recs, cs, err := e.chain(t, id)
			if err != nil {
				t.Fatal(err)
			}
			last := recs[len(recs)-1]
			if tc.outcome == api.OutcomeReplayFailed {
				if cs.Status != record.StatusOpen || last.Kind != record.KindReplayFailed || last.ErrorCode != dscsa.MalformedDocument {
					t.Fatalf("chain %s, last record %s %s; want open, replay_failed %s", cs.Status, last.Kind, last.ErrorCode, dscsa.MalformedDocument)
				}
				return
			}
			want := fmt.Sprintf("document replayed: %d events, %d committed, 0 duplicates, 1 quarantined", n, n-1)
			if cs.Status != record.StatusResolved || last.Kind != record.KindReplayed || last.Reason != want ||
				last.SourceStream != subjects.EventsStream || last.SourceSeq == 0 {
				t.Fatalf("chain %s/%s, last record %s %q on %s %d; want resolved, replayed %q", cs.Status, cs.Class, last.Kind, last.Reason,
					last.SourceStream, last.SourceSeq, want)
			}
			// Each event is committed once from the replay, or
			// quarantined on its own.
			for i, ev := range doc.Events {
				m, err := gate.Decode(ev)
				if err != nil {
					t.Fatal(err)
				}
				typ, _ := (dscsa.Checker{}).EventType(m)
				env, err := e.gate.Check(subjects.Event(dscsa.Name, typ), ev)
				if i == 3 {
					if err == nil {
						t.Fatal("event 3 passes the gate")
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				ks, found, err := idempotency.Lookup(context.Background(), e.kv, env.IdempotencyKey)
				if err != nil || !found || !ks.Committed() || ks.SourceSeq != last.SourceSeq {
					t.Errorf("event %d: key state %+v found %v err %v; want committed from the replay (EVENTS %d)", i, ks, found, err, last.SourceSeq)
				}
			}
			// The resolved chain is not redriven again.
			b, _ := json.Marshal(api.RedriveRequest{DLQID: id})
			body, code := e.request(t, api.Redrive, b)
			again, _, err := e.chain(t, id)
			if err != nil || len(again) != len(recs) {
				t.Errorf("a second redrive of the resolved chain (%s %s) gave %d records, want %d", code, body, len(again), len(recs))
			}
		})
	}
}
