package natstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/endpoint"
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

// WaitServing fails tb unless, within 10 s, each of the deadletter
// services (access.Validator, access.Quarantiner, ...) answers on nc and
// lists every endpoint the access table gives it
// (access.ServiceEndpoints). A service's Run signals nothing when it is
// ready, and it answers discovery before its endpoints exist, so a test
// that calls an endpoint right after Run waits here first: a request sent
// earlier finds no responder.
func WaitServing(tb testing.TB, nc *nats.Conn, services ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, svc := range services {
		if err := endpoint.WaitServing(ctx, nc, 20*time.Millisecond, svc, access.ServiceEndpoints(svc)...); err != nil {
			tb.Fatal(err)
		}
	}
}
