// Package retry runs a service's start-up steps (stream and bucket look-ups,
// consumer binding) until they succeed or the service's context ends, with
// a short time limit per attempt and capped exponential back-off with
// jitter between attempts (github.com/cenkalti/backoff/v5). A service
// started while a stream leader is being elected, before its server is up
// or before the administrator has provisioned its consumer waits for the
// cluster instead of exiting. Every failed attempt is logged as one line:
// the step, the attempt, the error and the delay, never a payload.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Defaults of Policy.
const (
	DefaultAttempt = 5 * time.Second
	DefaultInitial = 100 * time.Millisecond
	DefaultMax     = 5 * time.Second
)

// ErrGaveUp: the context ended before a step succeeded; the error wraps
// the step's last error as well, so its sentinels stay visible to errors.Is.
var ErrGaveUp = errors.New("retry: gave up")

// ErrStopped is returned when the context was cancelled before the step
// succeeded: the service was stopped during its start-up, which is a clean
// stop (the services' Run returns nil for it). A context that reaches its
// deadline gives up instead (ErrGaveUp, with the last error).
var ErrStopped = errors.New("retry: stopped")

// Policy bounds each attempt and the delays between attempts. The zero
// Policy uses the defaults: 5 s per attempt, back-off from 100 ms doubling
// to at most 5 s, each delay randomised by ±50 %.
type Policy struct {
	// Attempt bounds one attempt (DefaultAttempt when 0).
	Attempt time.Duration
	// Initial is the first delay (DefaultInitial when 0).
	Initial time.Duration
	// Max caps the delay (DefaultMax when 0).
	Max time.Duration
	// Kind names the step in the logs ("start-up step" when empty):
	// "<kind> failed, retrying", "<kind> succeeded".
	Kind string
}

// Provisioning is the Policy of a provisioning step, which creates or
// updates several streams and buckets in one attempt: 30 s per attempt.
func Provisioning() Policy { return Policy{Attempt: 30 * time.Second} }

func (p Policy) withDefaults() Policy {
	if p.Attempt <= 0 {
		p.Attempt = DefaultAttempt
	}
	if p.Initial <= 0 {
		p.Initial = DefaultInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	if p.Kind == "" {
		p.Kind = "start-up step"
	}
	return p
}

// Do runs op with the default Policy; see Policy.Do.
func Do(ctx context.Context, log *slog.Logger, step string, op func(context.Context) error) error {
	return Policy{}.Do(ctx, log, step, op)
}

// Value runs op with the default Policy and returns its result; see
// Policy.Do.
func Value[T any](ctx context.Context, log *slog.Logger, step string, op func(context.Context) (T, error)) (T, error) {
	return ValueWith(ctx, Policy{}, log, step, op)
}

// Do runs op, each attempt under its own time limit, until it returns nil
// or ctx ends; then it returns an error wrapping ErrGaveUp and op's last
// error. Each failed attempt is logged at warn level with step.
func (p Policy) Do(ctx context.Context, log *slog.Logger, step string, op func(context.Context) error) error {
	_, err := ValueWith(ctx, p, log, step, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, op(ctx)
	})
	return err
}

// ValueWith is Value under the Policy p.
func ValueWith[T any](ctx context.Context, p Policy, log *slog.Logger, step string, op func(context.Context) (T, error)) (T, error) {
	p = p.withDefaults()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.RandomizationFactor = p.Initial, p.Max, 2, 0.5
	attempt := 0
	var last error
	v, err := backoff.Retry(ctx, func() (T, error) {
		attempt++
		actx, cancel := context.WithTimeout(ctx, p.Attempt)
		defer cancel()
		v, err := op(actx)
		if err != nil {
			last = err
		}
		return v, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, next time.Duration) {
		log.Warn(p.Kind+" failed, retrying", "step", step, "attempt", attempt, "retry_in", next.Round(time.Millisecond).String(), "err", err)
	}))
	if err == nil {
		if attempt > 1 {
			log.Info(p.Kind+" succeeded", "step", step, "attempts", attempt)
		}
		return v, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return v, fmt.Errorf("%w: %s after %d attempts: %w", ErrStopped, step, attempt, ctx.Err())
	}
	if last == nil {
		last = err
	}
	return v, fmt.Errorf("%w: %s after %d attempts: %w", ErrGaveUp, step, attempt, last)
}
