package quarantiner

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// errConflict reports that another writer appended to the chain first; the
// caller re-reads the chain and decides again.
var errConflict = errors.New("quarantiner: chain changed concurrently")

// chains appends quarantine chains, reading them with chain.Reader. A
// chain is the sequence of records on one subject
// quarantine.<domain>.<dlq_id>; appends are conditional on the subject's
// last sequence, so two writers can never fork a chain.
type chains struct {
	js     jetstream.JetStream
	reader *chain.Reader
	tr     telemetry.Tracer
	// tails caches the tails of chains read or written lately (nil: no
	// cache). An entry may be stale (another instance appended since):
	// the conditional write then fails and the chain is read again.
	tails *lru.Cache[string, tail]
	// w gathers records ready at the same time into atomic batches (nil:
	// every record is written by itself).
	w *writer
}

// newChains returns chains caching up to cacheSize tails, writing through
// w (nil: one record per write).
func newChains(js jetstream.JetStream, tr telemetry.Tracer, cacheSize int, w *writer) (*chains, error) {
	c := &chains{js: js, reader: chain.NewReader(js), tr: tr, w: w}
	if cacheSize > 0 {
		var err error
		if c.tails, err = lru.New[string, tail](cacheSize); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// tail is what an append to a chain needs: how many records it has, the
// stream sequence and the record of the last one, and the chain's fold.
type tail struct {
	n       int
	lastSeq uint64
	last    record.Record
	state   record.State
	foldErr error // the chain breaks a link or lifecycle rule
}

// tailOf returns the tail of ch.
func tailOf(ch chain.Chain) tail {
	t := tail{n: len(ch.Records), lastSeq: ch.LastSeq, state: ch.State, foldErr: ch.FoldErr}
	if t.n > 0 {
		t.last = ch.Records[t.n-1]
	}
	return t
}

// read returns a chain, seals verified and folded (no records when it has
// none yet).
func (c *chains) read(ctx context.Context, domain, dlqID string) (chain.Chain, error) {
	ch, err := c.reader.Read(ctx, domain, dlqID)
	if errors.Is(err, chain.ErrNotFound) {
		return chain.Chain{Domain: domain, DLQID: dlqID}, nil
	}
	if err != nil {
		return chain.Chain{}, fmt.Errorf("quarantiner: read chain: %w", err)
	}
	return ch, nil
}

// tail returns the tail of a chain, from the cache when it holds one
// (cached true), else read from the stream (and cached).
func (c *chains) tail(ctx context.Context, domain, dlqID string) (t tail, cached bool, err error) {
	key := subjects.Quarantine(domain, dlqID)
	if c.tails != nil {
		if t, ok := c.tails.Get(key); ok {
			return t, true, nil
		}
	}
	ch, err := c.read(ctx, domain, dlqID)
	if err != nil {
		return tail{}, false, err
	}
	t = tailOf(ch)
	if t.n > 0 {
		c.remember(domain, dlqID, t)
	}
	return t, false, nil
}

// remember caches t as the tail of a chain.
func (c *chains) remember(domain, dlqID string, t tail) {
	if c.tails != nil {
		c.tails.Add(subjects.Quarantine(domain, dlqID), t)
	}
}

// forget drops a chain's cached tail (it proved stale, or changed).
func (c *chains) forget(domain, dlqID string) {
	if c.tails != nil {
		c.tails.Remove(subjects.Quarantine(domain, dlqID))
	}
}

// maxAttempts bounds how often update decides again on a chain that
// changed under it.
const maxAttempts = 5

// Errors of update.
var (
	// errStale, from a decide function given a cached tail, asks update to
	// forget that tail and decide again on the stored chain.
	errStale = errors.New("quarantiner: cached tail may be stale")
	// errKeptChanging: every attempt met a concurrent append.
	errKeptChanging = errors.New("kept changing")
)

// view is a chain as a decide function sees it: its tail, from the cache
// (cached) or read; and the whole chain when update was asked to read it
// (nil otherwise).
type view struct {
	tail
	cached bool
	chain  *chain.Chain
}

// decideFunc returns the record to append to the chain v shows (nil: none,
// and update returns without writing), or an error update returns as is
// (errStale: decide again on the stored chain).
type decideFunc func(v view) (*record.Record, error)

// update is the one read-decide-conditional-append loop of a quarantine
// chain: it reads the chain (whole: every record, sealed and folded; else
// only its tail, from the cache when it holds one), lets decide choose the
// record, appends it conditionally on the tail it was decided on and
// caches the new tail. When another writer appended first (or a cached
// tail proved stale) it forgets the tail and decides again, at most
// maxAttempts times (then errKeptChanging). It returns the new tail and
// whether a record was written.
func (c *chains) update(ctx context.Context, domain, dlqID string, whole bool, decide decideFunc) (tail, bool, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var v view
		if whole {
			ch, err := c.read(ctx, domain, dlqID)
			if err != nil {
				return tail{}, false, err
			}
			v = view{tail: tailOf(ch), chain: &ch}
		} else {
			t, cached, err := c.tail(ctx, domain, dlqID)
			if err != nil {
				return tail{}, false, err
			}
			v = view{tail: t, cached: cached}
		}
		r, err := decide(v)
		if errors.Is(err, errStale) && v.cached {
			c.forget(domain, dlqID)
			continue
		}
		if err != nil || r == nil {
			return tail{}, false, err
		}
		prevHash := ""
		if v.n > 0 {
			prevHash = v.last.AuditHash
		}
		seq, err := c.append(ctx, v.n, prevHash, v.lastSeq, r)
		if err != nil {
			c.forget(domain, dlqID)
			if errors.Is(err, errConflict) {
				continue // re-read: the same request may have landed
			}
			return tail{}, false, err
		}
		next := tail{n: v.n + 1, lastSeq: seq, last: *r}
		if v.chain != nil {
			next.state, next.foldErr = record.Fold(append(v.chain.Records, *r))
		} else if next.state, err = v.state.Next(*r); err != nil {
			// Not reached: decide checked the transition. Such a tail
			// is not kept.
			next.foldErr = err
			return next, true, nil
		}
		c.remember(domain, dlqID, next)
		return next, true, nil
	}
	return tail{}, false, errKeptChanging
}

// append seals r as the next record of a chain of n records whose last is
// at stream sequence lastSeq with audit_hash prevHash, and stores it: in
// a batch with the records of other chains ready at the same time, or by
// itself when it is alone or its batch was refused. It returns errConflict
// when another writer appended first.
func (c *chains) append(ctx context.Context, n int, prevHash string, lastSeq uint64, r *record.Record) (uint64, error) {
	r.SchemaVersion = record.SchemaVersion
	r.Index = n
	r.PrevHash = ""
	if n > 0 {
		r.PrevHash = prevHash
	}
	b, err := record.SealMarshal(r)
	if err != nil {
		return 0, err
	}
	m := nats.NewMsg(subjects.Quarantine(r.Domain, r.DLQID))
	m.Data = b
	m.Header.Set("Deadletter-Record-Kind", string(r.Kind))
	m.Header.Set("Deadletter-Audit-Hash", r.AuditHash)
	msgID := r.DLQID + "-" + strconv.Itoa(r.Index)
	ctx, span := c.tr.StartPublish(ctx, m, telemetry.DestinationTemplate("quarantine.{domain}.{dlq_id}"),
		telemetry.MessageID(msgID), telemetry.Attributes(telemetry.DLQIDKey.String(r.DLQID),
			telemetry.DomainKey.String(r.Domain), attribute.String("deadletter.record_kind", string(r.Kind))))
	defer span.End()
	// The expectations ride in the headers, so that a batch carries them.
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastSeq, 10))
	var ack *jetstream.PubAck
	if c.w != nil {
		r := c.w.write(ctx, m)
		switch {
		case r.alone:
			// The writer wrote it by itself, as below: its outcome is
			// read the same way.
			ack, err = r.ack, r.err
		case r.err == nil:
			span.SetAttributes(attribute.Int("deadletter.batch_size", r.batch))
			telemetry.RecordAck(span, &jetstream.PubAck{Stream: subjects.QuarantineStream, Sequence: r.seq})
			return r.seq, nil
		default:
			telemetry.Error(span, "record not written")
			return 0, r.err
		}
	} else {
		ack, err = c.js.PublishMsg(ctx, m)
	}
	telemetry.RecordAck(span, ack)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			span.SetAttributes(telemetry.OutcomeKey.String("conflict"))
			return 0, errConflict
		}
		telemetry.Error(span, "record not written")
		return 0, fmt.Errorf("quarantiner: write record: %w", err)
	}
	if ack.Duplicate {
		span.SetAttributes(telemetry.OutcomeKey.String("conflict"))
		// The same (dlq id, index) was written within the duplicate window by
		// another writer: ours may differ, so decide again.
		return 0, errConflict
	}
	return ack.Sequence, nil
}
