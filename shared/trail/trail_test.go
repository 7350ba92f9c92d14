package trail_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/trail"
)

// TestPublish: an action is stored once on its subject, whatever the
// retries with its message id; without an AUDIT stream the write fails.
func TestPublish(t *testing.T) {
	js := natstest.Start(t).JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	act := api.AuditAction{Action: "paused", Object: "drain", ObjectID: "d1", Actor: "redriver", At: time.Now().UTC(), Reason: "canary"}
	if _, err := trail.Publish(ctx, js, act, "drain-d1-1"); err == nil {
		t.Fatal("a write with no AUDIT stream succeeded")
	}
	if err := streams.EnsureStream(ctx, js, streams.Audit(streams.DefaultOptions())); err != nil {
		t.Fatal(err)
	}
	first, err := trail.Publish(ctx, js, act, "drain-d1-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := trail.Publish(ctx, js, act, "drain-d1-1")
	if err != nil || again != first {
		t.Fatalf("retry: seq %d, %v; want the first copy's %d", again, err, first)
	}
	s, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subjects.AuditAction("drain", "d1"))
	if err != nil {
		t.Fatal(err)
	}
	var got api.AuditAction
	if err := json.Unmarshal(m.Data, &got); err != nil || got.Action != "paused" || got.Reason != "canary" || m.Sequence != first {
		t.Fatalf("stored %+v at %d, %v; want the action at %d", got, m.Sequence, err, first)
	}
	if info, _ := s.Info(ctx); info.State.Msgs != 1 {
		t.Errorf("AUDIT holds %d messages, want 1", info.State.Msgs)
	}
}
