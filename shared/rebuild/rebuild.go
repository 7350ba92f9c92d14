// Package rebuild checks every mutable index against the write-once
// facts it is an index of, and restores it from them (issue #38: "mutable
// state is an index of sealed facts, never the only copy").
//
// Four key-value buckets are kept for speed; each has a write-once
// source:
//
//   - HOLDS: AUDIT's hold actions (placed, lifted; hold.Store.Audit).
//   - APPROVALS: AUDIT's approval actions (requested, approved, rejected,
//     executed, refused; approval.Store.Audit) and REQUESTS, which holds
//     each request as created (ADR 0024): AUDIT holds no request body
//     nor corrected payload (they may carry PHI), only their digest.
//     An approval of a store before REQUESTS is restored only as far as
//     AUDIT knows it (see approvals.go).
//   - DRAINS: REQUESTS' drain starts (filter, controls) and ends, AUDIT's
//     drain actions (paused, resumed, cancelled) and the
//     redrive_requested records a drain seals into QUARANTINE.
//   - IDEMPOTENCY: LEDGER, one message per committed key.
//
// Expected folds a bucket's sources in order into the entries the bucket
// must hold; Compare reads the bucket and names every key that is missing,
// altered (a meaning-carrying field differs; revisions and times the owner
// sets freely are not compared) or extra (no source); Restore writes what
// is missing and corrects what is altered, each write conditional on the
// revision it read (a compare-and-set: an owner writing meanwhile wins,
// and the key is read and compared again), never deleting history. An
// extra entry is reported, and removed (a delete marker, the history
// kept) only when Options.Extra asks.
//
// Problems name keys and fields, never a value a person typed or a
// payload carries.
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Errors.
var (
	// ErrUnknownBucket: the bucket is not one this package rebuilds.
	ErrUnknownBucket = errors.New("rebuild: not a rebuildable bucket")
	// ErrUnavailable: a bucket or a source could not be read or written.
	ErrUnavailable = errors.New("rebuild: store unavailable")
	// ErrUnrestorable: the source does not hold what the entry needs.
	ErrUnrestorable = errors.New("rebuild: the source cannot restore this entry")
	// ErrConflict: the key kept changing while it was being restored.
	ErrConflict = errors.New("rebuild: the entry kept changing")
)

// APIError classifies err for an endpoint (the edge: dlqctl rebuild's,
// audit.verify's): an unknown bucket is BAD_REQUEST, a key that kept
// changing CONFLICT, anything else UNAVAILABLE (a store not read or
// written). Nil stays nil.
func APIError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnknownBucket):
		return api.Wrap(api.ErrBadRequest, err, "not a rebuildable bucket: one of "+strings.Join(Buckets(), ", "))
	case errors.Is(err, ErrConflict):
		return api.Wrap(api.ErrConflict, err, "the entry kept changing while it was restored: run again")
	}
	return api.Wrap(api.ErrUnavailable, err, "a bucket or its source could not be read or written")
}

// Kind is what is wrong with one key.
type Kind string

// The problem kinds.
const (
	// Missing: the source says the key must be there; the bucket lacks it
	// (never written, delete-marked, or not decodable).
	Missing Kind = "missing"
	// Altered: the bucket's entry says other than the source (Problem
	// names the fields).
	Altered Kind = "altered"
	// Extra: the bucket holds an entry its source never recorded.
	Extra Kind = "extra"
)

// Problem is one key of a bucket that disagrees with its source.
type Problem struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Kind   Kind   `json:"kind"`
	// Fields names the differing fields of an altered entry.
	Fields []string `json:"fields,omitempty"`
	// Detail says what is wrong in words: ids, field names and states,
	// never a value of a person's text or a payload.
	Detail string `json:"detail"`
}

// Subject is the problem's key as a subject ($KV.<bucket>.<key>), as
// audit.verify names it.
func (p Problem) Subject() string { return subjects.BucketKey(p.Bucket, p.Key) }

// VerifyKind is the problem's kind as audit.verify names it
// (api.VerifyProblem.Kind): the bucket's object and the kind,
// "hold_missing", "approval_altered", "drain_missing",
// "idempotency_extra" (HOLDS' are those verify has named since it first
// compared HOLDS).
func (p Problem) VerifyKind() string {
	object := map[string]string{subjects.HoldsBucket: "hold", subjects.ApprovalsBucket: "approval",
		subjects.DrainsBucket: "drain", subjects.IdempotencyBucket: "idempotency"}[p.Bucket]
	if object == "" {
		object = "index"
	}
	return object + "_" + string(p.Kind)
}

// LogValue logs the problem's bucket, key, kind and fields: ids and
// names, never a value (its keys are ids: hold, approval and drain ids,
// idempotency keys, which are hashes).
func (p Problem) LogValue() slog.Value {
	return slog.GroupValue(slog.String("bucket", p.Bucket), slog.String("key", p.Key), slog.String("kind", string(p.Kind)),
		slog.Any("fields", p.Fields))
}

// LogReport logs what Restore found and did: one INDEX_RESTORED line
// with the counts, one INDEX_PROBLEM line per problem left unrestored
// (at error) or found and fixed (at warn).
func LogReport(ctx context.Context, log *slog.Logger, rep Report) {
	left := map[string]bool{}
	for _, p := range rep.Unrestorable {
		left[p.Key] = true
		log.ErrorContext(ctx, "INDEX_PROBLEM", "problem", p, "restored", false)
	}
	for _, p := range rep.Problems {
		if !left[p.Key] {
			log.WarnContext(ctx, "INDEX_PROBLEM", "problem", p, "restored", p.Kind != Extra)
		}
	}
	log.InfoContext(ctx, "INDEX_RESTORED", "bucket", rep.Bucket, "problems", len(rep.Problems), "created", rep.Created,
		"updated", rep.Updated, "removed", rep.Removed, "unchanged", rep.Unchanged, "unrestorable", len(rep.Unrestorable), "retries", rep.Retries)
}

// Entry is one key as its source says it must be.
type Entry struct {
	Key string
	// Value is the owner's type: api.Hold, api.Approval,
	// idempotency.KeyState or api.DrainState.
	Value any
	// Lacks names what the source does not hold of the entry (empty: the
	// source holds every field the owner writes).
	Lacks string
	// meta is the index's own view of the source (nil for most).
	meta any
}

// Buckets are the buckets this package rebuilds, in the order Compare all
// reports them.
func Buckets() []string {
	return []string{subjects.HoldsBucket, subjects.ApprovalsBucket, subjects.DrainsBucket, subjects.IdempotencyBucket}
}

// DefaultGrace is how long a difference is given before it is a problem:
// owners write the bucket and its source one after the other (HOLDS then
// AUDIT, AUDIT then APPROVALS, LEDGER then IDEMPOTENCY).
const DefaultGrace = time.Minute

// ExtraAction is what Restore does with an extra entry.
type ExtraAction int

const (
	// ExtraReport reports it and leaves it (the default).
	ExtraReport ExtraAction = iota
	// ExtraRemove writes a delete marker over it (conditional on its
	// revision; the bucket's history keeps what it held).
	ExtraRemove
)

// Options configure a Rebuilder.
type Options struct {
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Grace overrides DefaultGrace (negative: none).
	Grace time.Duration
	// Extra is what Restore does with extra entries.
	Extra ExtraAction
}

// Rebuilder compares and restores buckets over one JetStream handle. It
// needs read access to AUDIT, LEDGER, QUARANTINE and the buckets' streams
// (direct gets, no consumer), and write access to a bucket it restores.
type Rebuilder struct {
	js    jetstream.JetStream
	now   func() time.Time
	grace time.Duration
	extra ExtraAction
	// beforeWrite, in tests, runs before each conditional write of a key
	// (an owner writing at that moment); afterRead once the bucket was
	// read, before its source is.
	beforeWrite func(key string)
	afterRead   func()
}

// New returns a Rebuilder on js.
func New(js jetstream.JetStream, o Options) *Rebuilder {
	r := &Rebuilder{js: js, now: o.Now, grace: o.Grace, extra: o.Extra}
	if r.now == nil {
		r.now = time.Now
	}
	switch {
	case r.grace == 0:
		r.grace = DefaultGrace
	case r.grace < 0:
		r.grace = 0
	}
	return r
}

// Expected returns bucket as its sources say it must be, with the default
// options.
func Expected(ctx context.Context, js jetstream.JetStream, bucket string) (map[string]Entry, error) {
	return New(js, Options{}).Expected(ctx, bucket)
}

// Compare compares bucket with its sources, with the default options.
func Compare(ctx context.Context, js jetstream.JetStream, bucket string) ([]Problem, error) {
	return New(js, Options{}).Compare(ctx, bucket)
}

// Restore restores bucket from its sources with opts.
func Restore(ctx context.Context, js jetstream.JetStream, bucket string, opts Options) (Report, error) {
	return New(js, opts).Restore(ctx, bucket)
}

// index is one bucket's rules: how its sources fold, how an entry is read
// and compared, and what Restore writes.
type index interface {
	// each folds the bucket's sources and hands every entry they give to
	// fn (once per key).
	each(ctx context.Context, r *Rebuilder, fn func(Entry)) error
	// one folds the sources of old's key again (a write that lost its
	// compare-and-set: the owner wrote meanwhile, its source too); ok is
	// false when they give nothing of it.
	one(ctx context.Context, r *Rebuilder, old Entry) (e Entry, ok bool, err error)
	// decode reads a stored value of key.
	decode(key string, b []byte) (any, error)
	// missing says whether want, absent from the bucket (s: what the key
	// holds, a delete marker, nothing or a value that does not decode), is
	// a problem now, and the detail.
	missing(r *Rebuilder, want Entry, s stored) (verdict, string)
	// diff names the meaning-carrying fields in which stored differs from
	// want (none: no problem, a difference within the grace included).
	diff(r *Rebuilder, stored any, want Entry) []string
	// extra says whether stored, which the source does not hold, is a
	// problem now.
	extra(r *Rebuilder, stored any) bool
	// restore returns the value to write for want over stored (nil when
	// missing): ErrUnrestorable when the source does not hold enough.
	restore(r *Rebuilder, want Entry, stored any) ([]byte, error)
}

// verdict is what an entry the source gives and the bucket lacks is.
type verdict int

const (
	// lost: missing.
	lost verdict = iota
	// inFlight: the owner writes the source first and the bucket next,
	// and the source's write is recent: not a problem (yet).
	inFlight
	// recheck: the owner writes the bucket first, and the source's write
	// is recent: the key may have been written after the bucket was
	// read. It is read again: absent still, it is missing.
	recheck
)

// indexOf returns the rules of bucket.
func indexOf(bucket string) (index, error) {
	switch bucket {
	case subjects.HoldsBucket:
		return holdsIndex{}, nil
	case subjects.ApprovalsBucket:
		return approvalsIndex{}, nil
	case subjects.DrainsBucket:
		return drainsIndex{}, nil
	case subjects.IdempotencyBucket:
		return idempotencyIndex{}, nil
	}
	return nil, fmt.Errorf("%w: %.64q (one of %s)", ErrUnknownBucket, bucket, strings.Join(Buckets(), ", "))
}

// Expected returns bucket as its sources say it must be, by key. It
// holds every entry at once (a million for a large IDEMPOTENCY): Compare
// and Restore stream the largest source instead.
func (r *Rebuilder) Expected(ctx context.Context, bucket string) (map[string]Entry, error) {
	ix, err := indexOf(bucket)
	if err != nil {
		return nil, err
	}
	out := map[string]Entry{}
	if err := ix.each(ctx, r, func(e Entry) { out[e.Key] = e }); err != nil {
		return nil, err
	}
	return out, nil
}

// fromMap hands every entry of m to fn (an index that folds its sources
// into a map first).
func fromMap(m map[string]Entry, err error, fn func(Entry)) error {
	if err != nil {
		return err
	}
	for _, e := range m {
		fn(e)
	}
	return nil
}

// stored is one key as the bucket holds it.
type stored struct {
	// rev is the sequence of the key's last message (a delete marker's
	// too): what a conditional write expects.
	rev uint64
	// deleted: the last message is a delete or purge marker.
	deleted bool
	value   any
	// err: the value does not decode.
	err error
	// matched: a source's entry was compared with it.
	matched bool
}

// present reports whether the key holds a decodable value.
func (s stored) present() bool { return s.rev != 0 && !s.deleted && s.err == nil }

// kvOperation and markerReason are the headers of a key-value marker.
const (
	kvOperation  = "KV-Operation"
	markerReason = "Nats-Marker-Reason"
)

// scanBatch is how many messages one direct-get request of a bucket
// scan asks for.
const scanBatch = 512

// read returns every key of bucket as stored (its last message), read
// with direct-get batches over the bucket's stream (no consumer), in
// sequence order without a subject filter: the stream holds only the
// bucket's keys, and a filtered batch costs the server a pending count
// per message (a third of the time of a large bucket's scan). A bucket
// that is not provisioned reads empty.
func (r *Rebuilder) read(ctx context.Context, ix index, bucket string) (map[string]stored, error) {
	prefix := strings.TrimSuffix(subjects.BucketKeys(bucket), ">")
	out := map[string]stored{}
	err := scanAll(ctx, r.js, subjects.BucketStream(bucket),
		streams.DirectRequest{Seq: 1, Batch: scanBatch}, func(m *jetstream.RawStreamMsg) error {
			key, ok := strings.CutPrefix(m.Subject, prefix)
			if !ok {
				return nil
			}
			out[key] = decodeStored(ix, key, m)
			return nil
		})
	if errors.Is(err, nats.ErrNoResponders) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrUnavailable, bucket, err)
	}
	return out, nil
}

// decodeStored reads one stored message of key.
func decodeStored(ix index, key string, m *jetstream.RawStreamMsg) stored {
	s := stored{rev: m.Sequence}
	if m.Header.Get(kvOperation) != "" || m.Header.Get(markerReason) != "" {
		s.deleted = true
		return s
	}
	s.value, s.err = ix.decode(key, m.Data)
	return s
}

// readKey returns key as stored now (a direct get of its last message).
func (r *Rebuilder) readKey(ctx context.Context, ix index, bucket, key string) (stored, error) {
	var s stored
	_, err := streams.DirectGet(ctx, r.js, subjects.BucketStream(bucket), streams.DirectRequest{LastFor: subjects.BucketKey(bucket, key)},
		func(m *jetstream.RawStreamMsg) error {
			s = decodeStored(ix, key, m)
			return nil
		})
	if err != nil {
		return stored{}, fmt.Errorf("%w: read %s %s: %w", ErrUnavailable, bucket, key, err)
	}
	return s, nil
}

// Compare reads bucket and its sources and returns every key that
// disagrees, sorted by key (missing, altered and extra alike).
func (r *Rebuilder) Compare(ctx context.Context, bucket string) ([]Problem, error) {
	ix, err := indexOf(bucket)
	if err != nil {
		return nil, err
	}
	ps, _, _, err := r.run(ctx, ix, bucket)
	return ps, err
}

// run reads the bucket, then folds its sources, comparing each entry
// they give as it comes (a large source, LEDGER, is never held whole:
// only the bucket is), and returns the problems, the source's entries of
// the keys that have one, and the bucket as read. The bucket is read
// first: a source written after it (an owner's write in flight) is
// within the grace.
func (r *Rebuilder) run(ctx context.Context, ix index, bucket string) ([]Problem, map[string]Entry, map[string]stored, error) {
	have, err := r.read(ctx, ix, bucket)
	if err != nil {
		return nil, nil, nil, err
	}
	if r.afterRead != nil {
		r.afterRead()
	}
	var out []Problem
	var again []Entry
	want := map[string]Entry{}
	err = ix.each(ctx, r, func(w Entry) {
		s, ok := have[w.Key]
		if ok {
			if s.matched {
				return // a second entry of the key: the first is the source's
			}
			s.matched = true
			have[w.Key] = s
		}
		p, bad, recheck := r.check(ix, bucket, w, s, false)
		switch {
		case recheck:
			again = append(again, w)
		case bad:
			out = append(out, p)
			want[w.Key] = w
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	// Keys the source wrote lately that the bucket lacked when it was
	// read: as they are now.
	for _, w := range again {
		s, err := r.readKey(ctx, ix, bucket, w.Key)
		if err != nil {
			return nil, nil, nil, err
		}
		s.matched = true
		have[w.Key] = s
		if p, bad, _ := r.check(ix, bucket, w, s, true); bad {
			out = append(out, p)
			want[w.Key] = w
		}
	}
	for key, s := range have {
		if s.matched || !s.present() || !ix.extra(r, s.value) {
			continue
		}
		out = append(out, Problem{Bucket: bucket, Key: key, Kind: Extra,
			Detail: fmt.Sprintf("%s holds %s, which its source never recorded", bucket, key)})
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Key, b.Key) })
	return out, want, have, nil
}

// check compares one expected entry with the key as stored. again says
// the key is to be read again before it is called missing or altered
// (final: it was).
func (r *Rebuilder) check(ix index, bucket string, w Entry, s stored, final bool) (p Problem, bad, again bool) {
	if !s.present() {
		v, detail := ix.missing(r, w, s)
		switch {
		case v == inFlight:
			return Problem{}, false, false
		case v == recheck && !final:
			return Problem{}, false, true
		}
		how := "has no entry of it"
		switch {
		case s.deleted:
			how = "has it delete-marked"
		case s.err != nil:
			how = "holds a value of it that does not decode"
		}
		return Problem{Bucket: bucket, Key: w.Key, Kind: Missing, Detail: fmt.Sprintf("%s; %s %s", detail, bucket, how)}, true, false
	}
	fields := ix.diff(r, s.value, w)
	if len(fields) == 0 {
		return Problem{}, false, false
	}
	if !final {
		// The bucket was read before the source: an entry its owner
		// moved on since (a claim committed meanwhile) is read again.
		return Problem{}, false, true
	}
	return Problem{Bucket: bucket, Key: w.Key, Kind: Altered, Fields: fields,
		Detail: fmt.Sprintf("%s says of %s other than its source: %s", bucket, w.Key, strings.Join(fields, ", "))}, true, false
}

// Report is what Restore did.
type Report struct {
	Bucket string `json:"bucket"`
	// Problems are what Compare found before.
	Problems []Problem `json:"problems"`
	// Created: missing entries written; Updated: altered ones corrected;
	// Removed: extra ones delete-marked (Options.Extra).
	Created int `json:"created"`
	Updated int `json:"updated"`
	Removed int `json:"removed"`
	// Unchanged: problems found fixed when written (the owner wrote
	// meanwhile), or extra entries left.
	Unchanged int `json:"unchanged"`
	// Unrestorable are the problems the source cannot fix, with why.
	Unrestorable []Problem `json:"unrestorable,omitempty"`
	// Retries counts writes that lost their compare-and-set and were
	// read and compared again.
	Retries int `json:"retries"`
}

// maxAttempts bounds how often Restore reads a key again after losing
// its compare-and-set.
const maxAttempts = 5

// Restore compares bucket with its sources and writes every missing
// entry and corrects every altered one, each conditional on the revision
// it read; a key that changed meanwhile is read and compared again. It is
// idempotent: a second run finds nothing to write. An extra entry is
// reported, and delete-marked with ExtraRemove. Errors of single keys are
// in the report (Unrestorable); the error is for a read that failed.
func (r *Rebuilder) Restore(ctx context.Context, bucket string) (Report, error) {
	ix, err := indexOf(bucket)
	if err != nil {
		return Report{}, err
	}
	ps, want, have, err := r.run(ctx, ix, bucket)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Bucket: bucket, Problems: ps}
	for _, p := range rep.Problems {
		if p.Kind == Extra {
			if r.extra != ExtraRemove {
				rep.Unchanged++
				continue
			}
			if err := r.remove(ctx, bucket, p.Key, have[p.Key].rev); err != nil {
				p.Detail += ": not removed: " + err.Error()
				rep.Unrestorable = append(rep.Unrestorable, p)
				continue
			}
			rep.Removed++
			continue
		}
		done, err := r.fix(ctx, ix, bucket, want[p.Key], have[p.Key], &rep)
		switch {
		case err != nil:
			p.Detail += ": " + err.Error()
			rep.Unrestorable = append(rep.Unrestorable, p)
		case !done:
			rep.Unchanged++
		case p.Kind == Missing:
			rep.Created++
		default:
			rep.Updated++
		}
	}
	return rep, nil
}

// fix writes want over s (conditional on s.rev), reading the key again
// after a lost compare-and-set; it reports whether it wrote.
func (r *Rebuilder) fix(ctx context.Context, ix index, bucket string, want Entry, s stored, rep *Report) (bool, error) {
	for attempt := 0; ; attempt++ {
		var cur any
		if s.present() {
			cur = s.value
		}
		b, err := ix.restore(r, want, cur)
		if err != nil {
			return false, err
		}
		if r.beforeWrite != nil {
			r.beforeWrite(want.Key)
		}
		err = r.put(ctx, bucket, want.Key, b, s.rev)
		if err == nil {
			return true, nil
		}
		if !wrongLastSeq(err) {
			return false, err
		}
		if attempt+1 >= maxAttempts {
			return false, fmt.Errorf("%w: %s %s after %d attempts", ErrConflict, bucket, want.Key, maxAttempts)
		}
		rep.Retries++
		// The owner wrote meanwhile: the key and its source as they are
		// now (a hold lifted, an approval refused since they were read).
		if s, err = r.readKey(ctx, ix, bucket, want.Key); err != nil {
			return false, err
		}
		w, ok, err := ix.one(ctx, r, want)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, nil
		}
		want = w
		if _, wrong, _ := r.check(ix, bucket, want, s, true); !wrong {
			return false, nil // the owner wrote it right meanwhile
		}
	}
}

// put writes b on key, conditional on the key's last sequence being rev
// (0: never written).
func (r *Rebuilder) put(ctx context.Context, bucket, key string, b []byte, rev uint64) error {
	m := nats.NewMsg(subjects.BucketKey(bucket, key))
	m.Data = b
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("%w: write %s %s: %w", ErrUnavailable, bucket, key, err)
	}
	return nil
}

// remove delete-marks key, conditional on its last sequence being rev.
func (r *Rebuilder) remove(ctx context.Context, bucket, key string, rev uint64) error {
	m := nats.NewMsg(subjects.BucketKey(bucket, key))
	m.Header.Set(kvOperation, "DEL")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("%w: delete-mark %s %s: %w", ErrUnavailable, bucket, key, err)
	}
	return nil
}

// wrongLastSeq reports whether err is a refused expected last subject
// sequence.
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// recent reports whether t is within the grace of now (before it, or
// after it by a clock's skew: a time further ahead is a forgery's, never
// given time).
func (r *Rebuilder) recent(t time.Time) bool {
	d := r.now().Sub(t)
	return !t.IsZero() && d < r.grace && d > -r.grace
}

// Keys returns the keys bucket holds (its delete-marked ones left out),
// sorted, read with direct gets (no consumer).
func Keys(ctx context.Context, js jetstream.JetStream, bucket string) ([]string, error) {
	ix, err := indexOf(bucket)
	if err != nil {
		return nil, err
	}
	have, err := New(js, Options{}).read(ctx, ix, bucket)
	if err != nil {
		return nil, err
	}
	var out []string
	for k, s := range have {
		if s.rev != 0 && !s.deleted {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ProbeTimeout bounds the first request of every scan: a connection
// without read access to a stream gets no reply at all (the server
// reports the permission violation on the connection, not to the
// request), which would otherwise cost the whole scan's deadline.
const ProbeTimeout = 10 * time.Second

// scanAll is streams.DirectGetAll, after a probe of the stream that
// fails within ProbeTimeout when no reply comes (no read access, no
// direct get) instead of hanging until ctx ends.
func scanAll(ctx context.Context, js jetstream.JetStream, stream string, req streams.DirectRequest, fn func(*jetstream.RawStreamMsg) error) error {
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	_, err := streams.DirectGet(pctx, js, stream, streams.DirectRequest{Seq: 1}, func(*jetstream.RawStreamMsg) error { return nil })
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("no reply from %s's direct get within %s (no read access?): %w", stream, ProbeTimeout, err)
		}
		return err
	}
	return streams.DirectGetAll(ctx, js, stream, req, fn)
}
