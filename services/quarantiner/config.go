package quarantiner

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Config configures a quarantiner. Start from DefaultConfig.
type Config struct {
	// FailuresConsumer and AdvisoriesConsumer are the durable consumers on
	// FAILURES and ADVISORIES shared by every instance.
	FailuresConsumer   string
	AdvisoriesConsumer string
	// AckWait is how long the server waits before redelivering an intake
	// message whose quarantiner died. Default 30 s.
	AckWait time.Duration
	// RetryDelay is the delay before retrying an intake message whose record
	// could not be written (e.g. QUARANTINE unavailable). Default 1 s.
	RetryDelay time.Duration
	// Workers is how many intake messages one instance processes at once.
	// Default 128.
	Workers int
	// AppendWorkers is how many quarantiner.append and quarantiner.hold
	// requests one instance serves at once. Default 512, the redriver's
	// default max_concurrency: a drain keeps one append in flight per
	// lane, each waits for the write of its record, and the records
	// waiting together are written as one batch, so serving fewer at once
	// makes the batches smaller (a 20,000-record drain under
	// sync_interval: always, its writers batching, ran at 1,040–1,095
	// records/s with 128 and 1,305–1,434 with 512). An append carries a
	// payload only for a correction (up to MaxPayload).
	AppendWorkers int
	// MaxBatch is how many records, for distinct chains, one atomic batch
	// to QUARANTINE may carry: the records ready at the same time (from
	// both intakes and the append endpoint) are stored with one write and,
	// under sync_interval: always, one fsync. A batch never waits for more
	// records. 1 writes every record by itself. Default 256, at most
	// batch.MaxMessages.
	MaxBatch int
	// RedriveCap is the number of failed replays after which an event
	// becomes poison. Default 3.
	RedriveCap int
	// TerminatedGrace is how long a message-terminated advisory waits
	// before it is examined, so the failure report the validator stored
	// before terminating is quarantined first. Default 5 s.
	TerminatedGrace time.Duration
	// MaxPayload is the gate's payload limit (to re-check originals fetched
	// for exhausted events). Default 1 MiB.
	MaxPayload int
	// ChainCache is how many chains' tails (last record, stream sequence
	// and folded state) an instance keeps in memory, least recently used
	// first out, so that an append to a chain it wrote lately (a replay's
	// outcome after its redrive request) does not read the chain again.
	// A stale tail costs a refused conditional write and a re-read, never a
	// wrong record. 0 disables it. Default 4096 (a few KiB each).
	ChainCache int
	// Streams sizes the streams checked at start-up.
	Streams streams.Options
	// Provision creates or checks the core streams at start-up (QUARANTINE
	// itself is provisioned by the administrator). Default true; false
	// under the trust boundary (package access).
	Provision bool
	// Failpoint, when armed (DEADLETTER_FAILPOINT), kills the process at
	// its point: the chaos suite's targeted windows only (package
	// failpoint). Nil in production.
	Failpoint *failpoint.Armed
	// CreateConsumer creates or updates the two durable consumers
	// (FailuresConsumerConfig, AdvisoriesConsumerConfig) at start-up
	// instead of binding to them. Default true, for development and tests;
	// false under the trust boundary, where no service may create a
	// consumer and the administrator provisions them.
	CreateConsumer bool
	// InstanceID names this instance in logs. Default (New): a random id;
	// LoadEnv: DEADLETTER_INSTANCE_ID, or <hostname>-quarantiner-<index>.
	InstanceID string
	// Registerer receives the quarantiner's metrics. Nil: not exported.
	Registerer prometheus.Registerer
	// TracerProvider receives the quarantiner's spans (package
	// shared/telemetry; telemetry.Setup builds one from OTEL_*). Nil: the
	// global provider, a no-op unless set.
	TracerProvider trace.TracerProvider
	// Propagator moves trace context in and out of message headers. Nil:
	// W3C trace context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
	// Decisions checks the signed decision an approved, released or
	// dismissed record must carry against the people registry in AUDIT
	// (issue #38). Nil: approval.AuditRegistry over the quarantiner's
	// connection (the deployment wires decision.Registry, which reads the
	// same records).
	Decisions approval.Checker
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		FailuresConsumer:   subjects.FailuresConsumer,
		AdvisoriesConsumer: subjects.AdvisoriesConsumer,
		AckWait:            30 * time.Second,
		RetryDelay:         time.Second,
		Workers:            128,
		AppendWorkers:      512,
		MaxBatch:           256,
		RedriveCap:         3,
		TerminatedGrace:    5 * time.Second,
		MaxPayload:         gate.DefaultMaxPayload,
		ChainCache:         4096,
		Streams:            streams.DefaultOptions(),
		Provision:          true,
		CreateConsumer:     true,
	}
}

// LoadEnv overrides cfg from environment variables:
// DEADLETTER_REDRIVE_CAP, DEADLETTER_QUARANTINE_WORKERS,
// DEADLETTER_QUARANTINE_APPEND_WORKERS,
// DEADLETTER_QUARANTINE_BATCH,
// DEADLETTER_CHAIN_CACHE, DEADLETTER_MAX_PAYLOAD, DEADLETTER_REPLICAS,
// DEADLETTER_SYNC_ALWAYS,
// DEADLETTER_PROVISION, DEADLETTER_CREATE_CONSUMER, DEADLETTER_INSTANCE_ID
// (default <hostname>-quarantiner-<DEADLETTER_INSTANCE_INDEX>).
func (c *Config) LoadEnv(env *config.Env) {
	env.Instance("quarantiner", &c.InstanceID)
	env.Int("DEADLETTER_REDRIVE_CAP", &c.RedriveCap)
	env.Int("DEADLETTER_QUARANTINE_WORKERS", &c.Workers)
	env.Int("DEADLETTER_QUARANTINE_APPEND_WORKERS", &c.AppendWorkers)
	env.Int("DEADLETTER_QUARANTINE_BATCH", &c.MaxBatch)
	env.Int("DEADLETTER_CHAIN_CACHE", &c.ChainCache)
	env.Int("DEADLETTER_MAX_PAYLOAD", &c.MaxPayload)
	env.Streams(&c.Streams)
	env.Bool("DEADLETTER_PROVISION", &c.Provision)
	env.Bool("DEADLETTER_CREATE_CONSUMER", &c.CreateConsumer)
	env.Failpoint(&c.Failpoint)
}

func (c Config) validate() error {
	switch {
	case c.FailuresConsumer == "" || c.AdvisoriesConsumer == "":
		return errors.New("quarantiner: consumer names are required")
	case c.AckWait <= 0 || c.RetryDelay <= 0 || c.TerminatedGrace < 0:
		return errors.New("quarantiner: AckWait and RetryDelay must be positive")
	case c.Workers < 1:
		return errors.New("quarantiner: Workers must be at least 1")
	case c.AppendWorkers < 1:
		return errors.New("quarantiner: AppendWorkers must be at least 1")
	case c.MaxBatch < 1 || c.MaxBatch > batch.MaxMessages:
		return fmt.Errorf("quarantiner: MaxBatch must be between 1 and %d", batch.MaxMessages)
	case c.RedriveCap < 1:
		return errors.New("quarantiner: RedriveCap must be at least 1")
	case c.MaxPayload <= 0:
		return errors.New("quarantiner: MaxPayload must be positive")
	case c.ChainCache < 0:
		return errors.New("quarantiner: ChainCache must not be negative")
	}
	return c.Streams.Validate()
}

// FailuresConsumerConfig is the quarantiner's durable consumer of FAILURES,
// which the administrator provisions (services may not create consumers).
func (c Config) FailuresConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       c.FailuresConsumer,
		Description:   "deadletter quarantiner: failure intake",
		FilterSubject: subjects.FailuresAll,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    -1, // a failure is never given up on
		MaxAckPending: 4 * c.Workers,
	}
}

// AdvisoriesConsumerConfig is the quarantiner's durable consumer of
// ADVISORIES, provisioned by the administrator.
func (c Config) AdvisoriesConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        c.AdvisoriesConsumer,
		Description:    "deadletter quarantiner: delivery advisories",
		FilterSubjects: []string{subjects.MaxDeliveriesAdvisories, subjects.TerminatedAdvisories},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  4 * c.Workers,
	}
}
