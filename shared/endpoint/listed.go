package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
)

// ErrNotListed is a registration of a subject the endpoint table
// (access.Endpoints) lacks.
var ErrNotListed = errors.New("endpoint: not in the endpoint table")

// Listed returns the Spec of the endpoint table's row of subject
// (access.EndpointOf): its micro name, subject, time limit and
// description, so that a service registers what the access configuration
// and its role checks derive from. ErrNotListed for a subject the table
// lacks.
func Listed(subject string) (Spec, error) {
	e, ok := access.EndpointOf(subject)
	if !ok {
		return Spec{}, fmt.Errorf("%w: %s", ErrNotListed, subject)
	}
	return Spec{Name: e.Name, Subject: e.Subject, Description: e.Description, Timeout: e.Timeout}, nil
}

// AddListed registers h on r as the endpoint table's row of subject
// (Listed).
func AddListed[Req, Rep any](s *Server, r Registrar, subject string, h Handler[Req, Rep]) error {
	spec, err := Listed(subject)
	if err != nil {
		return err
	}
	return Add(s, r, spec, h)
}

// Served returns the endpoint subjects that an instance of the micro
// service name lists in its $SRV.INFO (the first instance to answer).
func Served(ctx context.Context, nc *nats.Conn, name string) ([]string, error) {
	m, err := nc.RequestWithContext(ctx, "$SRV.INFO."+name, nil)
	if err != nil {
		return nil, err
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return nil, fmt.Errorf("%w: %s info: %w", ErrBadAnswer, name, err)
	}
	out := make([]string, len(info.Endpoints))
	for i, ep := range info.Endpoints {
		out[i] = ep.Subject
	}
	return out, nil
}
