package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultDrainTimeout bounds Drain when no timeout is given.
const DefaultDrainTimeout = 30 * time.Second

// ErrDrainTimeout: a connection did not close within the drain's time.
var ErrDrainTimeout = errors.New("runner: connection not closed in time")

// Drain drains the connections (their subscriptions finish the messages
// they hold, then pending publishes are flushed) and waits until every
// one is closed, at most timeout (0: DefaultDrainTimeout) in all; a
// connection still open then is closed, and ErrDrainTimeout returned.
func Drain(timeout time.Duration, conns ...*nats.Conn) error {
	if timeout <= 0 {
		timeout = DefaultDrainTimeout
	}
	for _, nc := range conns {
		if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			nc.Close()
		}
	}
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	var open int
	for {
		open = 0
		for _, nc := range conns {
			if !nc.IsClosed() {
				open++
			}
		}
		if open == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		<-t.C
	}
	for _, nc := range conns {
		nc.Close()
	}
	return fmt.Errorf("%w: %d of %d after %s", ErrDrainTimeout, open, len(conns), timeout)
}
