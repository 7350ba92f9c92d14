package retry

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// permanent is an error Times does not retry.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// Times runs op at most tries times (at least once), waiting between
// attempts with p's back-off (p.Initial doubling up to p.Max, each wait
// randomised by ±50 %; p.Attempt and p.Kind are not used: op bounds its
// own work), until op returns nil or a Permanent error, or ctx ends
// during a wait. It returns op's last error, unwrapped from Permanent; or
// ctx's error when ctx ended. notify, when set, is called with the attempt
// that failed (from 1) and its error before each wait: the caller's log
// line and metric. For the bounded retries of a request's work, where
// Do's retry-until-ctx-ends would not do.
func (p Policy) Times(ctx context.Context, tries int, notify func(attempt int, err error), op func(ctx context.Context) error) error {
	p = p.withDefaults()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.RandomizationFactor = p.Initial, p.Max, 2, 0.5
	attempt := 0
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempt++
		err := op(ctx)
		var pe permanent
		if errors.As(err, &pe) {
			return struct{}{}, backoff.Permanent(pe.err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(max(tries, 1))), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, _ time.Duration) {
			if notify != nil {
				notify(attempt, err)
			}
		}))
	return err
}
