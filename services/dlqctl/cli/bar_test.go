package cli

import (
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestBarRateText: the bar shows the drain's current_rate, not the bar's
// own measure of its Set jumps (which showed "0 ev/hr" for a drain
// replaying 20/s).
func TestBarRateText(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
		want string
	}{
		{"per second", 20, "20.0 ev/s"},
		{"fast", 412.37, "412.4 ev/s"},
		{"one per second", 1, "1.0 ev/s"},
		{"slow", 0.5, "30.0 ev/min"},
		{"idle", 0, "- ev/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rateText(tc.rate); got != tc.want {
				t.Errorf("rateText(%v) = %q, want %q", tc.rate, got, tc.want)
			}
			out := &natstest.Buffer{}
			p := newBarProgress(out, "drain-x", 120)
			p.update(api.DrainState{DrainID: "drain-x", Status: api.DrainRunning, CurrentRate: tc.rate,
				DrainCounts: api.DrainCounts{Selected: 100, Committed: 40}})
			p.stop()
			if s := out.String(); !strings.Contains(s, tc.want) || strings.Contains(s, "ev/hr") {
				t.Errorf("bar %q: want %q in it and no ev/hr", s, tc.want)
			}
		})
	}
}
