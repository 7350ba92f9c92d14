package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// Defaults of a Server.
const (
	// DefaultTimeout bounds a request whose Spec sets no timeout.
	DefaultTimeout = time.Minute
	// DefaultMaxInFlight bounds the requests a Server serves at once.
	DefaultMaxInFlight = 64
)

// Meta is what a handler learns about its request besides the body.
type Meta struct {
	// Subject is the subject the request was sent to.
	Subject string
	// Headers are the request's headers.
	Headers nats.Header
	// Body is the request's body as received (the handler gets it
	// decoded too): for a handler that keeps the request to execute it
	// later, byte for byte (a two-person approval's request).
	Body []byte
}

// Caller returns the caller the server attached to the request
// (access.CallerOf): access.ErrNoCaller when there is none.
func (m Meta) Caller() (access.Identity, error) { return access.CallerOf(m.Headers) }

// Handler serves one endpoint: it gets the decoded, validated request and
// answers a reply or an error (an *api.Error, or an error wrapping one,
// carries its code; context.DeadlineExceeded is UNAVAILABLE; any other
// error is the Server's DefaultCode).
type Handler[Req, Rep any] func(ctx context.Context, m Meta, req Req) (Rep, error)

// Spec describes an endpoint.
type Spec struct {
	// Name is the micro endpoint's name; Subject its subject (default:
	// the name within the group it is added to).
	Name, Subject string
	// Description is the endpoint's metadata description.
	Description string
	// Timeout bounds each request (default DefaultTimeout).
	Timeout time.Duration
}

// Options configure a Server.
type Options struct {
	// Context is the parent of every request's context: cancelling it
	// cancels the requests in flight (default context.Background()).
	Context context.Context
	// MaxInFlight bounds the requests served at once over every endpoint
	// of the Server (default DefaultMaxInFlight); one more is answered
	// UNAVAILABLE at once.
	MaxInFlight int
	// DefaultCode is the code of a handler error that carries none
	// (default UNAVAILABLE: the errors that carry none are a store's).
	DefaultCode string
	// Log receives a line per refused request (no values: subject, code,
	// field).
	Log *slog.Logger
	// Refused, when set, is called with the subject and code (BAD_REQUEST)
	// of every request dropped unanswered for its reply subject, for
	// metrics.
	Refused func(subject, code string)
}

// Registrar is where endpoints are added: a micro.Service or micro.Group.
type Registrar interface {
	AddEndpoint(name string, handler micro.Handler, opts ...micro.EndpointOpt) error
}

// Server serves typed endpoints on a micro service: each request is
// checked for its reply subject (CheckReply), decoded strictly and
// validated (Decode), and served by its handler on a goroutine of its own
// within a bounded time and a bounded number in flight; the answer is the
// handler's reply as JSON, or its error as an api.Error. Wait stops taking
// requests and waits for those in flight.
type Server struct {
	nc   *nats.Conn
	opts Options
	sem  chan struct{}

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a Server answering on nc.
func NewServer(nc *nats.Conn, o Options) *Server {
	if o.Context == nil {
		o.Context = context.Background()
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.DefaultCode == "" {
		o.DefaultCode = api.ErrUnavailable
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{nc: nc, opts: o, sem: make(chan struct{}, o.MaxInFlight)}
}

// Add registers h as the endpoint spec on r.
func Add[Req, Rep any](s *Server, r Registrar, spec Spec, h Handler[Req, Rep]) error {
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	opts := []micro.EndpointOpt{micro.WithEndpointMetadata(map[string]string{"description": spec.Description})}
	if spec.Subject != "" {
		opts = append(opts, micro.WithEndpointSubject(spec.Subject))
	}
	serve := func(ctx context.Context, m Meta, data []byte) (any, error) {
		var req Req
		if err := Decode(data, &req); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		rep, err := h(ctx, m, req)
		if err != nil && errors.Is(err, context.DeadlineExceeded) && api.AsError(err) == nil {
			err = api.Wrap(api.ErrUnavailable, err, fmt.Sprintf("no answer within %s", timeout))
		}
		return rep, err
	}
	if err := r.AddEndpoint(spec.Name, micro.HandlerFunc(func(req micro.Request) { s.handle(req, serve) }), opts...); err != nil {
		return fmt.Errorf("endpoint %s: %w", spec.Name, err)
	}
	return nil
}

// handle admits a request and serves it on a goroutine of its own.
func (s *Server) handle(r micro.Request, serve func(context.Context, Meta, []byte) (any, error)) {
	if err := CheckReply(r.Reply()); err != nil {
		s.opts.Log.Warn("request refused", "endpoint", r.Subject(), "code", api.ErrBadRequest, "err", err)
		if s.opts.Refused != nil {
			s.opts.Refused(r.Subject(), api.ErrBadRequest)
		}
		return // an answer would go where the requester chose
	}
	d := Detach(s.nc, r)
	if !s.admit() {
		s.answer(d, nil, api.Errorf(api.ErrUnavailable, "the service is busy or stopping: retry"))
		return
	}
	go func() {
		defer s.done()
		m := Meta{Subject: d.Subject(), Headers: nats.Header(d.Headers()), Body: d.Data()}
		rep, err := s.protect(func() (any, error) { return serve(s.opts.Context, m, d.Data()) })
		s.answer(d, rep, err)
	}()
}

// admit takes a place for a request, unless every place is taken or the
// Server is stopping.
func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	select {
	case s.sem <- struct{}{}:
		s.wg.Add(1)
		return true
	default:
		return false
	}
}

func (s *Server) done() {
	<-s.sem
	s.wg.Done()
}

// protect calls fn, turning a panic into an INTERNAL error.
func (s *Server) protect(fn func() (any, error)) (rep any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.opts.Log.Error("endpoint handler panicked", "panic_type", fmt.Sprintf("%T", p))
			rep, err = nil, api.Errorf(api.ErrInternal, "the service failed to answer")
		}
	}()
	return fn()
}

// answer sends rep, or err as an api.Error.
func (s *Server) answer(r micro.Request, rep any, err error) {
	if err == nil {
		if rerr := r.RespondJSON(rep); rerr != nil {
			s.opts.Log.Warn("reply not sent", "endpoint", r.Subject(), "err", rerr)
		}
		return
	}
	e := api.AsError(err)
	if e == nil {
		e = &api.Error{Code: s.opts.DefaultCode, Message: err.Error()}
	} else if e.Code == "" || e.Message == "" {
		c := *e
		if c.Code == "" {
			c.Code = s.opts.DefaultCode
		}
		if c.Message == "" {
			c.Message = err.Error()
		}
		e = &c
	}
	if e.Code == api.ErrBadRequest || e.Code == api.ErrForbidden || e.Code == api.ErrUnauthenticated {
		s.opts.Log.Warn("request refused", "endpoint", r.Subject(), "code", e.Code, "field", e.Field)
	}
	body, _ := json.Marshal(e)
	_ = r.Error(e.Code, e.Message, body)
}

// Go runs fn on a goroutine that Wait waits for: work a request leaves
// running after its answer. It must be called from a handler (whose own
// request keeps Wait from returning meanwhile); fn's context is the
// Server's Context.
func (s *Server) Go(fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.opts.Context)
	}()
}

// Wait stops taking requests (later ones are answered UNAVAILABLE) and
// waits for those in flight and the work they started with Go. Stop the
// micro service first, and cancel the Options' Context to cut the
// requests short.
func (s *Server) Wait() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}
