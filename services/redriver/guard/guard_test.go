package guard

import (
	"math"
	"testing"

	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/shared/api"
)

// TestFailureWindow: the window trips at the outcome whose rate crosses the
// max, never before it holds its minimum, and forgets what slid out.
func TestFailureWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     api.DrainStartRequest
		pattern string // s: success, f: failure
		trip    int    // 1-based outcome that trips; 0: none
	}{
		{"no guard", api.DrainStartRequest{}, "ffffffffffff", -1},
		{"all fail: trips at the minimum", api.DrainStartRequest{PauseWindow: 100}, "ffffffffffffff", 10},
		{"small window: its size is the minimum", api.DrainStartRequest{PauseWindow: 4, MaxFailureRate: ptr(0.5)}, "sfff", 4},
		{"crossing after a full window of successes", api.DrainStartRequest{PauseWindow: 20, MaxFailureRate: ptr(0.25)},
			"ssssssssssssssssssssffffffff", 26},
		{"at the max does not trip", api.DrainStartRequest{PauseWindow: 10, MaxFailureRate: ptr(0.5)}, "sfsfsfsfsfsfsfsf", 0},
		{"failures slide out", api.DrainStartRequest{PauseWindow: 10, MaxFailureRate: ptr(0.3)}, "fffsssssssssssssfff", 0},
		{"max 1 never trips", api.DrainStartRequest{MaxFailureRate: ptr(1.0)}, "ffffffffffffffffffff", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWindow(tc.req)
			if tc.trip < 0 {
				if w != nil {
					t.Fatal("a drain without canary, window or max has a window")
				}
				return
			}
			got := 0
			for i, c := range tc.pattern {
				if trip, _, _ := w.Add(c == 'f', "X"); trip && got == 0 {
					got = i + 1
				}
			}
			if got != tc.trip {
				t.Errorf("tripped at outcome %d, want %d", got, tc.trip)
			}
		})
	}
}

// TestJudge: which outcomes the guard counts, and which as re-failures
// with which code.
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name, outcome, failCode string
		counted, failed         bool
		code                    string
	}{
		{"replayed", api.OutcomeReplayed, "", true, false, ""},
		{"skipped duplicate", api.OutcomeSkippedDuplicate, "", true, false, ""},
		{"replay failed with its code", api.OutcomeReplayFailed, "DOWNSTREAM_UNAVAILABLE", true, true, "DOWNSTREAM_UNAVAILABLE"},
		{"poisoned without a code", api.OutcomePoisoned, "", true, true, codeUnknown},
		{"pending", api.OutcomePending, "", true, true, CodePending},
		{"not redrivable says nothing", api.OutcomeNotRedrivable, "", false, false, ""},
		{"unknown outcome <Müller & Söhne>", "<Müller & Söhne>", "X", false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counted, failed, code := Judge(tc.outcome, tc.failCode)
			if counted != tc.counted || failed != tc.failed || code != tc.code {
				t.Errorf("Judge = %v %v %q, want %v %v %q", counted, failed, code, tc.counted, tc.failed, tc.code)
			}
		})
	}
}

// TestFinalRate: the request's rate, else the default; no ceiling for
// zero, negative or infinite rates.
func TestFinalRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  api.DrainStartRequest
		def  int
		want rate.Limit
	}{
		{"default", api.DrainStartRequest{}, 100, 100},
		{"request's own", api.DrainStartRequest{RatePerSecond: ptr(2.5)}, 100, 2.5},
		{"zero default: no ceiling", api.DrainStartRequest{}, 0, rate.Inf},
		{"infinite request: no ceiling", api.DrainStartRequest{RatePerSecond: ptr(math.Inf(1))}, 100, rate.Inf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FinalRate(tc.req, tc.def); got != tc.want {
				t.Errorf("FinalRate = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCodeList: codes in code order with their counts.
func TestCodeList(t *testing.T) {
	if got := CodeList(map[string]int{"PENDING": 2, "DOWNSTREAM_REJECTED": 1}); got != "DOWNSTREAM_REJECTED=1,PENDING=2" {
		t.Errorf("CodeList = %q", got)
	}
}

func ptr[T any](v T) *T { return &v }
