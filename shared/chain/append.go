package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// AppendTimeout bounds one append request (its reply included).
const AppendTimeout = 15 * time.Second

// UpdateAttempts bounds how often Appender.Update decides again on a chain
// that changed under it.
const UpdateAttempts = 5

// ErrKeptChanging: every attempt of Appender.Update met a chain that
// changed between its read and the append (the last refusal is wrapped
// too, so CodeOf names its code).
var ErrKeptChanging = errors.New("chain: the chain kept changing")

// Requester sends a request message and waits for its reply; *nats.Conn
// satisfies it.
type Requester interface {
	RequestMsgWithContext(ctx context.Context, msg *nats.Msg) (*nats.Msg, error)
}

// AppendError is an append the quarantiner refused or that did not reach
// it: Code is the api error code of the reply (api.ErrConflict,
// api.ErrInvalidTransition, api.ErrNotFound...), api.ErrUnavailable when
// there was no usable reply.
type AppendError struct {
	// Subject is the endpoint asked (api.QuarantinerAppend or
	// api.QuarantinerHold).
	Subject string
	// Code is the api error code.
	Code string
	// Message is the quarantiner's description, or the transport error's.
	Message string
	// Err is the transport error (nil for a refusal).
	Err error
}

// Error names the endpoint, the code and the message.
func (e *AppendError) Error() string { return e.Subject + ": " + e.Code + ": " + e.Message }

// Unwrap returns the transport error, if any.
func (e *AppendError) Unwrap() error { return e.Err }

// CodeOf returns the api error code of the *AppendError err is or wraps
// ("" for any other error).
func CodeOf(err error) string {
	var ae *AppendError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// Appender asks the quarantiner, the one writer of quarantine chains, to
// append records: it sends an api.AppendRequest to one endpoint
// (api.QuarantinerAppend for the lifecycle, api.QuarantinerHold for
// holds' records) and maps a refusal to an *AppendError. It is safe for
// concurrent use.
type Appender struct {
	nc      Requester
	subject string
	tr      *telemetry.Tracer
}

// NewAppender returns an Appender sending to subject over nc.
func NewAppender(nc Requester, subject string) *Appender {
	return &Appender{nc: nc, subject: subject}
}

// WithTracer returns a copy of a that injects the trace context of each
// request's ctx into its headers, so that the record the quarantiner
// writes names the caller's trace.
func (a *Appender) WithTracer(tr telemetry.Tracer) *Appender {
	b := *a
	b.tr = &tr
	return &b
}

// Append sends req and returns the stored record's position and seal. A
// refusal is an *AppendError with the reply's code; a request that got no
// reply, or an unreadable one, is one with api.ErrUnavailable. With
// req.ExpectedIndex set the append is conditional on the chain's length,
// and a retried request that was written is answered as the first time.
func (a *Appender) Append(ctx context.Context, req api.AppendRequest) (api.AppendReply, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return api.AppendReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, AppendTimeout)
	defer cancel()
	msg := nats.NewMsg(a.subject)
	msg.Data = b
	if a.tr != nil {
		a.tr.Inject(ctx, msg.Header)
	}
	m, err := a.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return api.AppendReply{}, &AppendError{Subject: a.subject, Code: api.ErrUnavailable, Message: err.Error(), Err: err}
	}
	if e := endpoint.ErrorOf(m); e != nil {
		return api.AppendReply{}, &AppendError{Subject: a.subject, Code: e.Code, Message: e.Message}
	}
	var rep api.AppendReply
	if err := jsonv2.Unmarshal(m.Data, &rep); err != nil {
		return api.AppendReply{}, &AppendError{Subject: a.subject, Code: api.ErrUnavailable, Message: "unreadable append reply"}
	}
	return rep, nil
}

// Source reads a chain, seals verified and folded; *Reader satisfies it.
type Source interface {
	Read(ctx context.Context, domain, dlqID string) (Chain, error)
}

// Decide returns the request to append to ch (nil: the chain needs none),
// or an error that ends Appender.Update. Its ExpectedIndex is set by
// Update.
type Decide func(ch Chain) (*api.AppendRequest, error)

// Update is the client's read-decide-conditional-append loop: it reads the
// chain from src, lets decide choose the request, and sends it conditional
// on the chain's length as read (ExpectedIndex). When the quarantiner
// answers api.ErrConflict or api.ErrInvalidTransition (another writer
// appended meanwhile) it reads and decides again, at most UpdateAttempts
// times (then ErrKeptChanging, wrapping the last refusal). It returns the
// reply and whether a record was appended (false when decide asked for
// none); read errors, decide's errors and other refusals are returned as
// they are.
func (a *Appender) Update(ctx context.Context, src Source, domain, dlqID string, decide Decide) (api.AppendReply, bool, error) {
	var last error
	for attempt := 0; attempt < UpdateAttempts; attempt++ {
		ch, err := src.Read(ctx, domain, dlqID)
		if err != nil {
			return api.AppendReply{}, false, err
		}
		req, err := decide(ch)
		if err != nil || req == nil {
			return api.AppendReply{}, false, err
		}
		n := len(ch.Records)
		r := *req
		r.ExpectedIndex = &n
		rep, err := a.Append(ctx, r)
		if code := CodeOf(err); code == api.ErrConflict || code == api.ErrInvalidTransition {
			last = err
			continue // the chain changed: decide again on the stored chain
		}
		if err != nil {
			return api.AppendReply{}, false, err
		}
		return rep, true, nil
	}
	return api.AppendReply{}, false, fmt.Errorf("%w (%s): %w", ErrKeptChanging, dlqID, last)
}
