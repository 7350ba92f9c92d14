package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTimes: bounded retries with back-off stop at the first success, a
// permanent error or the last try, and report each failed attempt. A new
// case is one row.
func TestTimes(t *testing.T) {
	errBusy := errors.New("Müller & Söhne <Großhandel>: busy")
	errBad := errors.New("bad request")
	for _, tc := range []struct {
		name     string
		tries    int
		fails    []error // op's errors, attempt by attempt; then nil
		wantRuns int
		want     error
		notified []int
	}{
		{"first try", 3, nil, 1, nil, nil},
		{"third try", 3, []error{errBusy, errBusy}, 3, nil, []int{1, 2}},
		{"tries run out", 3, []error{errBusy, errBusy, errBusy, errBusy}, 3, errBusy, []int{1, 2}},
		{"permanent at once", 5, []error{errBusy, Permanent(errBad)}, 2, errBad, []int{1}},
		{"zero tries is one", 0, []error{errBusy}, 1, errBusy, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			var notified []int
			err := Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond}.Times(context.Background(), tc.tries,
				func(attempt int, err error) { notified = append(notified, attempt) },
				func(context.Context) error {
					runs++
					if runs <= len(tc.fails) {
						return tc.fails[runs-1]
					}
					return nil
				})
			if runs != tc.wantRuns || !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("ran %d times, err %v; want %d, %v", runs, err, tc.wantRuns, tc.want)
			}
			if len(notified) != len(tc.notified) {
				t.Errorf("notified %v, want %v", notified, tc.notified)
			}
			for i := range notified {
				if notified[i] != tc.notified[i] {
					t.Errorf("notified %v, want %v", notified, tc.notified)
				}
			}
		})
	}
	t.Run("context ends during a wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		runs := 0
		err := Policy{Initial: time.Hour, Max: time.Hour}.Times(ctx, 5, func(int, error) { cancel() },
			func(context.Context) error { runs++; return errBusy })
		if runs != 1 || !errors.Is(err, context.Canceled) {
			t.Errorf("ran %d times, err %v; want 1, context.Canceled", runs, err)
		}
	})
}
