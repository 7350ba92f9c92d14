package auditor

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Config configures an auditor. Start from DefaultConfig.
type Config struct {
	// AllowAnonymous serves payload reads (audit.get include_payload,
	// audit.export) that carry no caller the server attached, as in
	// development and tests without accounts; each is recorded in the
	// access audit as user "anonymous". Default false: payload bytes go only to a caller
	// whose role reads payloads (access.Role.ReadsPayloads).
	AllowAnonymous bool
	// TraceURLBase is prepended to a trace id to link a record to its trace
	// in Jaeger (audit.get). Default http://127.0.0.1:16686/trace/.
	TraceURLBase string
	// Grace is how long an event may stay unaccounted (neither committed,
	// quarantined nor a duplicate) before reconciliation lists it as
	// unaccounted. Default 5 min.
	Grace time.Duration
	// CheckpointInterval is how often a checkpoint is appended to AUDIT
	// when QUARANTINE has grown since the last one; one is also appended
	// at start-up, once the auditor has caught up with QUARANTINE, and at
	// shutdown, each only when there are records no checkpoint covers.
	// 0 disables these automatic checkpoints (audit.checkpoint still
	// writes one). Default 5 min.
	CheckpointInterval time.Duration
	// ReconcileInterval is how often the auditor reconciles the last
	// ReconcileWindow of EVENTS to update deadletter_audit_unaccounted_events;
	// 0 disables it. Default 15 min, window 1 h.
	ReconcileInterval time.Duration
	ReconcileWindow   time.Duration
	// Repair makes the periodic reconciliation give every event left
	// without an outcome past the grace period one (api.ReconcileRequest.Repair):
	// the last backstop behind the validator's own report, its spare
	// delivery and the max-deliveries advisory. Default true.
	Repair bool
	// LookupConcurrency is how many IDEMPOTENCY lookups one reconciliation
	// keeps in flight. Default 64.
	LookupConcurrency int
	// MaxInFlight bounds the requests served at once (0:
	// endpoint.DefaultMaxInFlight); one more is answered UNAVAILABLE.
	MaxInFlight int
	// VerifyChainCache is how many chains audit.verify keeps the tail of
	// (the last record's link, about 250 bytes each), the bound of its
	// memory whatever the size of QUARANTINE. The tail of a chain evicted
	// from it is read again from the server (the chain's previous record,
	// one batched direct get per batch of records) when the chain's next
	// record comes, so the cache bounds the cost, not the result. Default
	// 16,384 (about 4 MiB); 0 means the default.
	VerifyChainCache int
	// Instance names this auditor in checkpoints and logs. Default
	// "auditor"; LoadEnv: DEADLETTER_INSTANCE_ID, or
	// <hostname>-auditor-<index>, stable across restarts.
	Instance string
	// SigningKeyFile is a file holding an nkeys account or user seed (see
	// NewSigningKey) with which every checkpoint is signed (ed25519). It
	// must be readable by its owner only (mode 0600: New refuses a file
	// group or others may read) and kept outside the NATS store directory,
	// so that an insider with the store cannot sign. Empty: checkpoints
	// are unsigned (they still carry their Merkle root).
	SigningKeyFile string
	// HoldPlacePerMinute and HoldPlaceBurst rate-limit each person's hold
	// placements (hold.place): one more is refused RATE_LIMITED. Defaults
	// 30 and 10.
	HoldPlacePerMinute int
	HoldPlaceBurst     int
	// ExportFile is where every new checkpoint is also written, one JSON
	// line each (api.ExportedCheckpoint), so that a copy lives outside
	// the store: a file appended to (O_APPEND, fsync after each line,
	// created with mode 0600), or "-" for stdout. Its last line is the
	// anchor of audit.verify. Empty: no export.
	ExportFile string
	// AnchorBlocks is the most block hashes an exported checkpoint lists
	// (api.ExportedCheckpoint.Blocks, 65 bytes each in the line): a
	// rewritten record is named exactly while the tree has at most this
	// many records, and localized to a block of tree_size/AnchorBlocks
	// records (rounded up to a power of two) beyond. Default 1024; 0 means
	// the default.
	AnchorBlocks int
	// Retention overrides the domain registry's retention per domain
	// (streams.Options.Retention): the auditor refuses to start on a
	// QUARANTINE whose MaxAge is below the longest. LoadEnv:
	// DEADLETTER_RETENTION ("dscsa=52560h,...").
	Retention map[string]time.Duration
	// Registerer receives the auditor's metrics. Nil: not exported.
	Registerer prometheus.Registerer
	// Notify configures the notifications it publishes (a new failure
	// group, a poison record, a failed verify: package notify) and their
	// optional webhook. LoadEnv: DEADLETTER_NOTIFY_WEBHOOK_URL,
	// DEADLETTER_NOTIFY_WEBHOOK_SECRET_FILE,
	// DEADLETTER_NOTIFY_WEBHOOK_MAX_ELAPSED.
	Notify notify.Config
}

// defaultVerifyChainCache is the default Config.VerifyChainCache.
const defaultVerifyChainCache = 16384

// defaultAnchorBlocks is the default Config.AnchorBlocks.
const defaultAnchorBlocks = 1024

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Grace:              5 * time.Minute,
		CheckpointInterval: 5 * time.Minute,
		ReconcileInterval:  15 * time.Minute,
		ReconcileWindow:    time.Hour,
		Repair:             true,
		LookupConcurrency:  64,
		VerifyChainCache:   defaultVerifyChainCache,
		AnchorBlocks:       defaultAnchorBlocks,
		Instance:           "auditor",
		TraceURLBase:       telemetry.DefaultTraceURLBase,
		HoldPlacePerMinute: 30,
		HoldPlaceBurst:     10,
	}
}

// LoadEnv overrides cfg from environment variables:
// DEADLETTER_AUDIT_GRACE, DEADLETTER_AUDIT_CHECKPOINT_INTERVAL,
// DEADLETTER_AUDIT_RECONCILE_INTERVAL, DEADLETTER_AUDIT_RECONCILE_WINDOW,
// DEADLETTER_AUDIT_VERIFY_CACHE, DEADLETTER_AUDIT_SIGNING_KEY_FILE,
// DEADLETTER_AUDIT_EXPORT_FILE, DEADLETTER_AUDIT_ANCHOR_BLOCKS,
// DEADLETTER_INSTANCE_ID (default <hostname>-auditor-<DEADLETTER_INSTANCE_INDEX>), DEADLETTER_TRACE_URL_BASE,
// DEADLETTER_RETENTION,
// DEADLETTER_HOLD_PLACE_PER_MINUTE, DEADLETTER_HOLD_PLACE_BURST,
// DEADLETTER_NOTIFY_WEBHOOK_URL, DEADLETTER_NOTIFY_WEBHOOK_SECRET_FILE,
// DEADLETTER_NOTIFY_WEBHOOK_MAX_ELAPSED.
func (c *Config) LoadEnv(env *config.Env) {
	env.Duration("DEADLETTER_AUDIT_GRACE", &c.Grace)
	env.Bool("DEADLETTER_ALLOW_ANONYMOUS", &c.AllowAnonymous)
	env.Duration("DEADLETTER_AUDIT_CHECKPOINT_INTERVAL", &c.CheckpointInterval)
	env.Duration("DEADLETTER_AUDIT_RECONCILE_INTERVAL", &c.ReconcileInterval)
	env.Duration("DEADLETTER_AUDIT_RECONCILE_WINDOW", &c.ReconcileWindow)
	env.Bool("DEADLETTER_AUDIT_REPAIR", &c.Repair)
	env.Int("DEADLETTER_AUDIT_VERIFY_CACHE", &c.VerifyChainCache)
	env.String("DEADLETTER_AUDIT_SIGNING_KEY_FILE", &c.SigningKeyFile)
	env.String("DEADLETTER_AUDIT_EXPORT_FILE", &c.ExportFile)
	env.Int("DEADLETTER_AUDIT_ANCHOR_BLOCKS", &c.AnchorBlocks)
	env.Instance("auditor", &c.Instance)
	env.String("DEADLETTER_TRACE_URL_BASE", &c.TraceURLBase)
	env.Retention(&c.Retention)
	env.Int("DEADLETTER_HOLD_PLACE_PER_MINUTE", &c.HoldPlacePerMinute)
	env.Int("DEADLETTER_HOLD_PLACE_BURST", &c.HoldPlaceBurst)
	c.Notify.LoadEnv(env)
}

func (c Config) validate() error {
	switch {
	case c.Grace < 0:
		return errors.New("auditor: Grace must not be negative")
	case c.CheckpointInterval < 0 || c.ReconcileInterval < 0:
		return errors.New("auditor: intervals must not be negative")
	case c.ReconcileInterval > 0 && c.ReconcileWindow <= 0:
		return errors.New("auditor: ReconcileWindow must be positive when reconciling periodically")
	case c.LookupConcurrency < 1:
		return errors.New("auditor: LookupConcurrency must be at least 1")
	case c.VerifyChainCache < 0:
		return errors.New("auditor: VerifyChainCache must not be negative")
	case c.AnchorBlocks < 0:
		return errors.New("auditor: AnchorBlocks must not be negative")
	case c.Instance == "":
		return errors.New("auditor: Instance is required")
	case c.HoldPlacePerMinute < 1 || c.HoldPlaceBurst < 1:
		return errors.New("auditor: HoldPlacePerMinute and HoldPlaceBurst must be at least 1")
	}
	return nil
}
