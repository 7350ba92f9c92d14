package drains

import (
	"testing"

	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/shared/api"
)

// TestCount: each replay result lands in one counter of the drain, and
// only a resolved event lets its lane go on; an event a legal hold holds
// is counted held and held by a hold, and holds its lane.
func TestCount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		res    replay.Result
		goOn   bool
		counts api.DrainCounts
	}{
		{"held by a legal hold", replay.Result{Code: api.ErrHeld, HoldID: "hold-Müller & Söhne", CaseID: "C-9"}, false, api.DrainCounts{Held: 1, HeldByHold: 1}},
		{"replayed", replay.Result{Outcome: api.OutcomeReplayed}, true, api.DrainCounts{Committed: 1}},
		{"skipped duplicate", replay.Result{Outcome: api.OutcomeSkippedDuplicate}, true, api.DrainCounts{SkippedDuplicate: 1}},
		{"resolved elsewhere", replay.Result{Outcome: api.OutcomeResolvedElsewhere}, true, api.DrainCounts{Skipped: 1}},
		{"replay failed", replay.Result{Outcome: api.OutcomeReplayFailed}, false, api.DrainCounts{ReplayFailed: 1}},
		{"poisoned", replay.Result{Outcome: api.OutcomePoisoned}, false, api.DrainCounts{Poisoned: 1}},
		{"pending", replay.Result{Outcome: api.OutcomePending}, false, api.DrainCounts{Pending: 1}},
		{"not redrivable", replay.Result{Outcome: api.OutcomeNotRedrivable}, false, api.DrainCounts{Skipped: 1}},
		{"attempted by this drain", replay.Result{Outcome: api.OutcomeNotRedrivable, Attempted: true}, false, api.DrainCounts{}},
		{"error", replay.Result{Code: api.ErrUnavailable}, false, api.DrainCounts{Errors: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &drainRun{}
			if goOn := d.count(tc.res); goOn != tc.goOn {
				t.Errorf("lane goes on %v, want %v", goOn, tc.goOn)
			}
			if got := d.snapshot().DrainCounts; got != tc.counts {
				t.Errorf("counts %+v, want %+v", got, tc.counts)
			}
		})
	}
}
