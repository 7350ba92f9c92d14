package redriver

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	drainpart "github.com/deadletter/deadletter/services/redriver/drains"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestDrainEventsOutbox (I9): a drain's governance event that AUDIT
// refuses is never lost nor doubled: drain.status shows it unrecorded and
// the metric counts it while AUDIT refuses (its stream takes no governance
// actions for a while), and once AUDIT takes writes again it holds the
// event exactly once, whether the same redriver wrote it or one started
// after a restart.
func TestDrainEventsOutbox(t *testing.T) {
	srv, nc, js, cfg := provisioned(t, "redriver-outbox-test")
	ctx := context.Background()
	drains, err := js.KeyValue(ctx, subjects.DrainsBucket)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name    string
		restart bool
	}{
		{"AUDIT refuses, then takes writes", false},
		{"AUDIT refuses across a restart", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, stop := startStoppable(t, srv.Connect(t), cfg)
			waitRedriver(t, nc)
			id := fmt.Sprintf("drain-20260101T000000-0utb0x%02d", i)
			st := api.DrainState{DrainID: id, Status: api.DrainPaused, Owner: "elsewhere", Heartbeat: time.Now().UTC(),
				Events: []api.DrainEvent{{Action: api.ActionPaused, Actor: drainpart.AutoActor, At: time.Now().UTC(), Reason: api.PauseCanary}}}
			b, _ := json.Marshal(st)
			if _, err := drains.Create(ctx, id, b); err != nil {
				t.Fatal(err)
			}
			refuseGovernance(t, js, true)
			var rep api.DrainState
			callJSON(t, nc, api.DrainCancel, api.DrainIDRequest{DrainID: id}, &rep)
			if n := len(rep.Events); n != 2 || !rep.Events[1].Unrecorded || rep.Events[0].Unrecorded {
				t.Fatalf("drain.cancel answered events %+v, want the cancel unrecorded", rep.Events)
			}
			natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
				if v := testutil.ToFloat64(svc.metrics.unrecorded); v != 1 {
					return fmt.Errorf("deadletter_redrive_audit_unrecorded = %v, want 1", v)
				}
				return nil
			})
			callJSON(t, nc, api.DrainStatus, api.DrainIDRequest{DrainID: id}, &rep)
			if len(rep.Events) != 2 || !rep.Events[1].Unrecorded {
				t.Fatalf("drain.status events %+v, want the cancel unrecorded", rep.Events)
			}
			if n := auditActions(t, js, id); n != 0 {
				t.Fatalf("AUDIT holds %d actions of the drain while it refuses", n)
			}
			if tc.restart {
				stop()
				svc, stop = startStoppable(t, srv.Connect(t), cfg)
				waitRedriver(t, nc)
			}
			refuseGovernance(t, js, false)
			natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
				var cur api.DrainState
				callJSON(t, nc, api.DrainStatus, api.DrainIDRequest{DrainID: id}, &cur)
				if len(cur.Events) != 2 || cur.Events[1].Unrecorded {
					return fmt.Errorf("events %+v, want the cancel recorded", cur.Events)
				}
				if v := testutil.ToFloat64(svc.metrics.unrecorded); v != 0 {
					return fmt.Errorf("deadletter_redrive_audit_unrecorded = %v, want 0", v)
				}
				return nil
			})
			if n := auditActions(t, js, id); n != 1 {
				t.Errorf("AUDIT holds %d actions of the drain, want the cancel once", n)
			}
			// One more pass of the outbox writes nothing again.
			if left, err := svc.drainRunner.FlushOutbox(ctx); left != 0 || err != nil {
				t.Errorf("flushOutbox = %d, %v", left, err)
			}
			if n := auditActions(t, js, id); n != 1 {
				t.Errorf("AUDIT holds %d actions of the drain after another pass, want 1", n)
			}
			stop()
		})
	}
}

// provisioned starts a server with the streams provisioned and returns it
// with an admin connection, its JetStream context and a redriver
// configuration for instance (no provisioning, anonymous callers).
func provisioned(t *testing.T, instance string) (*natstest.Server, *nats.Conn, jetstream.JetStream, Config) {
	t.Helper()
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Provision, cfg.AllowAnonymous = false, true
	cfg.InstanceID = instance
	return srv, nc, js, cfg
}

// drainCompleted starts a drain of req on nc and waits until it is
// completed, returning its state.
func drainCompleted(t *testing.T, nc *nats.Conn, req api.DrainStartRequest) api.DrainState {
	t.Helper()
	var started api.DrainStartReply
	callJSON(t, nc, api.DrainStart, req, &started)
	var st api.DrainState
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		callJSON(t, nc, api.DrainStatus, api.DrainIDRequest{DrainID: started.DrainID}, &st)
		if st.Status != api.DrainCompleted {
			return fmt.Errorf("drain %s, waiting for it completed", st.Status)
		}
		return nil
	})
	return st
}

// startStoppable runs a redriver on nc and returns it with its stop
// (idempotent; also run at cleanup).
func startStoppable(tb testing.TB, nc *nats.Conn, cfg Config) (*Service, func()) {
	tb.Helper()
	s, err := New(nc, cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
		nc.Close()
	}
	tb.Cleanup(stop)
	return s, stop
}

// refuseGovernance makes AUDIT refuse governance actions (its stream
// stops taking audit.actions.>: a publish finds no stream), or take them
// again. Nothing stored is touched.
func refuseGovernance(tb testing.TB, js jetstream.JetStream, refuse bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		tb.Fatal(err)
	}
	c := s.CachedInfo().Config
	c.Subjects = []string{subjects.AuditCheckpoints, subjects.AuditAccessAll}
	if !refuse {
		c.Subjects = append(c.Subjects, subjects.AuditActionsAll)
	}
	if _, err := js.UpdateStream(ctx, c); err != nil {
		tb.Fatalf("AUDIT subjects: %v", err)
	}
}

// auditActions counts the drain's actions in AUDIT.
func auditActions(tb testing.TB, js jetstream.JetStream, id string) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		tb.Fatal(err)
	}
	subj := subjects.AuditAction("drain", id)
	in, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		tb.Fatal(err)
	}
	return in.State.Subjects[subj]
}

// callJSON sends req to subject on nc and decodes the reply into rep.
func callJSON(tb testing.TB, nc *nats.Conn, subject string, req, rep any) {
	tb.Helper()
	b, _ := json.Marshal(req)
	m, err := nc.Request(subject, b, 30*time.Second)
	if err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		tb.Fatalf("%s: %s %s", subject, code, m.Header.Get("Nats-Service-Error"))
	}
	if err := json.Unmarshal(m.Data, rep); err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
}
