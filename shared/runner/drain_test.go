package runner

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/natstest"
)

// TestDrain: Drain returns once the connections are closed, after their
// subscriptions handled what they held; a connection that does not close
// in time is closed and reported, so shutdown is bounded (issue 15, bug
// 12: nc.Drain() alone returned at once, and the stack waited for closed
// connections without a bound).
func TestDrain(t *testing.T) {
	srv := natstest.Start(t)
	for _, tc := range []struct {
		name    string
		hold    time.Duration // how long the handler holds its message
		timeout time.Duration
		wantErr error
	}{
		{"waits for the handler", 300 * time.Millisecond, 10 * time.Second, nil},
		{"bounded", 5 * time.Second, 200 * time.Millisecond, ErrDrainTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := srv.Connect(t)
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			var handled atomic.Bool
			started := make(chan struct{})
			if _, err := nc.Subscribe("work", func(*nats.Msg) {
				close(started)
				select {
				case <-time.After(tc.hold):
				case <-release:
				}
				handled.Store(true)
			}); err != nil {
				t.Fatal(err)
			}
			if err := nc.Publish("work", nil); err != nil {
				t.Fatal(err)
			}
			<-started
			begin := time.Now()
			err := Drain(tc.timeout, nc)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Drain: %v, want %v", err, tc.wantErr)
			}
			if !nc.IsClosed() {
				t.Error("connection open after Drain")
			}
			if tc.wantErr == nil && !handled.Load() {
				t.Error("Drain returned before the handler finished")
			}
			if took := time.Since(begin); took > tc.timeout+2*time.Second {
				t.Errorf("Drain took %s, bound %s", took, tc.timeout)
			}
		})
	}
}
