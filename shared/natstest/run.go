package natstest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Run runs fn (a service's Run) until the test's cleanup, or until the
// returned stop is called, and fails tb if fn returns an error or does not
// return within 30 s of being stopped. stop is idempotent.
func Run(tb testing.TB, name string, fn func(context.Context) error) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("%s: Run: %v", name, err)
				}
			case <-time.After(30 * time.Second):
				tb.Errorf("%s did not stop within 30 s", name)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}
