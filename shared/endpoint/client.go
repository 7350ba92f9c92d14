package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
)

// DefaultCallTimeout bounds a Call whose context has no deadline.
const DefaultCallTimeout = 30 * time.Second

// ErrBadAnswer is a reply that is not JSON of the expected type.
var ErrBadAnswer = errors.New("endpoint: unreadable reply")

// Call sends req (JSON) to subject on nc and decodes the reply into a Rep.
// A service's error reply is returned as an *api.Error (code, message and
// the field at fault); transport errors (nats.ErrNoResponders, a context
// deadline) are returned wrapped.
func Call[Req, Rep any](ctx context.Context, nc *nats.Conn, subject string, req Req) (Rep, error) {
	var rep Rep
	body, err := json.Marshal(req)
	if err != nil {
		return rep, fmt.Errorf("endpoint: encode %s request: %w", subject, err)
	}
	data, err := CallRaw(ctx, nc, subject, body)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("%w from %s: %w", ErrBadAnswer, subject, err)
	}
	return rep, nil
}

// CallRaw sends body to subject on nc and returns the reply's body, or the
// service's error reply as an *api.Error.
func CallRaw(ctx context.Context, nc *nats.Conn, subject string, body []byte) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	m, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: body})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	if e := ErrorOf(m); e != nil {
		return nil, e
	}
	return m.Data, nil
}

// ErrorOf returns the *api.Error of an error reply, nil for an answer: the
// body's api.Error when it holds one, else the micro error headers.
func ErrorOf(m *nats.Msg) *api.Error {
	code := m.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	var e api.Error
	if json.Unmarshal(m.Data, &e) == nil && e.Code == code {
		return &e
	}
	return &api.Error{Code: code, Message: m.Header.Get(micro.ErrorHeader)}
}
