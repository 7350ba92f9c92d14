package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// auditActions returns the governance actions AUDIT holds for a drain.
func (e *env) auditActions(tb testing.TB, id string) []api.AuditAction {
	tb.Helper()
	s, err := e.js.Stream(context.Background(), subjects.AuditStream)
	if err != nil {
		tb.Fatal(err)
	}
	var out []api.AuditAction
	for next := uint64(1); ; {
		m, err := s.GetMsg(context.Background(), next, jetstream.WithGetMsgSubject(subjects.AuditAction("drain", id)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		var a api.AuditAction
		if err := json.Unmarshal(m.Data, &a); err != nil {
			tb.Fatalf("AUDIT %d: %v", m.Sequence, err)
		}
		out = append(out, a)
		next = m.Sequence + 1
	}
}

// waitSettled polls until the drain no longer runs on r and its stored
// status is want.
func (e *env) waitSettled(tb testing.TB, r *runningRedriver, id, want string) api.DrainState {
	tb.Helper()
	var st api.DrainState
	natstest.CheckFor(tb, 60*time.Second, 50*time.Millisecond, func() error {
		if _, running := r.Status(id); running {
			return errors.New("still running")
		}
		e.requestJSON(tb, api.DrainStatus, api.DrainIDRequest{DrainID: id}, &st)
		if st.Status != want {
			return fmt.Errorf("drain is %s, want %s", st.Status, want)
		}
		return nil
	})
	return st
}

// atMostOnce checks no event was committed or accepted twice, and that no
// chain got a second outcome for one replay request.
func (e *env) atMostOnce(tb testing.TB, events []event) (committed int) {
	tb.Helper()
	for _, ev := range events {
		if n := e.down.acceptedOf(ev.key); n > 1 {
			tb.Errorf("%s: downstream accepted %d posts", ev.key, n)
		}
		recs, st, err := e.chain(tb, ev.key)
		if err != nil {
			tb.Fatal(err)
		}
		if st.Status == record.StatusResolved {
			committed++
		}
		requests, outcomes := 0, 0
		for _, r := range recs {
			switch r.Kind {
			case record.KindRedriveRequested:
				requests++
			case record.KindReplayed, record.KindSkippedDuplicate, record.KindReplayFailed, record.KindPoisoned:
				outcomes++
			}
		}
		if outcomes > requests {
			tb.Errorf("%s: %d outcomes for %d replay requests", ev.key, outcomes, requests)
		}
	}
	return committed
}

// TestCanaryStopsDrainAgainstFailingDownstream: with a downstream still
// failing half the replays, a drain's canary (20 of 200) pauses it before
// anything else is replayed; the dry run showed the same picks; the pause is
// an event of the drain and an action in AUDIT, with the failing codes, and
// a metric. Resumed once the downstream is well, the drain replays the rest
// (not the canary's failures: a drain replays an event at most once), each
// committed once.
func TestCanaryStopsDrainAgainstFailingDownstream(t *testing.T) {
	e := newEnv(t)
	var events []event
	for i := range 200 {
		events = append(events, e.pharmacyEvent(t, 5000+i))
	}
	e.seedExhausted(t, events)
	for i, ev := range events {
		e.down.fail(ev.key, i%2 == 0)
	}
	reg := prometheus.NewRegistry()
	cfg := redriverConfig()
	cfg.Registerer = reg
	r := e.startRedriver(t, cfg)
	req := api.DrainStartRequest{Canary: 20, MaxFailureRate: ptr(0.2), RatePerSecond: ptr(0.0), MaxConcurrency: 8}

	dry := req
	dry.DryRun = true
	var plan api.DrainStartReply
	e.requestJSON(t, api.DrainStart, dry, &plan)
	if plan.Plan == nil || len(plan.Plan.Canary) != 20 {
		t.Fatalf("dry run canary %+v", plan.Plan)
	}
	picked := map[string]bool{}
	for _, p := range plan.Plan.Canary {
		picked[p.DLQID] = true
	}

	id := e.startDrain(t, req)
	st := e.waitSettled(t, r, id, api.DrainPaused)
	if st.Replayed != 20 || st.ReplayFailed+st.Committed != 20 || st.ReplayFailed < 5 {
		t.Fatalf("paused drain counts %+v", st.DrainCounts)
	}
	for _, ev := range events {
		if _, st, _ := e.chain(t, ev.key); st.RedriveCount > 0 && !picked[ev.key] {
			t.Errorf("%s replayed but not among the dry run's canary", ev.key)
		}
	}
	if len(st.Events) != 1 {
		t.Fatalf("events %+v", st.Events)
	}
	ev := st.Events[0]
	if ev.Action != api.ActionPaused || ev.Reason != api.PauseCanary || ev.Actor != "redriver" || ev.Codes["DOWNSTREAM_UNAVAILABLE"] != st.ReplayFailed ||
		ev.Window == nil || ev.Window.Outcomes != 20 || ev.Window.Rate <= 0.2 {
		t.Errorf("pause event %+v (window %+v)", ev, ev.Window)
	}
	if n := counter(t, reg, "deadletter_redriver_drain_pauses_total"); n != 1 {
		t.Errorf("pauses metric %v, want 1", n)
	}
	acts := e.auditActions(t, id)
	if len(acts) != 1 || acts[0].Action != api.ActionPaused || acts[0].ObjectID != id || acts[0].Actor != "redriver" || acts[0].Reason != api.PauseCanary {
		t.Fatalf("AUDIT actions %+v", acts)
	}

	for _, ev := range events {
		e.down.fail(ev.key, false)
	}
	var resumed api.DrainState
	e.requestJSON(t, api.DrainResume, api.DrainResumeRequest{DrainID: id, Reason: "downstream fixed"}, &resumed)
	final := e.waitDrain(t, id, 60*time.Second)
	if final.Status != api.DrainCompleted || final.Committed != 200-st.ReplayFailed || final.ReplayFailed != st.ReplayFailed {
		t.Fatalf("resumed drain %s %+v", final.Status, final.DrainCounts)
	}
	if got := e.atMostOnce(t, events); got != final.Committed {
		t.Errorf("%d chains resolved, drain says %d committed", got, final.Committed)
	}
	acts = e.auditActions(t, id)
	if len(acts) != 2 || acts[1].Action != api.ActionResumed || acts[1].Reason != "downstream fixed" || acts[1].Actor == "" {
		t.Errorf("AUDIT actions %+v", acts)
	}
}

// TestCanaryPassesAndDrainCompletes: a healthy downstream passes the canary
// and the drain goes on with the rest; every event is committed once.
func TestCanaryPassesAndDrainCompletes(t *testing.T) {
	e := newEnv(t)
	var events []event
	for i := range 60 {
		events = append(events, e.pharmacyEvent(t, 6000+i))
	}
	e.seedExhausted(t, events)
	e.startRedriver(t, redriverConfig())
	id := e.startDrain(t, api.DrainStartRequest{Canary: 10, RatePerSecond: ptr(0.0), MaxConcurrency: 4})
	st := e.waitDrain(t, id, 60*time.Second)
	if st.Status != api.DrainCompleted || st.Committed != 60 || len(st.Events) != 0 || !st.CanaryDone {
		t.Fatalf("drain %s %+v events %+v", st.Status, st.DrainCounts, st.Events)
	}
	e.committedOnce(t, events)
}

// TestAutoPauseMidDrainAndResume: a downstream that starts failing mid-drain
// pauses the drain within 10 outcomes of its window's rate crossing the
// max; the pause survives a redriver restart (its lanes do not start
// again); drain.resume continues it with its counts, and every event is
// committed at most once.
func TestAutoPauseMidDrainAndResume(t *testing.T) {
	e := newEnv(t)
	var events []event
	for i := range 300 {
		events = append(events, e.pharmacyEvent(t, 7000+i))
	}
	e.seedExhausted(t, events)
	reg := prometheus.NewRegistry()
	cfg := redriverConfig()
	cfg.Registerer = reg
	r := e.startRedriver(t, cfg)
	const window, maxRate = 20, 0.25
	id := e.startDrain(t, api.DrainStartRequest{PauseWindow: window, MaxFailureRate: ptr(maxRate), RatePerSecond: ptr(100.0), MaxConcurrency: 4})
	natstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if st, ok := r.Status(id); !ok || st.Committed < 60 {
			return errors.New("not far enough")
		}
		return nil
	})
	e.down.down.Store(true)
	st := e.waitSettled(t, r, id, api.DrainPaused)
	// With a full window of successes, the 6th failure crosses 0.25
	// (6/20); the pause must come within 10 outcomes of it.
	crossing := int(maxRate*window) + 1
	t.Logf("paused with %d committed, %d failed, %d pending (crossing at failure %d)", st.Committed, st.ReplayFailed, st.Pending, crossing)
	if fails := st.ReplayFailed + st.Poisoned + st.Pending; fails < crossing || fails > crossing+10 {
		t.Errorf("%d failures before the pause settled, want %d..%d", fails, crossing, crossing+10)
	}
	if len(st.Events) != 1 || st.Events[0].Reason != api.PauseFailureRate || st.Events[0].Window.Rate <= maxRate ||
		st.Events[0].Window.Size != window || st.Events[0].Codes["DOWNSTREAM_UNAVAILABLE"] == 0 {
		t.Fatalf("events %+v", st.Events)
	}
	if n := counter(t, reg, "deadletter_redriver_drain_pauses_total"); n != 1 {
		t.Errorf("pauses metric %v, want 1", n)
	}

	// A restart leaves it paused: no lane runs again.
	r.stop()
	r = e.startRedriver(t, redriverConfig())
	time.Sleep(2 * redriverConfig().DrainLease) // no poll can show that nothing happens
	var after api.DrainState
	e.requestJSON(t, api.DrainStatus, api.DrainIDRequest{DrainID: id}, &after)
	if _, running := r.Status(id); running || after.Status != api.DrainPaused || after.Replayed != st.Replayed {
		t.Fatalf("after a restart: %s %+v (was %+v)", after.Status, after.DrainCounts, st.DrainCounts)
	}

	e.down.down.Store(false)
	e.requestJSON(t, api.DrainResume, api.DrainResumeRequest{DrainID: id, Reason: "downstream back"}, &after)
	final := e.waitDrain(t, id, 90*time.Second)
	if final.Status != api.DrainCompleted || final.Committed+final.ReplayFailed+final.Poisoned+final.Pending != 300 ||
		final.Committed < st.Committed || final.ReplayFailed < st.ReplayFailed {
		t.Fatalf("resumed drain %s %+v (paused at %+v)", final.Status, final.DrainCounts, st.DrainCounts)
	}
	if got := e.atMostOnce(t, events); got != final.Committed {
		t.Errorf("%d chains resolved, drain says %d committed", got, final.Committed)
	}
	acts := e.auditActions(t, id)
	if len(acts) != 2 || acts[0].Action != api.ActionPaused || acts[0].Reason != api.PauseFailureRate || acts[1].Action != api.ActionResumed {
		t.Errorf("AUDIT actions %+v", acts)
	}
	if len(final.Events) != 2 || final.Events[1].Action != api.ActionResumed || final.Events[1].Actor == "" {
		t.Errorf("events %+v", final.Events)
	}
}

// TestRampRaisesRate: a ramp of 2 then 10 replays a second (held 1 s each)
// before the drain's 100 holds the early replays to the first step's pace,
// and the drain then completes at full rate.
func TestRampRaisesRate(t *testing.T) {
	e := newEnv(t)
	var events []event
	for i := range 80 {
		events = append(events, e.pharmacyEvent(t, 8000+i))
	}
	e.seedExhausted(t, events)
	r := e.startRedriver(t, redriverConfig())
	start := time.Now()
	id := e.startDrain(t, api.DrainStartRequest{Ramp: []float64{2, 10}, RampHoldSeconds: 1, RatePerSecond: ptr(100.0), MaxConcurrency: 8})
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st, ok := r.Status(id); !ok || st.Replayed == 0 {
			return errors.New("no replay yet")
		}
		return nil
	})
	time.Sleep(700 * time.Millisecond) // a rate is measured over time
	st, _ := r.Status(id)
	if el := time.Since(start); el < time.Second && st.Replayed > 4 {
		t.Errorf("%d replays in the first %v at a first step of 2/s", st.Replayed, el)
	}
	final := e.waitDrain(t, id, 60*time.Second)
	if final.Status != api.DrainCompleted || final.Committed != 80 {
		t.Fatalf("drain %s %+v", final.Status, final.DrainCounts)
	}
	// 2 + 10 in the two holds, the remaining 68 at 100/s: well under the
	// 40 s the first step alone would take.
	if el := time.Since(start); el < 2*time.Second || el > 20*time.Second {
		t.Errorf("ramped drain took %v", el)
	}
	e.committedOnce(t, events)
}

// TestDrainGuardBadRequests: malformed guard controls and resumes get coded
// errors.
func TestDrainGuardBadRequests(t *testing.T) {
	e := newEnv(t)
	events := []event{e.pharmacyEvent(t, 9000)}
	e.seedExhausted(t, events)
	e.startRedriver(t, redriverConfig())
	done := e.startDrain(t, api.DrainStartRequest{})
	e.waitDrain(t, done, 30*time.Second)
	var slow []event
	for i := range 5 {
		slow = append(slow, e.pharmacyEvent(t, 9100+i))
	}
	e.seedExhausted(t, slow)
	running := e.startDrain(t, api.DrainStartRequest{RatePerSecond: ptr(0.2)})
	t.Cleanup(func() {
		var st api.DrainState
		e.requestJSON(t, api.DrainCancel, api.DrainIDRequest{DrainID: running}, &st)
	})
	for _, tc := range []struct {
		name, subject, body, code string
	}{
		{"unknown field", api.DrainStart, `{"canary":5,"canary_size":5}`, api.ErrBadRequest},
		{"negative canary", api.DrainStart, `{"canary":-1}`, api.ErrBadRequest},
		{"canary too big", api.DrainStart, `{"canary":10001}`, api.ErrBadRequest},
		{"max_failure_rate above 1", api.DrainStart, `{"max_failure_rate":1.5}`, api.ErrBadRequest},
		{"max_failure_rate below 0", api.DrainStart, `{"max_failure_rate":-0.1}`, api.ErrBadRequest},
		{"negative pause_window", api.DrainStart, `{"pause_window":-5}`, api.ErrBadRequest},
		{"ramp without hold", api.DrainStart, `{"ramp":[1,5]}`, api.ErrBadRequest},
		{"descending ramp", api.DrainStart, `{"ramp":[5,1],"ramp_hold_seconds":1}`, api.ErrBadRequest},
		{"hold without ramp", api.DrainStart, `{"ramp_hold_seconds":1}`, api.ErrBadRequest},
		{"resume of a completed drain", api.DrainResume, `{"drain_id":"` + done + `"}`, api.ErrInvalidTransition},
		{"resume of a running drain", api.DrainResume, `{"drain_id":"` + running + `"}`, api.ErrInvalidTransition},
		{"resume of no drain", api.DrainResume, `{"drain_id":"drain-nope"}`, api.ErrNotFound},
		{"resume without id", api.DrainResume, `{}`, api.ErrBadRequest},
		{"resume with unknown field", api.DrainResume, `{"drain_id":"` + done + `","force":true}`, api.ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, code := e.request(t, tc.subject, []byte(tc.body))
			if code != tc.code {
				t.Errorf("code %q (%s), want %s", code, body, tc.code)
			}
		})
	}
}
