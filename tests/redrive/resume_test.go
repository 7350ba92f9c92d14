package redrive

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestDrainResumedAfterCrashAddsUp: a redriver crashes (its connection
// closed, no final save) while replays it finished after its last
// checkpoint are only in the chains; another instance resumes the drain.
// The final counts add up to selected with nothing remaining (a completed
// drain reported "remaining 21"), and current_rate, read every 2 s of the
// first 10 s of the resumed run, stays within ±10 % of the commit rate the
// test measures in LEDGER over those 10 s (a resumed drain was shown at
// 3.6/s while 20/s were committed).
func TestDrainResumedAfterCrashAddsUp(t *testing.T) {
	e := newEnvWith(t, 1, false)
	const n, rate = 420, 20.0
	var events []event
	for i := range n {
		events = append(events, e.pharmacyEvent(t, 50000+i))
	}
	e.seedExhausted(t, events)
	cfgA := redriverConfig()
	cfgA.InstanceID = "redriver-a"
	a := e.startRedriver(t, cfgA)
	id := e.startDrain(t, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, RatePerSecond: ptr(rate), MaxConcurrency: 4})

	kv, err := e.js.KeyValue(context.Background(), subjects.DrainsBucket)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() api.DrainState {
		en, err := kv.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var st api.DrainState
		if err := json.Unmarshal(en.Value(), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// Crash once the chains are at least 5 commits ahead of the checkpoint.
	var lost int
	natstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		ck, got := stored().Committed, e.ledgerCount(t)
		if ck < 20 || got < ck+5 {
			return fmt.Errorf("checkpoint %d committed, LEDGER %d", ck, got)
		}
		lost = got - ck
		return nil
	})
	a.nc.Close()
	a.stop()
	ck := stored()
	t.Logf("crash: checkpoint says %d committed, LEDGER had %d (%d after the checkpoint)", ck.Committed, ck.Committed+lost, e.ledgerCount(t)-ck.Committed)

	cfgB := redriverConfig()
	cfgB.InstanceID = "redriver-b"
	before := e.ledgerCount(t)
	e.startRedriver(t, cfgB)
	// The window starts at the resumed run's first commit.
	natstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if got := e.ledgerCount(t); got == before {
			return fmt.Errorf("no commit since the crash (%d)", got)
		}
		return nil
	})
	l0, t0 := e.ledgerCount(t), time.Now()
	var shown []float64
	tick := time.NewTicker(2 * time.Second)
	for range 5 {
		<-tick.C
		var st api.DrainState
		e.requestJSON(t, api.DrainStatus, api.DrainIDRequest{DrainID: id}, &st)
		if st.FinishedAt != nil {
			t.Fatalf("the drain finished within the window: %+v", st.DrainCounts)
		}
		shown = append(shown, st.CurrentRate)
	}
	tick.Stop()
	measured := float64(e.ledgerCount(t)-l0) / time.Since(t0).Seconds()
	for i, r := range shown {
		if math.Abs(r-measured) > 0.1*measured {
			t.Errorf("current_rate %.1f/s at %d s, LEDGER saw %.1f/s over 10 s", r, 2*(i+1), measured)
		}
	}
	t.Logf("LEDGER %.2f/s over 10 s; current_rate every 2 s: %.2f", measured, shown)

	st := e.waitDrain(t, id, 90*time.Second)
	if st.Status != api.DrainCompleted || st.Selected != n || st.Done() != n || st.Remaining != 0 || st.Committed != n || st.Resumed != 1 {
		t.Errorf("drain %s resumed %d: %+v remaining %d; want %d committed, nothing remaining", st.Status, st.Resumed, st.DrainCounts, st.Remaining, n)
	}
	if got := e.ledgerCount(t); got != n {
		t.Errorf("LEDGER has %d commits, want %d", got, n)
	}
}

// ledgerCount is the number of commits in LEDGER.
func (e *env) ledgerCount(tb testing.TB) int {
	tb.Helper()
	s, err := e.js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return int(info.State.Msgs)
}
