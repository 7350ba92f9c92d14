package streams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/subjects"
)

// EnsureCore creates, or checks, the streams and buckets every service
// needs: REPLAYS, EVENTS (which sources REPLAYS, so it comes second),
// LEDGER, FAILURES, ADVISORIES, DOCUMENTS, REQUESTS (the write-once source
// of APPROVALS and DRAINS), IDEMPOTENCY, ATTEMPTS, DRAINS, APPROVALS and
// HOLDS, adopts the drains of an earlier store into REQUESTS when it
// creates REQUESTS (AdoptDrains), and copies the documents of an earlier
// version's
// DOCUMENTS object store into the DOCUMENTS stream (MigrateDocuments).
// It is idempotent: a second call with the same options changes nothing, and
// an existing stream with an incompatible configuration yields an error
// wrapping ErrIncompatible instead of being altered (except for settings a
// later layout adds and that take nothing away, turned on in place: allow
// atomic publish, deny delete and purge, no rollup; see upgrade). A
// bucket's stream is made write-once as far as a bucket allows (no
// rollup, deny purge: EnsureBucket). QUARANTINE is provisioned separately
// by an administrator (EnsureQuarantine).
func EnsureCore(ctx context.Context, js jetstream.JetStream, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	// An EVENTS of an earlier layout (replay.> among its subjects, a
	// de-duplication window, no source) is reported before REPLAYS is
	// created, which its replay.> subject would otherwise refuse as an
	// overlap.
	if err := checkExisting(ctx, js, Events(o)); err != nil {
		return err
	}
	_, err := js.Stream(ctx, RequestsStream)
	freshRequests := errors.Is(err, jetstream.ErrStreamNotFound)
	for _, cfg := range []jetstream.StreamConfig{Replays(o), Events(o), Ledger(o), Failures(o), Advisories(o), Documents(o), Requests(o)} {
		if err := EnsureStream(ctx, js, cfg); err != nil {
			return err
		}
	}
	for _, cfg := range []jetstream.KeyValueConfig{Idempotency(o), Attempts(o), Drains(o), Approvals(o), Holds(o)} {
		if err := EnsureBucket(ctx, js, cfg); err != nil {
			return err
		}
	}
	if freshRequests {
		if _, err := AdoptDrains(ctx, js); err != nil {
			return err
		}
	}
	_, err = MigrateDocuments(ctx, js)
	return err
}

// EnsureWORM creates, or checks, the WORM stores: QUARANTINE, AUDIT and,
// when QUARANTINE has a MaxAge, LEGALHOLD. Only an administrator's
// connection may do this.
func EnsureWORM(ctx context.Context, js jetstream.JetStream, o Options) error {
	if err := EnsureQuarantine(ctx, js, o); err != nil {
		return err
	}
	if err := EnsureStream(ctx, js, Audit(o)); err != nil {
		return err
	}
	if o.QuarantineMaxAge == 0 {
		return nil
	}
	return EnsureStream(ctx, js, LegalHold(o))
}

// WORMStreams returns the WORM stores EnsureWORM provisions for o.
func WORMStreams(o Options) []jetstream.StreamConfig {
	out := []jetstream.StreamConfig{Quarantine(o), Audit(o)}
	if o.QuarantineMaxAge > 0 {
		out = append(out, LegalHold(o))
	}
	return out
}

// EnsureQuarantine creates, or checks, the WORM QUARANTINE stream. Only an
// administrator's connection may do this; services never update it.
func EnsureQuarantine(ctx context.Context, js jetstream.JetStream, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	return EnsureStream(ctx, js, Quarantine(o))
}

// EnsureStream creates the stream if absent, or checks that the existing one
// is compatible with want.
func EnsureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := js.CreateStream(ctx, want); err != nil {
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return EnsureStream(ctx, js, want) // created concurrently: check it
			}
			return fmt.Errorf("streams: create %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("streams: look up %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	if diff := StreamDiff(want, have); len(diff) > 0 {
		if upgraded, err := upgrade(ctx, js, want, have); upgraded || err != nil {
			return err
		}
		return fmt.Errorf("streams: %s: %w: %s", want.Name, ErrIncompatible, strings.Join(diff, "; "))
	}
	return nil
}

// upgrade makes, in a stream of an earlier layout, the changes a later one
// adds and that take nothing away (allow atomic publish; more subjects, as
// AUDIT's governance and access records and EVENTS' redriven.>; LEDGER's
// one message per subject, enforced by the server; deny delete, deny
// purge and no rollup, which make a store write-once), when they are the
// only difference. It reports whether it updated the stream. It never
// clears a deny flag nor turns rollups on (the server refuses either on a
// stream that denies delete and purge).
//
// A per-subject limit is set only on a stream that holds one message per
// subject already (as many messages as subjects): the server would
// otherwise enforce the new limit by removing the older messages of a
// subject written twice, evidence reconciliation must see
// (ErrSubjectWrittenTwice).
func upgrade(ctx context.Context, js jetstream.JetStream, want, have jetstream.StreamConfig) (bool, error) {
	next := upgraded(want, have)
	if len(StreamDiff(want, next)) > 0 || (next.AllowAtomicPublish == have.AllowAtomicPublish && slices.Equal(next.Subjects, have.Subjects) &&
		next.MaxMsgsPerSubject == have.MaxMsgsPerSubject && next.DiscardNewPerSubject == have.DiscardNewPerSubject &&
		next.DenyDelete == have.DenyDelete && next.DenyPurge == have.DenyPurge && next.AllowRollup == have.AllowRollup &&
		next.MaxAge == have.MaxAge) {
		return false, nil
	}
	if next.MaxMsgsPerSubject != have.MaxMsgsPerSubject {
		s, err := js.Stream(ctx, want.Name)
		if err != nil {
			return false, fmt.Errorf("streams: upgrade %s: %w", want.Name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return false, fmt.Errorf("streams: upgrade %s: %w", want.Name, err)
		}
		if info.State.Msgs != uint64(info.State.NumSubjects) {
			return false, fmt.Errorf("streams: upgrade %s: %w: %d messages on %d subjects", want.Name, ErrSubjectWrittenTwice,
				info.State.Msgs, info.State.NumSubjects)
		}
	}
	if _, err := js.UpdateStream(ctx, next); err != nil {
		return false, fmt.Errorf("streams: upgrade %s: %w", want.Name, err)
	}
	return true, nil
}

// upgraded returns have with the additions of want that upgrade makes.
func upgraded(want, have jetstream.StreamConfig) jetstream.StreamConfig {
	next := have
	next.AllowAtomicPublish = have.AllowAtomicPublish || want.AllowAtomicPublish
	next.DenyDelete = have.DenyDelete || want.DenyDelete
	next.DenyPurge = have.DenyPurge || want.DenyPurge
	next.AllowRollup = have.AllowRollup && want.AllowRollup
	if want.MaxMsgsPerSubject > 0 && have.MaxMsgsPerSubject <= 0 && want.Discard == jetstream.DiscardNew && have.Discard == jetstream.DiscardNew {
		next.MaxMsgsPerSubject, next.DiscardNewPerSubject = want.MaxMsgsPerSubject, want.DiscardNewPerSubject
	}
	if have.MaxAge > 0 && want.MaxAge == 0 {
		// An age limit lifted (AUDIT, which once had QUARANTINE's) only
		// keeps more. Any other change of age is the administrator's.
		next.MaxAge = 0
	}
	if !slices.ContainsFunc(have.Subjects, func(s string) bool { return !slices.Contains(want.Subjects, s) }) {
		next.Subjects = slices.Clone(want.Subjects) // a superset of have's
	}
	return next
}

// checkExisting returns an error wrapping ErrIncompatible when the stream
// want.Name exists with a configuration that differs from want; an absent
// stream is not an error.
func checkExisting(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("streams: look up %s: %w", want.Name, err)
	}
	have := upgraded(want, s.CachedInfo().Config) // EnsureStream makes the upgrade
	if diff := StreamDiff(want, have); len(diff) > 0 {
		return fmt.Errorf("streams: %s: %w: %s", want.Name, ErrIncompatible, strings.Join(diff, "; "))
	}
	return nil
}

// EnsureBucket creates the key-value bucket if absent, or checks that the
// existing one is compatible with want. Its stream is then made
// write-once as far as a bucket allows (BucketHardened: no rollup, deny
// purge; a bucket denies delete already), on a new bucket and on one of
// an earlier layout alike: Put, Create, Update, Get and Delete keep
// working, a rollup or a purge of the bucket is refused by the server.
// Atomic publish is turned on for AtomicBuckets.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) error {
	_, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err = js.CreateKeyValue(ctx, want); err != nil {
			if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return EnsureBucket(ctx, js, want)
			}
			return fmt.Errorf("streams: create bucket %s: %w", want.Bucket, err)
		}
	}
	if err != nil {
		return fmt.Errorf("streams: look up bucket %s: %w", want.Bucket, err)
	}
	s, err := js.Stream(ctx, subjects.BucketStream(want.Bucket))
	if err != nil {
		return fmt.Errorf("streams: bucket %s: %w", want.Bucket, err)
	}
	have := s.CachedInfo().Config
	// What the bucket's stream lacks and that takes nothing away is set
	// in place: atomic publish, no rollup, deny delete and purge.
	next := BucketHardened(want.Bucket, have)
	if len(BucketDiff(want, next)) == 0 && (next.AllowAtomicPublish != have.AllowAtomicPublish || next.AllowRollup != have.AllowRollup ||
		next.DenyPurge != have.DenyPurge || next.DenyDelete != have.DenyDelete) {
		if _, err := js.UpdateStream(ctx, next); err != nil {
			return fmt.Errorf("streams: make bucket %s write-once: %w", want.Bucket, err)
		}
		return nil
	}
	if diff := BucketDiff(want, have); len(diff) > 0 {
		return fmt.Errorf("streams: bucket %s: %w: %s", want.Bucket, ErrIncompatible, strings.Join(diff, "; "))
	}
	return nil
}

// BucketHardened returns the configuration of a bucket's stream have with
// no rollup, delete and purge denied (and atomic publish for
// AtomicBuckets): a rollup message (Nats-Rollup: all or sub) on a key's
// subject, which any writer of the bucket could otherwise send and which
// would erase every key or a key's history, is refused by the server.
func BucketHardened(bucket string, have jetstream.StreamConfig) jetstream.StreamConfig {
	next := have
	next.AllowRollup, next.DenyDelete, next.DenyPurge = false, true, true
	next.AllowAtomicPublish = have.AllowAtomicPublish || AtomicBuckets[bucket]
	return next
}

// BucketDiff lists, in words, every setting deadletter owns of the bucket
// want in which its stream's configuration have differs.
func BucketDiff(want jetstream.KeyValueConfig, have jetstream.StreamConfig) []string {
	var d []string
	if h := int64(max(want.History, 1)); have.MaxMsgsPerSubject != h {
		d = append(d, fmt.Sprintf("history is %d, want %d", have.MaxMsgsPerSubject, h))
	}
	if have.MaxAge != want.TTL {
		d = append(d, fmt.Sprintf("ttl is %s, want %s", have.MaxAge, want.TTL))
	}
	if have.Replicas != max(want.Replicas, 1) {
		d = append(d, fmt.Sprintf("replicas is %d, want %d", have.Replicas, max(want.Replicas, 1)))
	}
	if have.Storage != want.Storage {
		d = append(d, fmt.Sprintf("storage is %s, want %s", have.Storage, want.Storage))
	}
	if AtomicBuckets[want.Bucket] && !have.AllowAtomicPublish {
		d = append(d, "allow atomic publish is false, want true")
	}
	if have.AllowRollup {
		d = append(d, "allow rollup is true, want false")
	}
	if !have.DenyDelete || !have.DenyPurge {
		d = append(d, fmt.Sprintf("deny delete and purge are %t and %t, want true", have.DenyDelete, have.DenyPurge))
	}
	return d
}

// StreamDiff lists, in words, every setting deadletter owns in which have
// differs from want. Settings the server fills in by itself are ignored.
func StreamDiff(want, have jetstream.StreamConfig) []string {
	var d []string
	add := func(name string, h, w any) {
		d = append(d, fmt.Sprintf("%s is %v, want %v", name, h, w))
	}
	if !sameSet(want.Subjects, have.Subjects) {
		add("subjects", have.Subjects, want.Subjects)
	}
	if want.Retention != have.Retention {
		add("retention", have.Retention, want.Retention)
	}
	if want.Storage != have.Storage {
		add("storage", have.Storage, want.Storage)
	}
	if want.Replicas != have.Replicas {
		add("replicas", have.Replicas, want.Replicas)
	}
	if want.Discard != have.Discard {
		add("discard", have.Discard, want.Discard)
	}
	if want.MaxMsgsPerSubject > 0 && want.MaxMsgsPerSubject != have.MaxMsgsPerSubject {
		add("max messages per subject", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	}
	if want.DiscardNewPerSubject != have.DiscardNewPerSubject {
		add("discard new per subject", have.DiscardNewPerSubject, want.DiscardNewPerSubject)
	}
	if want.MaxAge != have.MaxAge {
		add("max age", have.MaxAge, want.MaxAge)
	}
	if want.MaxBytes != have.MaxBytes {
		add("max bytes", have.MaxBytes, want.MaxBytes)
	}
	if want.MaxMsgSize != 0 && want.MaxMsgSize != have.MaxMsgSize {
		add("max message size", have.MaxMsgSize, want.MaxMsgSize)
	}
	// A zero window is compared too: on a stream with sources it means
	// de-duplication is off (the server fills in no default), and EVENTS
	// depends on it. Without sources the server replaces zero by its
	// default, which is then not a difference.
	if (want.Duplicates != 0 || len(want.Sources) > 0 || want.Mirror != nil) && want.Duplicates != have.Duplicates {
		add("duplicate window", have.Duplicates, want.Duplicates)
	}
	if !sameSources(want.Sources, have.Sources) {
		add("sources", sourceNames(have.Sources), sourceNames(want.Sources))
	}
	if want.DenyDelete != have.DenyDelete {
		add("deny delete", have.DenyDelete, want.DenyDelete)
	}
	if want.DenyPurge != have.DenyPurge {
		add("deny purge", have.DenyPurge, want.DenyPurge)
	}
	if want.AllowRollup != have.AllowRollup {
		add("allow rollup", have.AllowRollup, want.AllowRollup)
	}
	if want.AllowDirect != have.AllowDirect {
		add("allow direct", have.AllowDirect, want.AllowDirect)
	}
	if want.AllowMsgTTL != have.AllowMsgTTL {
		add("allow message TTL", have.AllowMsgTTL, want.AllowMsgTTL)
	}
	if want.SubjectDeleteMarkerTTL != have.SubjectDeleteMarkerTTL {
		add("subject delete marker TTL", have.SubjectDeleteMarkerTTL, want.SubjectDeleteMarkerTTL)
	}
	if want.AllowMsgSchedules != have.AllowMsgSchedules {
		add("allow message schedules", have.AllowMsgSchedules, want.AllowMsgSchedules)
	}
	if want.MaxConsumers != 0 && want.MaxConsumers != have.MaxConsumers {
		add("max consumers", have.MaxConsumers, want.MaxConsumers)
	}
	if want.AllowAtomicPublish != have.AllowAtomicPublish {
		add("allow atomic publish", have.AllowAtomicPublish, want.AllowAtomicPublish)
	}
	if want.Sealed != have.Sealed {
		add("sealed", have.Sealed, want.Sealed)
	}
	return d
}

// sameSources reports whether a and b source the same streams with the
// same settings deadletter sets (name, start, filter, transforms, external).
func sameSources(a, b []*jetstream.StreamSource) bool {
	return slices.Equal(sourceKeys(a), sourceKeys(b))
}

// sourceKeys describes each source by what deadletter sets, sorted.
func sourceKeys(ss []*jetstream.StreamSource) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s == nil {
			continue
		}
		var start string
		if s.OptStartTime != nil {
			start = s.OptStartTime.UTC().Format(time.RFC3339Nano)
		}
		k := fmt.Sprintf("%s|%d|%s|%s|%d", s.Name, s.OptStartSeq, start, s.FilterSubject, len(s.SubjectTransforms))
		for _, t := range s.SubjectTransforms {
			k += "|" + t.Source + ">" + t.Destination
		}
		if s.External != nil {
			k += "|ext:" + s.External.APIPrefix + ":" + s.External.DeliverPrefix
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sourceNames lists the names of the sourced streams, for a diff.
func sourceNames(ss []*jetstream.StreamSource) []string {
	out := []string{}
	for _, s := range ss {
		if s != nil {
			out = append(out, s.Name)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// BindConsumer returns the durable consumer want.Durable of stream. With
// create (a service run without the trust boundary, in development and
// tests) it creates or updates the consumer; otherwise the consumer must
// have been provisioned by the administrator (EnsureConsumer), since no
// service may create consumers, and its absence is an error wrapping
// jetstream.ErrConsumerNotFound.
func BindConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig, create bool) (jetstream.Consumer, error) {
	if create {
		c, err := js.CreateOrUpdateConsumer(ctx, stream, want)
		if err != nil {
			return nil, fmt.Errorf("streams: consumer %s on %s: %w", want.Durable, stream, err)
		}
		return c, nil
	}
	c, err := js.Consumer(ctx, stream, want.Durable)
	if err != nil {
		return nil, fmt.Errorf("streams: consumer %s on %s (provisioned by the administrator): %w", want.Durable, stream, err)
	}
	return c, nil
}

// EnsureConsumer creates the durable consumer want on stream, or updates it
// to want: the administrator's step for each service's consumer.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig) error {
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, want); err != nil {
		return fmt.Errorf("streams: consumer %s on %s: %w", want.Durable, stream, err)
	}
	return nil
}
