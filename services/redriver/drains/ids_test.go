package drains

import (
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/shared/domain"
)

// TestIDs: drain ids and dlq ids are told apart, and neither may be a
// subject wildcard or hold a dot.
func TestIDs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		id    string
		drain bool
		dlq   bool
	}{
		{"generated drain id", newDrainID(time.Now()), true, false},
		{"dlq id", domain.Key("fsma", "x"), true, true},
		{"wildcard", "quarantine.>", false, false},
		{"dot", "pharmacy_a.b", false, false},
		{"empty", "", false, false},
		{"no domain", "_abc", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chainio.DomainOf(tc.id)
			if validDrainID(tc.id) != tc.drain || (err == nil) != tc.dlq {
				t.Errorf("validDrainID %v, chainio.DomainOf err %v", validDrainID(tc.id), err)
			}
		})
	}
}

// TestRateMeter: the meter reports the pace of the last seconds, also while
// it is younger than its window (a drain that just started or resumed was
// shown at a fraction of its pace: 3.6/s for 20/s).
func TestRateMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name     string
		rate     float64       // events per second
		lasting  time.Duration // from t0
		now      time.Duration // when the rate is read
		min, max float64
	}{
		{"steady 20/s for 10 s", 20, 10 * time.Second, 10 * time.Second, 19.6, 20.4},
		{"steady 400/s", 400, 10 * time.Second, 10 * time.Second, 396, 404},
		{"young: 20/s for 1.5 s", 20, 1500 * time.Millisecond, 1500 * time.Millisecond, 18.5, 21.5},
		{"young: 20/s for 3 s", 20, 3 * time.Second, 3 * time.Second, 19, 21},
		{"stopped 10 s ago", 20, 10 * time.Second, 20 * time.Second, 0, 0},
		{"no event", 0, 0, time.Second, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m rateMeter
			if tc.rate > 0 {
				step := time.Duration(float64(time.Second) / tc.rate)
				for d := time.Duration(0); d < tc.lasting; d += step {
					m.add(at(d))
				}
			}
			if got := m.rate(at(tc.now)); got < tc.min || got > tc.max {
				t.Errorf("rate %.2f, want %.1f..%.1f", got, tc.min, tc.max)
			}
		})
	}
}
