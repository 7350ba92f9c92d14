package endpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Serving reports, with a nil error, that an instance of the micro service
// name serves every one of subjects: its $SRV.INFO lists them. A service
// answers PING and INFO as soon as it is added, before its endpoints are,
// so PING alone says a service exists, not that a request to one of its
// endpoints would find a responder. With no subjects, a PING answer is
// enough.
func Serving(ctx context.Context, nc *nats.Conn, name string, subjects ...string) error {
	if len(subjects) == 0 {
		_, err := nc.RequestWithContext(ctx, "$SRV.PING."+name, nil)
		return err
	}
	m, err := nc.RequestWithContext(ctx, "$SRV.INFO."+name, nil)
	if err != nil {
		return err
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return fmt.Errorf("%w: %s info: %w", ErrBadAnswer, name, err)
	}
	listed := make(map[string]bool, len(info.Endpoints))
	for _, ep := range info.Endpoints {
		listed[ep.Subject] = true
	}
	for _, s := range subjects {
		if !listed[s] {
			return fmt.Errorf("endpoint: %s does not serve %s yet", name, s)
		}
	}
	return nil
}

// WaitServing polls Serving every poll until it succeeds or ctx ends
// (each attempt bounded to a second).
func WaitServing(ctx context.Context, nc *nats.Conn, poll time.Duration, name string, subjects ...string) error {
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := Serving(actx, nc, name, subjects...)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("endpoint: %s not serving: %w (last: %w)", name, ctx.Err(), err)
		case <-time.After(poll):
		}
	}
}
