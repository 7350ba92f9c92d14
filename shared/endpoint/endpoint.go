// Package endpoint is deadletter's one endpoint layer: typed handlers on a
// NATS micro service (Server, Add: strict decoding, validation, coded
// errors, the caller's identity, bounded time and concurrency), the typed
// client (Call) and its one error type (api.Error).
//
// It also helps NATS micro endpoints answer from
// another goroutine. A micro handler is called one request at a time, and
// micro reads the request's state after the handler returns (for its
// stats), so a handler that hands slow work to a goroutine must not keep
// using its micro.Request there: it answers through Detach's copy instead.
package endpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Detach returns a micro.Request that answers r's requester directly on the
// connection, safe to use after the handler has returned. Answers sent
// through it are not counted in the endpoint's micro stats.
func Detach(nc *nats.Conn, r micro.Request) micro.Request {
	return &detached{nc: nc, subject: r.Subject(), reply: r.Reply(), data: r.Data(), headers: r.Headers()}
}

type detached struct {
	nc      *nats.Conn
	subject string
	reply   string
	data    []byte
	headers micro.Headers
}

func (d *detached) send(m *nats.Msg, opts []micro.RespondOpt) error {
	for _, opt := range opts {
		opt(m)
	}
	if d.reply == "" {
		return nats.ErrMsgNoReply
	}
	m.Subject = d.reply
	return d.nc.PublishMsg(m)
}

// Respond sends data as the answer.
func (d *detached) Respond(data []byte, opts ...micro.RespondOpt) error {
	return d.send(&nats.Msg{Data: data, Header: nats.Header{}}, opts)
}

// RespondJSON sends v, marshalled, as the answer.
func (d *detached) RespondJSON(v any, opts ...micro.RespondOpt) error {
	b, err := json.Marshal(v)
	if err != nil {
		return micro.ErrMarshalResponse
	}
	return d.Respond(b, opts...)
}

// Error answers with a service error, like micro.Request.Error.
func (d *detached) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	m := &nats.Msg{Data: data, Header: nats.Header{
		micro.ErrorHeader:     []string{description},
		micro.ErrorCodeHeader: []string{code},
	}}
	return d.send(m, opts)
}

func (d *detached) Data() []byte           { return d.data }
func (d *detached) Headers() micro.Headers { return d.headers }
func (d *detached) Subject() string        { return d.subject }
func (d *detached) Reply() string          { return d.reply }

// ErrBadReply is a request whose reply subject no caller of deadletter's
// endpoints uses: none (a publish, not a request), or a JetStream subject
// (the deliveries of a consumer someone aimed at the endpoint carry
// $JS.ACK. replies, and an answer there would acknowledge a message).
var ErrBadReply = errors.New("endpoint: unusable reply subject")

// CheckReply refuses a request unless its reply subject is an inbox: the
// server's _R_ subjects of a request that crossed a service import, or a
// private _INBOX. prefix of a user within the services' account. An
// answer is never sent to a subject of the requester's choosing that a
// stream or another service listens on.
func CheckReply(reply string) error {
	switch {
	case strings.HasPrefix(reply, "_R_."), strings.HasPrefix(reply, "_INBOX."):
		return nil
	case reply == "":
		return fmt.Errorf("%w: no reply subject", ErrBadReply)
	default:
		return fmt.Errorf("%w: %q is not an inbox", ErrBadReply, reply)
	}
}

// Guard wraps a micro handler so that a request with an unusable reply
// subject (CheckReply) is dropped before the handler sees it; a request
// with a reply subject that is no inbox is answered nothing, since any
// answer would go where the requester chose.
func Guard(h micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(r micro.Request) {
		if err := CheckReply(r.Reply()); err != nil {
			return
		}
		h.Handle(r)
	})
}
