package redriver

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/streams"
)

// minReplaySecret is the least length of Config.ReplaySecret (256 bits).
const minReplaySecret = 32

// Config configures a redriver. Start from DefaultConfig.
type Config struct {
	// TracerProvider receives the redriver's spans (package telemetry); nil
	// means the global provider (a no-op unless set).
	TracerProvider trace.TracerProvider
	// Propagator moves trace context in and out of message headers. Nil:
	// W3C trace context.
	Propagator propagation.TextMapPropagator
	// InstanceID names this instance as the owner of its drains. A
	// restarted instance with the same id resumes its drains at once;
	// another instance takes a drain over when its owner's heartbeat is
	// older than DrainLease. Default (New): a random id; LoadEnv:
	// DEADLETTER_INSTANCE_ID, or <hostname>-redriver-<index>, stable across
	// restarts.
	InstanceID string
	// DefaultRatePerSecond is the replay ceiling of a drain that states
	// none. Default 100.
	DefaultRatePerSecond int
	// DefaultConcurrency is the replays in flight of a drain that states
	// no max_concurrency. Default 16.
	DefaultConcurrency int
	// MaxConcurrency is the largest max_concurrency a drain may ask for.
	// Default 1024.
	MaxConcurrency int
	// OutcomeTimeout is how long a replay's outcome is awaited before the
	// event is reported pending (it stays redriving). It should cover the
	// validator's retries (MaxDeliver deliveries with back-off). Default
	// 2 min.
	OutcomeTimeout time.Duration
	// PollMin and PollMax bound the interval of outcome polling, a
	// fallback: a replay is woken as soon as its key's IDEMPOTENCY entry
	// or its chain changes, and otherwise looks after PollMin, then at
	// doubling intervals up to PollMax. Defaults 100 ms and 2 s.
	PollMin time.Duration
	PollMax time.Duration
	// RedriveWait is how long the redrive endpoint waits for the outcome
	// before it replies pending (observation continues). Default 3 s.
	RedriveWait time.Duration
	// DrainLease is how long a drain's owner may go without a heartbeat
	// before another instance takes the drain over. Default 15 s.
	DrainLease time.Duration
	// MaxDrains is how many drains one instance runs at once. Default 8.
	MaxDrains int
	// MaxInFlight bounds the requests served at once (0:
	// endpoint.DefaultMaxInFlight); one more is answered UNAVAILABLE.
	MaxInFlight int
	// MaxPayload is the gate's payload limit. Default 1 MiB.
	MaxPayload int
	// Streams sizes the streams checked at start-up.
	Streams streams.Options
	// Provision creates or checks the core streams at start-up. Default
	// true.
	Provision bool
	// Failpoint, when armed (DEADLETTER_FAILPOINT), kills the process at
	// its point: the chaos suite's targeted windows only (package
	// failpoint). Nil in production.
	Failpoint *failpoint.Armed
	// Notify configures the notifications it publishes (a paused drain, a
	// pending approval: package notify) and their optional webhook.
	// LoadEnv: DEADLETTER_NOTIFY_WEBHOOK_URL,
	// DEADLETTER_NOTIFY_WEBHOOK_SECRET_FILE,
	// DEADLETTER_NOTIFY_WEBHOOK_MAX_ELAPSED.
	Notify notify.Config
	// Registerer receives the redriver's metrics. Nil: not exported.
	Registerer prometheus.Registerer
	// AllowAnonymous serves requests that carry no caller the server
	// attached (no person's service import: tests and single-process
	// development setups without accounts) as an operator named by the
	// request's free-text actor, or "anonymous". A request with an
	// attached caller is always served as that caller. Default false:
	// such requests are refused UNAUTHENTICATED.
	AllowAnonymous bool
	// ReplaySecret keys the HMAC that makes each replay's Nats-Msg-Id
	// unguessable (see replay.MsgID); at least 32 bytes. Instances sharing
	// it give a resumed replay the same id. Empty: ReplaySecretFile, else
	// a random secret per process (a replay resumed by another instance
	// or after a restart then gets a new id; its second copy is harmless,
	// the commit being idempotent by key).
	ReplaySecret []byte
	// ReplaySecretFile is a file holding ReplaySecret (read by New when
	// ReplaySecret is empty).
	ReplaySecretFile string
	// Decisions checks the decisions signed by their person (approve,
	// reject, release, dismiss; issue #38) against the people registry
	// in AUDIT: the signer's key, role and enabled state at the time.
	// Nil: approval.AuditRegistry over the redriver's connection (the
	// deployment wires decision.Registry, which reads the same records).
	// No redriver secret can sign a decision.
	Decisions approval.Checker
	// MaxPendingPerRequester is the most pending approvals one person may
	// have; one more is refused APPROVAL_LIMIT. Default 20; 0: no limit.
	// (Each Create reads the bucket: 200 pending corrections of 100 KB
	// made one cost 2.8 s; 50, 0.6 s.)
	MaxPendingPerRequester int
	// MaxPendingPerChain is the most pending approvals of one chain (or
	// of one legal hold's lift); one more is refused APPROVAL_LIMIT. The
	// same request asked again while pending answers the pending one.
	// Default 3; 0: no limit.
	MaxPendingPerChain int
	// ReplayBatch is the most replays written to EVENTS as one atomic
	// batch (the replays that concurrent lanes publish at about the same
	// moment; at most batch.MaxMessages). 0 or 1: each replay is written
	// alone. Default batch.MaxMessages.
	ReplayBatch int
	// Now is the clock of approvals and the approval policy (expiry,
	// signing and request times). Nil: time.Now.
	Now func() time.Time
	// ReplayLinger is how long a batch of replays smaller than
	// ReplayBatch waits for more before it is written. Default 0: a batch
	// holds the replays published while the previous one was being
	// written (no latency added; batches grow with the load).
	ReplayLinger time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		DefaultRatePerSecond: 100,
		DefaultConcurrency:   16,
		MaxConcurrency:       1024,
		OutcomeTimeout:       2 * time.Minute,
		PollMin:              100 * time.Millisecond,
		PollMax:              2 * time.Second,
		RedriveWait:          3 * time.Second,
		DrainLease:           15 * time.Second,
		MaxDrains:            8,
		MaxPayload:           gate.DefaultMaxPayload,
		Streams:              streams.DefaultOptions(),
		Provision:            true,
		ReplayBatch:          batch.MaxMessages,

		MaxPendingPerRequester: 20,
		MaxPendingPerChain:     3,
	}
}

// LoadEnv overrides cfg from environment variables: DEADLETTER_INSTANCE_ID (default <hostname>-redriver-<DEADLETTER_INSTANCE_INDEX>),
// DEADLETTER_REDRIVE_RATE, DEADLETTER_REDRIVE_CONCURRENCY,
// DEADLETTER_REDRIVE_OUTCOME_TIMEOUT, DEADLETTER_DRAIN_LEASE,
// DEADLETTER_MAX_PAYLOAD, DEADLETTER_REPLICAS, DEADLETTER_SYNC_ALWAYS,
// DEADLETTER_ALLOW_ANONYMOUS,
// DEADLETTER_REPLAY_SECRET_FILE,
// DEADLETTER_APPROVAL_MAX_PENDING_PER_REQUESTER,
// DEADLETTER_APPROVAL_MAX_PENDING_PER_CHAIN, DEADLETTER_PROVISION,
// DEADLETTER_FAILPOINT, DEADLETTER_NOTIFY_WEBHOOK_URL,
// DEADLETTER_NOTIFY_WEBHOOK_SECRET_FILE,
// DEADLETTER_NOTIFY_WEBHOOK_MAX_ELAPSED.
func (c *Config) LoadEnv(env *config.Env) {
	env.Instance("redriver", &c.InstanceID)
	env.Int("DEADLETTER_REDRIVE_RATE", &c.DefaultRatePerSecond)
	env.Int("DEADLETTER_REDRIVE_CONCURRENCY", &c.DefaultConcurrency)
	env.Duration("DEADLETTER_REDRIVE_OUTCOME_TIMEOUT", &c.OutcomeTimeout)
	env.Duration("DEADLETTER_DRAIN_LEASE", &c.DrainLease)
	env.Int("DEADLETTER_MAX_PAYLOAD", &c.MaxPayload)
	env.Streams(&c.Streams)
	env.Bool("DEADLETTER_ALLOW_ANONYMOUS", &c.AllowAnonymous)
	env.String("DEADLETTER_REPLAY_SECRET_FILE", &c.ReplaySecretFile)
	env.Int("DEADLETTER_APPROVAL_MAX_PENDING_PER_REQUESTER", &c.MaxPendingPerRequester)
	env.Int("DEADLETTER_APPROVAL_MAX_PENDING_PER_CHAIN", &c.MaxPendingPerChain)
	env.Bool("DEADLETTER_PROVISION", &c.Provision)
	env.Failpoint(&c.Failpoint)
	c.Notify.LoadEnv(env)
}

func (c Config) validate() error {
	switch {
	case c.DefaultRatePerSecond < 0:
		return errors.New("redriver: DefaultRatePerSecond must not be negative")
	case c.DefaultConcurrency < 1 || c.MaxConcurrency < c.DefaultConcurrency:
		return errors.New("redriver: concurrency must be at least 1 and DefaultConcurrency <= MaxConcurrency")
	case c.OutcomeTimeout <= 0 || c.RedriveWait <= 0 || c.DrainLease <= 0:
		return errors.New("redriver: OutcomeTimeout, RedriveWait and DrainLease must be positive")
	case c.PollMin <= 0 || c.PollMax < c.PollMin:
		return errors.New("redriver: PollMin must be positive and PollMax >= PollMin")
	case c.MaxDrains < 1:
		return errors.New("redriver: MaxDrains must be at least 1")
	case c.ReplayLinger < 0 || c.ReplayLinger > time.Second:
		return errors.New("redriver: ReplayLinger must be between 0 and 1 s")
	case c.ReplayBatch < 0 || c.ReplayBatch > batch.MaxMessages:
		return fmt.Errorf("redriver: ReplayBatch must be between 0 and %d", batch.MaxMessages)
	case c.MaxPendingPerRequester < 0 || c.MaxPendingPerChain < 0:
		return errors.New("redriver: MaxPendingPerRequester and MaxPendingPerChain must not be negative (0: no limit)")
	case c.MaxPayload <= 0:
		return errors.New("redriver: MaxPayload must be positive")
	case len(c.ReplaySecret) > 0 && len(c.ReplaySecret) < minReplaySecret:
		return fmt.Errorf("redriver: ReplaySecret must be at least %d bytes", minReplaySecret)
	}
	return c.Streams.Validate()
}

// replaySecret returns the replay secret: ReplaySecret, else the content of
// ReplaySecretFile, else 32 random bytes.
func (c Config) replaySecret() ([]byte, error) {
	switch {
	case len(c.ReplaySecret) > 0:
		return c.ReplaySecret, nil
	case c.ReplaySecretFile != "":
		b, err := os.ReadFile(c.ReplaySecretFile)
		if err != nil {
			return nil, fmt.Errorf("redriver: replay secret: %w", err)
		}
		b = bytes.TrimSpace(b)
		if len(b) < minReplaySecret {
			return nil, fmt.Errorf("redriver: replay secret file %s holds fewer than %d bytes", c.ReplaySecretFile, minReplaySecret)
		}
		return b, nil
	}
	b := make([]byte, minReplaySecret)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("redriver: replay secret: %w", err)
	}
	return b, nil
}
