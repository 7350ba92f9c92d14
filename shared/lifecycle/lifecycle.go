// Package lifecycle is the skeleton the four services share around their
// own work: their connections and logger (New), the start-up steps that
// wait for the cluster with retry (Provision, Stream, Bucket, Bind), the
// consumers fed to a pool of workers (Consume), the micro service and its
// endpoints (Micro, Serve, Requests) and an orderly stop: requests arriving
// while a service stops are refused, those handed over are finished, the
// messages delivered are handled before Consume returns.
//
// Each service's Run keeps what is its own (which streams and buckets, what
// a message or a request means, what it starts and stops around them) and
// calls the skeleton for the rest, so a start-up step, a consumer or a stop
// behaves, logs and fails the same way in every service.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/streams"
)

// Base is one service instance's connections and logger, and the name its
// micro service, its errors and its stopping refusals carry.
type Base struct {
	// Name is the service's name ("validator").
	Name string
	// NC is the service's connection.
	NC *nats.Conn
	// JS is JetStream on NC.
	JS jetstream.JetStream
	// Log is the service's logger, with its service and instance.
	Log *slog.Logger
}

// New returns the Base of the service name's instance on nc: log (a
// discarding logger when nil) with the service and instance attributes,
// and JetStream on nc.
func New(nc *nats.Conn, name, instance string, log *slog.Logger) (Base, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return Base{}, fmt.Errorf("%s: %w", name, err)
	}
	return Base{Name: name, NC: nc, JS: js, Log: log.With("service", name, "instance", instance)}, nil
}

// Clean clears *err when it says the service was stopped during its
// start-up (retry.ErrStopped): a clean stop, for which Run returns nil.
// Run defers it on its named error result.
func Clean(err *error) {
	if errors.Is(*err, retry.ErrStopped) {
		*err = nil
	}
}

// Provision creates or updates the core streams and buckets (o), retried
// with retry.Provisioning until it succeeds or ctx ends.
func (b Base) Provision(ctx context.Context, o streams.Options) error {
	if err := retry.Provisioning().Do(ctx, b.Log, "provision", func(ctx context.Context) error {
		return streams.EnsureCore(ctx, b.JS, o)
	}); err != nil {
		return fmt.Errorf("%s: %w", b.Name, err)
	}
	return nil
}

// Stream looks the stream name up, retried (step names it in the logs)
// until it succeeds or ctx ends; the error is retry's, for the caller to
// say what is missing.
func (b Base) Stream(ctx context.Context, step, name string) (jetstream.Stream, error) {
	return retry.Value(ctx, b.Log, step, func(ctx context.Context) (jetstream.Stream, error) {
		return b.JS.Stream(ctx, name)
	})
}

// Bucket looks the key-value bucket name up, retried like Stream.
func (b Base) Bucket(ctx context.Context, step, bucket string) (jetstream.KeyValue, error) {
	return retry.Value(ctx, b.Log, step, func(ctx context.Context) (jetstream.KeyValue, error) {
		return b.JS.KeyValue(ctx, bucket)
	})
}

// Intake is a durable consumer a service consumes: its stream and
// configuration, bound (streams.BindConsumer) by Bind and bound again by
// Consume when the server ends its consumption.
type Intake struct {
	// Step names the consumer in the logs ("events consumer").
	Step string
	// Stream is the consumer's stream.
	Stream string
	// Config is the consumer's configuration.
	Config func() jetstream.ConsumerConfig
	// Create creates (or updates) the consumer instead of requiring the
	// administrator's.
	Create bool

	bound jetstream.Consumer
}

func (b Base) bind(ctx context.Context, in *Intake) (jetstream.Consumer, error) {
	return streams.BindConsumer(ctx, b.JS, in.Stream, in.Config(), in.Create)
}

// Bind binds in, retried until it succeeds or ctx ends.
func (b Base) Bind(ctx context.Context, in *Intake) error {
	c, err := retry.Value(ctx, b.Log, in.Step, func(ctx context.Context) (jetstream.Consumer, error) {
		return b.bind(ctx, in)
	})
	if err != nil {
		return err
	}
	in.bound = c
	return nil
}

// Consume feeds every message of the intakes to handle on workers
// goroutines, each intake pulling at most 2×workers messages at a time,
// until ctx ends (retry.Consume: a consumption the server ends resumes on
// the consumer bound again). It then drains the consumptions, lets the
// workers handle every message delivered, and returns. A consume error
// other than a missed heartbeat is logged. Fewer than one worker is one.
func (b Base) Consume(ctx context.Context, workers int, handle func(jetstream.Msg), intakes ...*Intake) {
	workers = max(workers, 1)
	work := make(chan jetstream.Msg, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for m := range work {
				handle(m)
			}
		})
	}
	errHandler := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) {
			b.Log.Warn("consume error", "err", err)
		}
	})
	var consumers sync.WaitGroup
	for _, in := range intakes {
		consumers.Go(func() {
			retry.Consume(ctx, b.Log, in.Step, in.bound, func(ctx context.Context) (jetstream.Consumer, error) {
				return b.bind(ctx, in)
			}, func(m jetstream.Msg) { work <- m }, errHandler, jetstream.PullMaxMessages(2*workers))
		})
	}
	consumers.Wait()
	close(work)
	wg.Wait()
}

// Micro adds the service's micro service (cfg's Name is b.Name when
// empty) and returns it with its stop, which may be called more than
// once: a service stops taking requests before it waits for those it took.
func (b Base) Micro(cfg micro.Config) (micro.Service, func(), error) {
	if cfg.Name == "" {
		cfg.Name = b.Name
	}
	svc, err := micro.AddService(b.NC, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: micro: %w", b.Name, err)
	}
	return svc, sync.OnceFunc(func() { _ = svc.Stop() }), nil
}

// Serving is a micro service whose typed endpoints (endpoint.Add,
// endpoint.AddListed: the endpoint table's rows) an endpoint.Server
// serves.
type Serving struct {
	// Service is the micro service, where endpoints are added.
	Service micro.Service
	// Server serves the typed endpoints.
	Server *endpoint.Server
	name   string
	close  func()
}

// Serve adds the micro service cfg (Micro) and an endpoint.Server on b's
// connection with o (o.Log is b.Log when nil).
func (b Base) Serve(cfg micro.Config, o endpoint.Options) (*Serving, error) {
	svc, stop, err := b.Micro(cfg)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = b.Log
	}
	return &Serving{Service: svc, Server: endpoint.NewServer(b.NC, o), name: b.Name, close: stop}, nil
}

// Add returns the first error of the endpoints' registrations (each an
// endpoint.Add or endpoint.AddListed on s.Service), as a micro error of
// the service.
func (s *Serving) Add(registrations ...error) error {
	for _, err := range registrations {
		if err != nil {
			return fmt.Errorf("%s: micro: %w", s.name, err)
		}
	}
	return nil
}

// Close stops the micro service: no request reaches the endpoints any
// more. It may be called more than once.
func (s *Serving) Close() { s.close() }

// Wait waits for the requests in flight and the work they started
// (endpoint.Server.Wait); a request still arriving is answered
// UNAVAILABLE.
func (s *Serving) Wait() { s.Server.Wait() }

// Stop is Close, then Wait.
func (s *Serving) Stop() {
	s.Close()
	s.Wait()
}

// Requests serves the requests of untyped micro endpoints on goroutines of
// its own (micro calls a handler one request at a time), which keep their
// grown stacks from one request to the next. Each request reaches handle
// through endpoint.Detach's copy, answered after micro's handler has
// returned.
type Requests struct {
	nc       *nats.Conn
	name     string
	requests chan micro.Request
	wg       sync.WaitGroup
	mu       sync.RWMutex
	stopped  bool
}

// NewRequests starts workers goroutines that serve the requests handed to
// the Handler with handle, for the service of b (fewer than one is one).
func (b Base) NewRequests(workers int, handle func(micro.Request)) *Requests {
	workers = max(workers, 1)
	r := &Requests{nc: b.NC, name: b.Name, requests: make(chan micro.Request)}
	for range workers {
		r.wg.Go(func() {
			for req := range r.requests {
				handle(req)
			}
		})
	}
	return r
}

// Handler hands each request to a worker, once its reply subject is an
// inbox (endpoint.Guard); a request arriving once Stop has begun is
// answered UNAVAILABLE.
func (r *Requests) Handler() micro.Handler {
	return endpoint.Guard(micro.HandlerFunc(func(req micro.Request) {
		r.mu.RLock()
		defer r.mu.RUnlock()
		if r.stopped {
			_ = req.Error(api.ErrUnavailable, "the "+r.name+" is stopping", nil)
			return
		}
		r.requests <- endpoint.Detach(r.nc, req)
	}))
}

// Stop refuses the requests arriving from now on and waits until the
// workers have served those handed over. Stop the micro service first.
func (r *Requests) Stop() {
	r.mu.Lock()
	if !r.stopped {
		r.stopped = true
		close(r.requests)
	}
	r.mu.Unlock()
	r.wg.Wait()
}
