// Package streams is the single source of truth for deadletter's JetStream
// streams and key-value buckets: their configurations, and the idempotent
// provisioning that creates them or refuses to touch an incompatible one.
//
// Every configuration is derived from Options, so a cluster deployment (R3)
// and the embedded single server (R1) differ only in Options.
package streams

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/subjects"
)

// ErrIncompatible is returned when a stream or bucket exists with a
// configuration that differs from the one deadletter needs. Provisioning
// never alters an existing stream: an operator decides.
var ErrIncompatible = errors.New("incompatible existing configuration")

// ErrCodeMaxMsgsPerSubject is the server's error code (nats-server
// JSStreamStoreFailedF with ErrMaxMsgsPerSubject) for a message refused by
// a stream's one-message-per-subject limit with discard new per subject,
// as LEDGER has it; in an atomic batch it refuses the whole batch.
const ErrCodeMaxMsgsPerSubject jetstream.ErrorCode = 10077

// ErrSubjectWrittenTwice: a stream that must hold one message per subject
// (LEDGER) holds more messages than subjects, so the server cannot be told
// to enforce it without removing some: an operator reconciles first
// (dlqctl reconcile lists the unsourced LEDGER entries).
var ErrSubjectWrittenTwice = errors.New("a subject holds more than one message")

// Options sizes the streams. The zero value is not valid: start from
// DefaultOptions.
type Options struct {
	// Replicas is the replication factor of every stream and bucket (1 on a
	// single server, 3 in a cluster).
	Replicas int
	// EventsMaxAge bounds how long an inbound event is kept in EVENTS (and
	// so how long after an outage it can still be fetched for quarantine).
	EventsMaxAge time.Duration
	// EventsMaxBytes bounds EVENTS. New publishes are refused when full
	// (discard new): never silently dropped.
	EventsMaxBytes int64
	// MaxEventSize is the largest message EVENTS accepts. It is larger than
	// the validator's payload limit so that an oversized event is stored
	// and quarantined as PAYLOAD_TOO_LARGE; a publish above it is refused
	// with an error to the publisher.
	MaxEventSize int32
	// DuplicateWindow is the Nats-Msg-Id de-duplication window of REPLAYS,
	// LEDGER, FAILURES and QUARANTINE. EVENTS has none (see Events).
	DuplicateWindow time.Duration
	// FailuresMaxBytes bounds the FAILURES intake (discard new).
	FailuresMaxBytes int64
	// AttemptsTTL is how long the transient-attempt history of an event is
	// kept; it should be at least EventsMaxAge.
	AttemptsTTL time.Duration
	// QuarantineMaxAge is the retention period of quarantine records. Zero
	// (the default) keeps them forever; any other value is a legal decision.
	QuarantineMaxAge time.Duration
	// Retention overrides, per domain name, the retention the domain
	// registry documents (registry: DEA 2 y, DSCSA 6 y, FSMA 204 2 y);
	// Retentions gives the effective ones. A QuarantineMaxAge below the
	// longest of them is refused (CheckRetention).
	Retention map[string]time.Duration
	// SyncAlways says the servers fsync every write before acknowledging
	// it (nats-server sync_interval: always, the product's default and
	// the deploy kit's). The writers that batch (the validator's commits,
	// the quarantiner's records, the redriver's replays) then store every
	// group of batch.SyncMinBatch (16) messages or more as one atomic
	// batch, and a smaller group one message at a time (a batch's staging
	// costs about 16 one-message writes): a message written alone costs an
	// fsync of its own, on a disk every stream shares, that the group's
	// own wall time does not show. Where the servers fsync on
	// an interval they measure which way is cheaper (batch.Chooser).
	// Services read it from DEADLETTER_SYNC_ALWAYS; the all-in-one stack
	// sets it from its own server's setting.
	SyncAlways bool
}

// ErrRetention: QUARANTINE's MaxAge is below the longest retention a
// domain requires.
var ErrRetention = errors.New("streams: QUARANTINE max age is below the longest retention")

// Retentions returns the retention of every registered domain: the
// registry's, or o.Retention's for the domain when set.
func (o Options) Retentions() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, d := range registry.All() {
		out[d.Name] = d.Retention
		if r, ok := o.Retention[d.Name]; ok {
			out[d.Name] = r
		}
	}
	return out
}

// ParseRetention parses per-domain retentions, "domain=duration,..."
// (Go durations, e.g. "dscsa=52560h,pharmacy=17520h"; "" is none), for
// Options.Retention; Validate checks the domains.
func ParseRetention(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, v, ok := strings.Cut(part, "=")
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if !ok || err != nil || d <= 0 {
			return nil, fmt.Errorf("streams: retention %q is not domain=duration", part)
		}
		out[strings.TrimSpace(name)] = d
	}
	return out, nil
}

// LongestRetention returns the longest retention (Retentions) and its
// domain.
func (o Options) LongestRetention() (string, time.Duration) {
	var name string
	var longest time.Duration
	for _, d := range registry.Names() {
		if r := o.Retentions()[d]; r > longest {
			name, longest = d, r
		}
	}
	return name, longest
}

// CheckRetention refuses a QuarantineMaxAge (when set) below the longest
// retention, naming both; a stream's MaxAge is checked by CheckMaxAge.
func (o Options) CheckRetention() error { return o.CheckMaxAge(o.QuarantineMaxAge) }

// CheckMaxAge refuses a QUARANTINE MaxAge (0: none) below the longest
// retention, naming both (ErrRetention).
func (o Options) CheckMaxAge(maxAge time.Duration) error {
	if maxAge == 0 {
		return nil
	}
	if d, longest := o.LongestRetention(); maxAge < longest {
		rule := ""
		if spec, ok := registry.Lookup(d); ok && longest == spec.Retention {
			rule = " (" + spec.RetentionRule + ")"
		}
		return fmt.Errorf("%w: QUARANTINE max age %s, retention of %s %s%s", ErrRetention, maxAge, d, longest, rule)
	}
	return nil
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Replicas:         1,
		EventsMaxAge:     7 * 24 * time.Hour,
		EventsMaxBytes:   8 << 30,
		MaxEventSize:     2 << 20,
		DuplicateWindow:  2 * time.Minute,
		FailuresMaxBytes: 4 << 30,
		AttemptsTTL:      7 * 24 * time.Hour,
		SyncAlways:       true,
	}
}

// Validate reports an invalid option.
func (o Options) Validate() error {
	switch {
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("streams: replicas must be 1..5, got %d", o.Replicas)
	case o.EventsMaxAge <= 0 || o.EventsMaxBytes <= 0 || o.MaxEventSize <= 0:
		return errors.New("streams: EVENTS limits must be positive")
	case o.DuplicateWindow <= 0 || o.DuplicateWindow > o.EventsMaxAge:
		return errors.New("streams: duplicate window must be positive and at most EventsMaxAge")
	case o.FailuresMaxBytes <= 0 || o.AttemptsTTL <= 0:
		return errors.New("streams: FAILURES and ATTEMPTS limits must be positive")
	case o.QuarantineMaxAge < 0:
		return errors.New("streams: quarantine max age must not be negative")
	}
	for d, r := range o.Retention {
		if !registry.Known(d) || r <= 0 {
			return fmt.Errorf("streams: retention must name a registered domain and be positive (%s)", strings.Join(registry.Names(), ", "))
		}
	}
	return o.CheckRetention()
}

// MaxConsumers bounds the consumers of every stream. Only the break-glass
// admin may create consumers (package access): the services bind the few
// durable ones provisioned for them and read everything else by direct get,
// so the bound only keeps an administrator's leftovers from piling up.
const MaxConsumers = 16

// Events is the inbound stream. Limits retention: an event that exhausts
// its deliveries stays fetchable by sequence for the quarantiner.
//
// It honours no Nats-Msg-Id (Duplicates 0, which the server allows only on
// a stream with sources): the de-duplication window would be stream-wide,
// and the server cannot scope it to a publisher, so one publisher could
// store junk under another's id first and have the real event dropped as a
// duplicate (acknowledged, never stored). A publisher's retries are instead
// de-duplicated by their business key (the validator commits an
// idempotency key once and acknowledges every later copy as a duplicate).
// The redriver publishes its replays into EVENTS directly, each on a
// subject of its own (subjects.Redriven, under subjects.RedrivenAll, which
// only the redriver may publish to), expecting that subject to be empty:
// a retry of a stored replay is refused, whatever the time since, instead
// of stored twice. EVENTS still sources REPLAYS, where earlier redrivers
// stored their replays (de-duplicated there by Nats-Msg-Id): a sourced
// message keeps its replay subject and headers (the server adds
// Nats-Stream-Source). An EVENTS of the previous layout (events.> only) is
// given redriven.> in place by EnsureCore.
func Events(o Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               subjects.EventsStream,
		Description:        "deadletter inbound regulated events",
		Subjects:           []string{subjects.EventsAll, subjects.RedrivenAll},
		Sources:            []*jetstream.StreamSource{{Name: subjects.ReplaysStream}},
		Retention:          jetstream.LimitsPolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           o.Replicas,
		MaxConsumers:       MaxConsumers,
		MaxAge:             o.EventsMaxAge,
		MaxBytes:           o.EventsMaxBytes,
		MaxMsgs:            -1,
		MaxMsgSize:         o.MaxEventSize,
		Discard:            jetstream.DiscardNew,
		Duplicates:         0,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		DenyDelete:         true,
		DenyPurge:          true,
	}
}

// Replays is the stream of the replays of earlier redrivers (replay.>),
// which only the redriver may publish to and EVENTS sources. Nothing
// publishes to it any more (the redriver writes its replays into EVENTS,
// see Events); it stays provisioned and sourced so that a store upgraded
// in place still delivers the replays an older redriver left here.
// Retiring it is a later step. It de-duplicates a replay's retries by
// their Nats-Msg-Id (HMAC-keyed, so unpredictable) within DuplicateWindow,
// and keeps replays as long as EVENTS keeps events.
func Replays(o Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               subjects.ReplaysStream,
		Description:        "deadletter redriver replays, sourced into EVENTS",
		Subjects:           []string{subjects.ReplaysAll},
		Retention:          jetstream.LimitsPolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           o.Replicas,
		MaxConsumers:       MaxConsumers,
		MaxAge:             o.EventsMaxAge,
		MaxBytes:           -1,
		MaxMsgs:            -1,
		MaxMsgSize:         o.MaxEventSize,
		Discard:            jetstream.DiscardNew,
		Duplicates:         o.DuplicateWindow,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		DenyDelete:         true,
		DenyPurge:          true,
	}
}

// Ledger is the system of record of accepted events: one subject per
// idempotency key, written at most once (deny delete and purge). The
// server itself refuses a second message on a key's subject (one message
// per subject, discard new per subject: error 10077, whoever publishes
// and whatever headers the message carries; inside an atomic batch it
// refuses the whole batch), not only the validator's conditional write.
func Ledger(o Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		MaxMsgsPerSubject:    1,
		DiscardNewPerSubject: true,
		Name:                 subjects.LedgerStream,
		Description:          "deadletter system of record of committed events",
		Subjects:             []string{subjects.LedgerAll},
		Retention:            jetstream.LimitsPolicy,
		Storage:              jetstream.FileStorage,
		Replicas:             o.Replicas,
		MaxConsumers:         MaxConsumers,
		MaxAge:               0,
		MaxBytes:             -1,
		MaxMsgs:              -1,
		Discard:              jetstream.DiscardNew,
		Duplicates:           o.DuplicateWindow,
		DenyDelete:           true,
		DenyPurge:            true,
		AllowDirect:          true,
		AllowAtomicPublish:   true,
	}
}

// Failures is the quarantiner's durable intake. Work-queue retention: a
// failure is removed only when the quarantiner acknowledges it, after the
// sealed record is stored.
func Failures(o Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               subjects.FailuresStream,
		Description:        "deadletter quarantine intake",
		Subjects:           []string{subjects.FailuresAll},
		Retention:          jetstream.WorkQueuePolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           o.Replicas,
		MaxConsumers:       MaxConsumers,
		MaxBytes:           o.FailuresMaxBytes,
		MaxMsgs:            -1,
		Discard:            jetstream.DiscardNew,
		Duplicates:         o.DuplicateWindow,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		DenyDelete:         true,
		DenyPurge:          true,
	}
}

// Advisories durably captures the max-deliveries and terminated advisories
// of EVENTS' consumers: the server publishes an advisory once, to whoever
// listens at that moment; this stream is always listening.
func Advisories(o Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:         subjects.AdvisoriesStream,
		Description:  "deadletter captured JetStream delivery advisories",
		Subjects:     []string{subjects.MaxDeliveriesAdvisories, subjects.TerminatedAdvisories},
		Retention:    jetstream.WorkQueuePolicy,
		Storage:      jetstream.FileStorage,
		Replicas:     o.Replicas,
		MaxConsumers: MaxConsumers,
		MaxAge:       o.EventsMaxAge,
		MaxBytes:     -1,
		MaxMsgs:      -1,
		Discard:      jetstream.DiscardNew,
		DenyDelete:   true,
		DenyPurge:    true,
	}
}

// Quarantine is the WORM store of sealed records. Delete and purge are
// denied; rollups, per-message TTLs, subject delete markers and message
// schedules stay off (each would re-open a way to remove records). The deny
// flags are not enough on their own: see the deploy guide for the
// permissions that forbid stream update and delete.
func Quarantine(o Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               subjects.QuarantineStream,
		Description:        "deadletter WORM quarantine of sealed records",
		Subjects:           []string{subjects.QuarantineAll},
		Retention:          jetstream.LimitsPolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           o.Replicas,
		MaxConsumers:       MaxConsumers,
		MaxAge:             o.QuarantineMaxAge,
		MaxBytes:           -1,
		MaxMsgs:            -1,
		Discard:            jetstream.DiscardNew,
		Duplicates:         o.DuplicateWindow,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
}

// Audit is the WORM audit trail (checkpoints, governance actions, payload
// reads), configured like QUARANTINE but with no age limit: it holds what
// outlives any one record (the people's key registry every signed decision
// is checked against, holds placed and lifted, the checkpoint chain verify
// reads from its first sequence), so QUARANTINE's MaxAge never expires it.
// A store of an earlier layout (the checkpoints only, or AUDIT with
// QUARANTINE's MaxAge) is upgraded in place (EnsureStream).
func Audit(o Options) jetstream.StreamConfig {
	c := Quarantine(o)
	c.Name = subjects.AuditStream
	c.Description = "deadletter WORM audit trail"
	c.Subjects = []string{subjects.AuditCheckpoints, subjects.AuditActionsAll, subjects.AuditAccessAll}
	c.MaxAge = 0
	return c
}

// LegalHold is the WORM store of the held chains' copies: the auditor
// copies a held chain's sealed records here, with their provenance, before
// QUARANTINE's MaxAge could expire them. Configured like QUARANTINE but
// with no age limit; provisioned only when QUARANTINE has a MaxAge
// (EnsureWORM).
func LegalHold(o Options) jetstream.StreamConfig {
	c := Quarantine(o)
	c.Name = subjects.LegalHoldStream
	c.Description = "deadletter WORM copies of legally held chains"
	c.Subjects = []string{subjects.LegalHoldAll}
	c.MaxAge = 0
	return c
}

// Holds is the bucket of legal holds (package hold), one key per hold id.
// A placing is a create and a lift a compare-and-set on the key's
// revision, so history 1 suffices: both are also written to AUDIT and
// sealed into every held chain.
func Holds(o Options) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      subjects.HoldsBucket,
		Description: "deadletter legal holds",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// Drains is the bucket of the redriver's drain states, one key per drain.
func Drains(o Options) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      subjects.DrainsBucket,
		Description: "deadletter redriver drain states",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// Approvals is the bucket of two-person approvals (package approval), one
// key per approval id. Each decision is a compare-and-set on the key's
// revision, so history 1 suffices: what was requested, signed or refused
// is also written to AUDIT and, for a signature, sealed into the
// quarantine chain.
func Approvals(o Options) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      subjects.ApprovalsBucket,
		Description: "deadletter two-person approvals",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// Documents is the write-once stream of ingested EPCIS documents, each
// kept under the hex SHA-256 of its bytes as chunks and one manifest
// (document.go: subjects, manifest, reads and writes). One message per
// subject, a second refused by the server (ErrCodeMaxMsgsPerSubject), so a
// document's manifest is never replaced; no rollup, delete or purge. No
// age limit: a record or LEDGER entry that names a document's sha256,
// offset and length outlives EVENTS. It replaces the object store of
// earlier versions (OBJ_DOCUMENTS), whose metadata needed rollups:
// EnsureCore copies what that one holds (MigrateDocuments).
func Documents(o Options) jetstream.StreamConfig {
	return oncePerSubject(o, DocumentsStream, "deadletter EPCIS documents, verbatim, by SHA-256", DocumentsAll)
}

// oncePerSubject is a write-once stream of its own subjects (DOCUMENTS,
// REQUESTS): one message per subject, a second refused by the server
// (discard new per subject), no age limit, no rollup, delete or purge.
func oncePerSubject(o Options, name, description, subjects string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		MaxMsgsPerSubject:    1,
		DiscardNewPerSubject: true,
		Name:                 name,
		Description:          description,
		Subjects:             []string{subjects},
		Retention:            jetstream.LimitsPolicy,
		Storage:              jetstream.FileStorage,
		Replicas:             o.Replicas,
		MaxConsumers:         MaxConsumers,
		MaxAge:               0,
		MaxBytes:             -1,
		MaxMsgs:              -1,
		Discard:              jetstream.DiscardNew,
		Duplicates:           o.DuplicateWindow,
		DenyDelete:           true,
		DenyPurge:            true,
		AllowDirect:          true,
	}
}

// Idempotency is the bucket of commit states, one key per idempotency key.
// Its stream allows atomic batches (AtomicBuckets): the validator marks a
// batch of committed keys in one write.
func Idempotency(o Options) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      subjects.IdempotencyBucket,
		Description: "deadletter commit state per idempotency key",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// AtomicBuckets are the buckets whose stream allows atomic batch publish,
// which a KeyValueConfig cannot say: EnsureBucket sets it on the stream.
var AtomicBuckets = map[string]bool{subjects.IdempotencyBucket: true}

// Attempts is the bucket of transient-failure histories, keyed by EVENTS
// sequence, read by the quarantiner when an event exhausts its deliveries.
func Attempts(o Options) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      subjects.AttemptsBucket,
		Description: "deadletter transient attempt history per EVENTS sequence",
		History:     1,
		TTL:         o.AttemptsTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}
