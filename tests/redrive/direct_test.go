package redrive

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestResumedReplayStoredOnce: a chain left redriving with its replay
// stored in EVENTS but not committed (no validator running) is resumed by
// a later redrive: the re-publish is refused by EVENTS and resolves to the
// stored copy, so the replay's subject still holds one message; once a
// validator commits that copy, the chain is resolved replayed at its
// EVENTS sequence, and the event is committed once.
func TestResumedReplayStoredOnce(t *testing.T) {
	e := newEnvWithoutValidator(t, 1)
	ev := e.pharmacyEvent(t, 7100)
	e.seedExhausted(t, []event{ev})
	cfg := redriverConfig()
	cfg.RedriveWait = 300 * time.Millisecond
	e.startRedriver(t, cfg)
	ctx := context.Background()
	es, err := e.js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	subject := subjects.Redriven("pharmacy", "dispense", ev.dlqID(), 1)
	stored := func(t *testing.T) (uint64, uint64) {
		t.Helper()
		info, err := es.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		m, err := es.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			t.Fatalf("no replay on %s: %v", subject, err)
		}
		return info.State.Subjects[subject], m.Sequence
	}
	redrive := func(t *testing.T, want string) api.RedriveReply {
		t.Helper()
		var rep api.RedriveReply
		e.requestJSON(t, api.Redrive, api.RedriveRequest{DLQID: ev.dlqID(), Reason: "test"}, &rep)
		if rep.Outcome != want {
			t.Fatalf("redrive: %+v, want outcome %s", rep, want)
		}
		return rep
	}
	redrive(t, api.OutcomePending)
	n, seq := stored(t)
	if n != 1 {
		t.Fatalf("%d replays on %s after the first redrive, want 1", n, subject)
	}
	if st := e.waitState(t, ev.dlqID(), func(st record.State) bool { return st.Status == record.StatusRedriving }, "redriving"); st.RedriveCount != 0 {
		t.Fatalf("redrive count %d while redriving, want 0", st.RedriveCount)
	}
	// The resume publishes the same replay again: refused, not stored.
	redrive(t, api.OutcomePending)
	if n2, seq2 := stored(t); n2 != 1 || seq2 != seq {
		t.Fatalf("after the resume: %d replays on %s, last at %d; want 1 at %d", n2, subject, seq2, seq)
	}
	e.startValidator(t, true)
	e.waitState(t, ev.dlqID(), func(st record.State) bool { return st.Status == record.StatusResolved }, "resolved")
	records, _, err := e.chain(t, ev.dlqID())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []record.Kind
	for _, r := range records {
		kinds = append(kinds, r.Kind)
	}
	t.Logf("chain %v", kinds)
	if len(records) != 3 || kinds[1] != record.KindRedriveRequested || kinds[2] != record.KindReplayed {
		t.Fatalf("chain %v, want quarantined, redrive_requested, replayed", kinds)
	}
	if out := records[2]; out.SourceStream != subjects.EventsStream || out.SourceSeq != seq {
		t.Errorf("replayed record at %s/%d, want %s/%d", out.SourceStream, out.SourceSeq, subjects.EventsStream, seq)
	}
	if n, _ := stored(t); n != 1 {
		t.Errorf("%d replays on %s, want 1", n, subject)
	}
	e.committedOnce(t, []event{ev})
}
