package redriver

import (
	"context"
	"errors"
	"maps"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/notify"
)

// autoActor is the actor of what the redriver does on its own (an
// automatic pause).
const autoActor = "redriver"

// codePending names a replay without an observed outcome (a timeout)
// among a pause's failing codes.
const codePending = "PENDING"

// judged sorts a replay's outcome for the failure guard: counted is false
// for the outcomes that say nothing of the downstream (resolved elsewhere,
// not redrivable, store errors); failed is a re-failure (replay_failed,
// poisoned, or pending: no outcome in time), with its code.
func judged(res result) (counted, failed bool, code string) {
	switch res.outcome {
	case api.OutcomeReplayed, api.OutcomeSkippedDuplicate:
		return true, false, ""
	case api.OutcomeReplayFailed, api.OutcomePoisoned:
		code = res.failCode
		if code == "" {
			code = "UNKNOWN"
		}
		return true, true, code
	case api.OutcomePending:
		return true, true, codePending
	}
	return false, false, ""
}

// failureWindow is a drain's sliding window of its latest outcomes: it
// trips once it holds at least its minimum and the share of re-failures
// in it is above the drain's max failure rate.
type failureWindow struct {
	mu      sync.Mutex
	maxRate float64
	min     int
	// ring holds the latest outcomes' failure codes ("" for a success).
	ring  []string
	next  int
	n     int
	fails int
	codes map[string]int
}

// newFailureWindow returns the window of a drain's request, or nil when
// the drain has no failure guard.
func newFailureWindow(req api.DrainStartRequest) *failureWindow {
	on, maxRate, size := req.Guarded()
	if !on {
		return nil
	}
	return &failureWindow{maxRate: maxRate, min: min(api.MinWindowOutcomes, size), ring: make([]string, size), codes: map[string]int{}}
}

// add counts one outcome; it reports whether the window trips with it, and
// the figures and codes it holds then.
func (w *failureWindow) add(failed bool, code string) (trip bool, fig api.WindowFigures, codes map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == len(w.ring) {
		if old := w.ring[w.next]; old != "" {
			w.fails--
			if w.codes[old]--; w.codes[old] == 0 {
				delete(w.codes, old)
			}
		}
	} else {
		w.n++
	}
	w.ring[w.next] = ""
	if failed {
		w.ring[w.next] = code
		w.fails++
		w.codes[code]++
	}
	w.next = (w.next + 1) % len(w.ring)
	fig = api.WindowFigures{Outcomes: w.n, Failures: w.fails, Rate: float64(w.fails) / float64(w.n), MaxRate: w.maxRate, Size: len(w.ring)}
	return w.n >= w.min && fig.Rate > w.maxRate, fig, maps.Clone(w.codes)
}

// observeOutcome feeds a replay's outcome to the drain's failure window
// and pauses the drain when the window trips.
func (s *Service) observeOutcome(d *drainRun, res result) {
	if d.window == nil {
		return
	}
	counted, failed, code := judged(res)
	if !counted {
		return
	}
	if trip, fig, codes := d.window.add(failed, code); trip {
		s.pause(d, api.PauseFailureRate, fig, codes)
	}
}

// pause stops a drain's dispatch for good (once): its status becomes
// paused, at once in DRAINS, with the event; AUDIT gets the action; the
// replays in flight finish and are counted.
func (s *Service) pause(d *drainRun, reason string, fig api.WindowFigures, codes map[string]int) {
	if d.userCancelled.Load() || !d.paused.CompareAndSwap(false, true) {
		return
	}
	ev := api.DrainEvent{Action: api.ActionPaused, Actor: autoActor, At: time.Now().UTC(), Reason: reason, Codes: codes, Window: &fig,
		Unrecorded: true}
	d.setStatus(func(st *api.DrainState) {
		st.Status = api.DrainPaused
		st.Events = append(st.Events, ev)
	})
	d.stop()
	s.metrics.pauses.WithLabelValues(reason).Inc()
	s.log.Warn("DRAIN_PAUSED", "drain_id", d.id, "reason", reason, "codes", codeList(codes),
		"outcomes", fig.Outcomes, "failures", fig.Failures, "rate", fig.Rate, "max_rate", fig.MaxRate, "window", fig.Size)
	if err := s.save(d); err != nil {
		s.log.Warn("drain checkpoint failed", "drain_id", d.id, "err", err)
	}
	snap := d.snapshot()
	s.auditDrain(d.id, ev, len(snap.Events))
	s.alerts.Publish(notify.Event{ID: "drain_paused." + d.id + "." + strconv.Itoa(len(snap.Events)), Kind: notify.KindDrainPaused,
		DrainID: d.id, Domain: d.req.Filter.Domain, Reason: reason, Codes: codes,
		Counts: map[string]int{"outcomes": fig.Outcomes, "failures": fig.Failures, "window": fig.Size,
			"selected": snap.Selected, "committed": snap.Committed, "remaining": snap.Remaining}})
}

// codeList renders failing codes for a log line: "CODE=n,..." in code
// order.
func codeList(codes map[string]int) string {
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ","
		}
		out += k + "=" + strconv.Itoa(codes[k])
	}
	return out
}

// personEvent is a person's drain event.
func personEvent(action string, who access.Identity, reason string) api.DrainEvent {
	return api.DrainEvent{Action: action, Actor: who.User, Role: string(who.Role), At: time.Now().UTC(), Reason: reason, Unrecorded: true}
}

// runCanary replays the canary's events (heads of their lanes, see
// selection.canary) with the drain's concurrency and waits for their
// outcomes. It returns, by lane start index, whether each canary event was
// resolved (its lane may go on), and whether the drain goes on: false when
// it paused (the re-failure rate above the max) or was stopped.
func (s *Service) runCanary(d *drainRun, sel *selection, picks []int, limiter *rate.Limiter, workers int) (map[int]bool, bool) {
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
				res, ok, done := s.replayItem(d, sel, sel.items[lo], limiter)
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
					d.window.add(failed, code)
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
	s.log.Info("DRAIN_CANARY", "drain_id", d.id, "picked", len(picks), "outcomes", fig.Outcomes, "failures", fig.Failures,
		"rate", fig.Rate, "max_rate", maxRate, "codes", codeList(codes), "took_ms", time.Since(began).Milliseconds())
	if fig.Outcomes > 0 && fig.Rate > maxRate {
		s.pause(d, api.PauseCanary, fig, codes)
		return resolved, false
	}
	if err := s.save(d); err != nil {
		s.log.Warn("drain checkpoint failed", "drain_id", d.id, "err", err)
	}
	return resolved, true
}

// ramp raises the limiter's rate through the drain's ramp steps, each held
// for the ramp's hold, then sets the drain's own rate (final; Inf: no
// ceiling), until ctx ends.
func ramp(ctx context.Context, l *rate.Limiter, steps []float64, hold time.Duration, final rate.Limit) {
	wait := func() bool {
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for _, r := range steps[1:] {
		if !wait() {
			return
		}
		if rate.Limit(r) >= final {
			l.SetLimit(final)
			return
		}
		l.SetLimit(rate.Limit(r))
	}
	if wait() {
		l.SetLimit(final)
	}
}

// rampHold is a ramp's hold per step.
func rampHold(req api.DrainStartRequest) time.Duration {
	return time.Duration(req.RampHoldSeconds * float64(time.Second))
}

// finalRate is the drain's rate once ramped (rate.Inf: no ceiling).
func (s *Service) finalRate(req api.DrainStartRequest) rate.Limit {
	r := float64(s.cfg.DefaultRatePerSecond)
	if req.RatePerSecond != nil {
		r = *req.RatePerSecond
	}
	if r <= 0 || math.IsInf(r, 1) {
		return rate.Inf
	}
	return rate.Limit(r)
}

// errNotPaused: drain.resume of a drain that is not paused.
var errNotPaused = errors.New("redriver: the drain is not paused")
