// Package guard is the redriver's failure guard for drains: the judgement
// of a replay's outcome, the sliding failure window that pauses a drain
// when too many replays fail again, and the ramp of a drain's rate. It
// holds no service state: the redriver's Service feeds it outcomes and
// acts on its verdicts (the pause, its record and its alert stay there).
package guard

import (
	"context"
	"maps"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/shared/api"
)

// CodePending names a replay without an observed outcome (a timeout)
// among a pause's failing codes.
const CodePending = "PENDING"

// codeUnknown names a re-failure without a code.
const codeUnknown = "UNKNOWN"

// Judge sorts a replay's outcome (an api.Outcome*, with the failure code
// of a re-failure) for the failure guard: counted is false for the
// outcomes that say nothing of the downstream (resolved elsewhere, not
// redrivable, store errors); failed is a re-failure (replay_failed,
// poisoned, or pending: no outcome in time), with its code.
func Judge(outcome, failCode string) (counted, failed bool, code string) {
	switch outcome {
	case api.OutcomeReplayed, api.OutcomeSkippedDuplicate:
		return true, false, ""
	case api.OutcomeReplayFailed, api.OutcomePoisoned:
		code = failCode
		if code == "" {
			code = codeUnknown
		}
		return true, true, code
	case api.OutcomePending:
		return true, true, CodePending
	}
	return false, false, ""
}

// Window is a drain's sliding window of its latest outcomes: it trips
// once it holds at least its minimum and the share of re-failures in it
// is above the drain's max failure rate. It is safe for concurrent use.
type Window struct {
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

// NewWindow returns the window of a drain's request, or nil when the
// drain has no failure guard.
func NewWindow(req api.DrainStartRequest) *Window {
	on, maxRate, size := req.Guarded()
	if !on {
		return nil
	}
	return &Window{maxRate: maxRate, min: min(api.MinWindowOutcomes, size), ring: make([]string, size), codes: map[string]int{}}
}

// Add counts one outcome; it reports whether the window trips with it,
// and the figures and codes it holds then.
func (w *Window) Add(failed bool, code string) (trip bool, fig api.WindowFigures, codes map[string]int) {
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

// CodeList renders failing codes for a log line: "CODE=n,..." in code
// order.
func CodeList(codes map[string]int) string {
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

// Ramp raises the limiter's rate through the drain's ramp steps, each
// held for hold, then sets the drain's own rate (final; Inf: no ceiling),
// until ctx ends.
func Ramp(ctx context.Context, l *rate.Limiter, steps []float64, hold time.Duration, final rate.Limit) {
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

// RampHold is a drain request's ramp hold per step.
func RampHold(req api.DrainStartRequest) time.Duration {
	return time.Duration(req.RampHoldSeconds * float64(time.Second))
}

// FinalRate is a drain's rate once ramped: the request's rate, else the
// service's default (rate.Inf: no ceiling, for zero, negative or +Inf).
func FinalRate(req api.DrainStartRequest, defaultPerSecond int) rate.Limit {
	r := float64(defaultPerSecond)
	if req.RatePerSecond != nil {
		r = *req.RatePerSecond
	}
	if r <= 0 || math.IsInf(r, 1) {
		return rate.Inf
	}
	return rate.Limit(r)
}
