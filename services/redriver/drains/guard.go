package drains

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/services/redriver/guard"
	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/notify"
)

// judged sorts a replay's outcome for the failure guard (guard.Judge).
func judged(res replay.Result) (counted, failed bool, code string) {
	return guard.Judge(res.Outcome, res.FailCode)
}

// AutoActor is the actor of what the redriver does on its own (an
// automatic pause).
const AutoActor = "redriver"

// observeOutcome feeds a replay's outcome to the drain's failure window
// and pauses the drain when the window trips.
func (r *Runner) observeOutcome(d *drainRun, res replay.Result) {
	if d.window == nil {
		return
	}
	counted, failed, code := judged(res)
	if !counted {
		return
	}
	if trip, fig, codes := d.window.Add(failed, code); trip {
		r.pause(d, api.PauseFailureRate, fig, codes)
	}
}

// pause stops a drain's dispatch for good (once): its status becomes
// paused, at once in DRAINS, with the event; AUDIT gets the action; the
// replays in flight finish and are counted.
func (r *Runner) pause(d *drainRun, reason string, fig api.WindowFigures, codes map[string]int) {
	if d.userCancelled.Load() || !d.paused.CompareAndSwap(false, true) {
		return
	}
	ev := api.DrainEvent{Action: api.ActionPaused, Actor: AutoActor, At: time.Now().UTC(), Reason: reason, Codes: codes, Window: &fig,
		Unrecorded: true}
	d.setStatus(func(st *api.DrainState) {
		st.Status = api.DrainPaused
		st.Events = append(st.Events, ev)
	})
	d.stop()
	r.cfg.Metrics.Pauses.WithLabelValues(reason).Inc()
	r.cfg.Log.Warn("DRAIN_PAUSED", "drain_id", d.id, "reason", reason, "codes", guard.CodeList(codes),
		"outcomes", fig.Outcomes, "failures", fig.Failures, "rate", fig.Rate, "max_rate", fig.MaxRate, "window", fig.Size)
	if err := r.save(d); err != nil {
		r.cfg.Log.Warn("drain checkpoint failed", "drain_id", d.id, "err", err)
	}
	snap := d.snapshot()
	r.auditDrain(d.id, ev, len(snap.Events))
	r.cfg.Alert(notify.Event{ID: "drain_paused." + d.id + "." + strconv.Itoa(len(snap.Events)), Kind: notify.KindDrainPaused,
		DrainID: d.id, Domain: d.req.Filter.Domain, Reason: reason, Codes: codes,
		Counts: map[string]int{"outcomes": fig.Outcomes, "failures": fig.Failures, "window": fig.Size,
			"selected": snap.Selected, "committed": snap.Committed, "remaining": snap.Remaining}})
}

// personEvent is a person's drain event.
func personEvent(action string, who access.Identity, reason string) api.DrainEvent {
	return api.DrainEvent{Action: action, Actor: who.User, Role: string(who.Role), At: time.Now().UTC(), Reason: reason, Unrecorded: true}
}

// runCanary replays the canary's events (heads of their lanes, see
// Selection.Canary) with the drain's concurrency and waits for their
// outcomes. It returns, by lane start index, whether each canary event was
// resolved (its lane may go on), and whether the drain goes on: false when
// it paused (the re-failure rate above the max) or was stopped.
func (r *Runner) runCanary(d *drainRun, sel *selection.Selection, picks []int, limiter *rate.Limiter, workers int) (map[int]bool, bool) {
	began := time.Now()
	resolved := make(map[int]bool, len(picks))
	var mu sync.Mutex
	var fig api.WindowFigures
	codes := map[string]int{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(picks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := range work {
				res, ok, done := r.replayItem(d, sel, sel.Items[lo], limiter)
				if !done {
					continue
				}
				counted, failed, code := judged(res)
				mu.Lock()
				resolved[lo] = ok
				if counted {
					fig.Outcomes++
					if failed {
						fig.Failures++
						codes[code]++
					}
				}
				mu.Unlock()
				if d.window != nil && counted {
					d.window.Add(failed, code)
				}
			}
		}()
	}
	for _, lo := range picks {
		select {
		case work <- lo:
		case <-d.stopCtx.Done():
		}
	}
	close(work)
	wg.Wait()
	if d.stopCtx.Err() != nil {
		return resolved, false
	}
	_, maxRate, _ := d.req.Guarded()
	fig.MaxRate, fig.Size = maxRate, len(picks)
	if fig.Outcomes > 0 {
		fig.Rate = float64(fig.Failures) / float64(fig.Outcomes)
	}
	d.setStatus(func(st *api.DrainState) { st.CanaryDone = true })
	r.cfg.Log.Info("DRAIN_CANARY", "drain_id", d.id, "picked", len(picks), "outcomes", fig.Outcomes, "failures", fig.Failures,
		"rate", fig.Rate, "max_rate", maxRate, "codes", guard.CodeList(codes), "took_ms", time.Since(began).Milliseconds())
	if fig.Outcomes > 0 && fig.Rate > maxRate {
		r.pause(d, api.PauseCanary, fig, codes)
		return resolved, false
	}
	if err := r.save(d); err != nil {
		r.cfg.Log.Warn("drain checkpoint failed", "drain_id", d.id, "err", err)
	}
	return resolved, true
}

// finalRate is the drain's rate once ramped (rate.Inf: no ceiling).
func (c Config) finalRate(req api.DrainStartRequest) rate.Limit {
	return guard.FinalRate(req, c.DefaultRatePerSecond)
}

// errNotPaused: drain.resume of a drain that is not paused.
var errNotPaused = errors.New("redriver: the drain is not paused")
