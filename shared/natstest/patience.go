package natstest

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// PatienceEnv names the factor every wait of the tests is scaled by
// (Patience): e.g. DEADLETTER_TEST_PATIENCE=3 on a machine shared with
// other work. Default 1, or 2 under the race detector.
const PatienceEnv = "DEADLETTER_TEST_PATIENCE"

// Patience is the one place a test's waits are derived from: d (what the
// condition takes on a quiet machine, with room) scaled by PatienceEnv,
// and never past the test's own deadline (go test -timeout) less a
// second, so that a wait fails with its condition's error rather than
// the binary's panic.
func Patience(tb testing.TB, d time.Duration) time.Duration {
	f := patienceFactor()
	d = time.Duration(float64(d) * f)
	if dl, ok := deadlineOf(tb); ok {
		if left := time.Until(dl) - time.Second; left > 0 && left < d {
			d = left
		}
	}
	return d
}

// patienceFactor reads PatienceEnv (a positive number; anything else is
// the default).
func patienceFactor() float64 {
	if f, err := strconv.ParseFloat(os.Getenv(PatienceEnv), 64); err == nil && f > 0 {
		return f
	}
	if raceEnabled {
		return 2
	}
	return 1
}

// deadlineOf returns the deadline of a *testing.T (none for a benchmark).
func deadlineOf(tb testing.TB) (time.Time, bool) {
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		return t.Deadline()
	}
	return time.Time{}, false
}

// Long skips tb under -short (the fast tier, make test-short): it needs
// what why says (Jaeger, Chromium, a cluster of processes, or minutes).
// make test runs it.
func Long(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: needs " + why + " (make test runs it)")
	}
}

// Until polls cond every interval until it holds or d (scaled by
// PatienceEnv, as Patience) elapses, and reports whether it held. It
// touches no testing.TB, so a hook running on another goroutine (a
// writer's gather, a worker) may wait with it; the test asserts on what
// it then sees.
func Until(d, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(time.Duration(float64(d) * patienceFactor()))
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}
