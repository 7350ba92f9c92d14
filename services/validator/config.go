package validator

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Config configures a validator. Start from DefaultConfig; every instance of
// one deployment must share Consumer, MaxDeliver and AckWait.
type Config struct {
	// Consumer is the durable pull consumer on EVENTS shared by every
	// validator instance. Default "validator".
	Consumer string
	// MaxDeliver bounds the attempts at one event: an event still failing
	// transiently on delivery MaxDeliver is reported exhausted by the
	// validator itself. The consumer allows one delivery more (SpareDeliveries):
	// a validator that dies on the last attempt, or cannot store its report,
	// leaves the event to that spare delivery, never to an advisory alone.
	// Default 5.
	MaxDeliver int
	// AckWait is how long the server waits for an acknowledgement before
	// redelivering (e.g. after a validator died). Default 30 s.
	AckWait time.Duration
	// BackoffBase and BackoffMax shape the delay before retrying a transient
	// failure: BackoffBase·2^(n-1) for delivery n, capped at BackoffMax,
	// with ±50 % jitter. Defaults 1 s and 30 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxPayload is the payload size limit; larger events are quarantined
	// as PAYLOAD_TOO_LARGE. Default 1 MiB.
	MaxPayload int
	// Workers is how many events one instance processes at once. Default
	// 256: most of a worker's time is spent waiting for JetStream
	// acknowledgements, and more in flight lets the server batch its writes.
	Workers int
	// CommitBatch is the most events one atomic batch commits (at most
	// 1,000, the server's limit) when there is no downstream: their LEDGER
	// messages in one write, their IDEMPOTENCY marks in another, where one
	// event at a time costs two writes (two fsyncs under sync_interval:
	// always) per event. A batch holds the events ready while the previous
	// one was written; nothing waits to fill it. Batches are used where
	// the servers fsync every write for groups of batch.SyncMinBatch (16)
	// or more, never on one replica without fsync (there is no batcher
	// then), else while they are measured cheaper than one-event writes
	// (see batch.Chooser). Default 256
	// (Workers bounds it too); 1 commits one event at a time.
	CommitBatch int
	// ClaimLease is how long a claim on an idempotency key protects a commit
	// in progress. A claim older than this (its holder died between claim
	// and commit) may be taken over. Default 30 s; it must exceed the
	// downstream timeout.
	ClaimLease time.Duration
	// ProcessTimeout bounds the handling of one delivery. Default 20 s.
	ProcessTimeout time.Duration
	// DownstreamURL, when set, receives every committed event as an HTTP
	// POST with an Idempotency-Key header (an EPCIS capture endpoint or an
	// inventory API). Empty: LEDGER is the only system of record.
	DownstreamURL string
	// DownstreamTimeout bounds one downstream call. Default 10 s.
	DownstreamTimeout time.Duration
	// InstanceID names this instance in claims and logs. Default (New): a
	// random id; LoadEnv: DEADLETTER_INSTANCE_ID, or
	// <hostname>-validator-<index>, stable across restarts.
	InstanceID string
	// Streams sizes the streams provisioned at start-up.
	Streams streams.Options
	// Provision creates or checks the core streams at start-up. Default
	// true; false under the trust boundary (package access), where the
	// administrator provisions them.
	Provision bool
	// Failpoint, when armed (DEADLETTER_FAILPOINT), kills the process at
	// its point: the chaos suite's targeted windows only (package
	// failpoint). Nil in production.
	Failpoint *failpoint.Armed
	// CreateConsumer creates or updates the durable consumer
	// (ConsumerConfig) at start-up instead of binding to it. Default true,
	// for development and tests; false under the trust boundary, where no
	// service may create a consumer and the administrator provisions it.
	CreateConsumer bool
	// Publishers are the parties each publisher may publish for
	// (access.PublisherTable, generated from the one access source): an
	// event whose party its publisher may not speak for is quarantined
	// PARTY_NOT_AUTHORIZED. Nil: no check (a server without the trust
	// boundary, whose subjects name no publisher). An event whose subject
	// names no publisher (published inside the services' account, by the
	// break-glass admin) is not checked.
	Publishers access.Publishers
	// PublishersFile, when Publishers is nil, is where New reads them
	// (access.WritePublishers; DEADLETTER_PUBLISHERS_FILE, the kit's
	// services/publishers.json).
	PublishersFile string
	// Registerer receives the validator's metrics. Nil: not exported.
	Registerer prometheus.Registerer
	// TracerProvider receives the validator's spans (package
	// shared/telemetry; telemetry.Setup builds one from OTEL_*). Nil: the
	// global provider, a no-op unless set.
	TracerProvider trace.TracerProvider
	// Propagator moves trace context in and out of message headers. Nil:
	// W3C trace context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Consumer:          subjects.ValidatorConsumer,
		MaxDeliver:        5,
		AckWait:           30 * time.Second,
		BackoffBase:       time.Second,
		BackoffMax:        30 * time.Second,
		MaxPayload:        gate.DefaultMaxPayload,
		Workers:           256,
		CommitBatch:       256,
		ClaimLease:        30 * time.Second,
		ProcessTimeout:    20 * time.Second,
		DownstreamTimeout: 10 * time.Second,
		Streams:           streams.DefaultOptions(),
		Provision:         true,
		CreateConsumer:    true,
	}
}

func (c Config) validate() error {
	switch {
	case c.Consumer == "":
		return errors.New("validator: consumer name is required")
	case c.MaxDeliver < 1:
		return errors.New("validator: MaxDeliver must be at least 1")
	case c.AckWait <= 0 || c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return errors.New("validator: AckWait and back-off must be positive, BackoffMax >= BackoffBase")
	case c.MaxPayload <= 0 || int64(c.MaxPayload) > int64(c.Streams.MaxEventSize):
		return fmt.Errorf("validator: MaxPayload must be in 1..%d (EVENTS max message size)", c.Streams.MaxEventSize)
	case c.Workers < 1:
		return errors.New("validator: Workers must be at least 1")
	case c.CommitBatch < 1 || c.CommitBatch > batch.MaxMessages:
		return fmt.Errorf("validator: CommitBatch must be in 1..%d", batch.MaxMessages)
	case c.ClaimLease <= 0 || c.ProcessTimeout <= 0 || c.DownstreamTimeout <= 0:
		return errors.New("validator: lease and timeouts must be positive")
	case c.DownstreamURL != "" && c.ClaimLease <= c.DownstreamTimeout:
		return errors.New("validator: ClaimLease must exceed DownstreamTimeout")
	}
	if c.DownstreamURL != "" {
		u, err := url.Parse(c.DownstreamURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("validator: DownstreamURL must be an http(s) URL")
		}
	}
	return c.Streams.Validate()
}
