// Package legalhold is the auditor's legal-hold part (Holds): the hold
// endpoints (hold.place, hold.lift, hold.lift.approved, hold.get,
// hold.list), the queue of hold records to append to chains (a hold placed
// or lifted, a dynamic hold matching a new chain) and of chains to copy to
// LEGALHOLD, which the live view feeds and Holds.Run works off, the append
// of a hold's record (on quarantiner.hold, conditional on the chain's
// length), the copy of a held chain's records, as stored, into LEGALHOLD,
// the check of those copies for audit.verify, and the check that
// QUARANTINE's MaxAge keeps the longest retention. It writes HOLDS, the
// holds' actions to AUDIT and LEGALHOLD; a hold's record is the
// quarantiner's to append.
package legalhold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Provenance headers of a LEGALHOLD copy.
const (
	HeaderSourceStream  = "Deadletter-Source-Stream"
	HeaderSourceSeq     = "Deadletter-Source-Seq"
	HeaderSourceSubject = "Deadletter-Source-Subject"
)

// Reload is how often the active holds are read again from HOLDS
// (another auditor instance may have placed or lifted one).
const Reload = 5 * time.Second

// SweepEvery is how often held chains are checked against their
// LEGALHOLD copies and failed hold work is retried: a quarter of
// QUARANTINE's MaxAge, between 100 ms and a minute, so a copy that failed
// is retried well before the original can expire; a minute without a
// MaxAge.
func SweepEvery(maxAge time.Duration) time.Duration {
	if maxAge == 0 {
		return time.Minute
	}
	return min(max(maxAge/4, 100*time.Millisecond), time.Minute)
}

// Kind is what one piece of hold work does.
type Kind int

const (
	// Place appends the hold's hold_placed record.
	Place Kind = iota
	// Lift appends the hold's hold_lifted record.
	Lift
	// Copy copies the chain's new records to LEGALHOLD.
	Copy
)

// Work is one chain's pending hold work.
type Work struct {
	Kind          Kind
	HoldID        string // place, lift
	DLQID, Domain string
}

// Queue is the auditor's view of the holds and its pending work. It is
// safe for concurrent use.
type Queue struct {
	store *hold.Store

	mu    sync.Mutex
	known map[string]api.Hold // every hold read or written, by id
	// match are the known active holds' targets, compiled (hold.Compile:
	// a filter's identifiers read once, not per record).
	match  map[string]hold.Matcher
	queue  map[Work]bool
	copied map[string]int // records copied to LEGALHOLD, by dlq id
	wake   chan struct{}
}

// NewQueue returns an empty queue over the holds of store.
func NewQueue(store *hold.Store) *Queue {
	return &Queue{store: store, known: map[string]api.Hold{}, match: map[string]hold.Matcher{}, queue: map[Work]bool{},
		copied: map[string]int{}, wake: make(chan struct{}, 1)}
}

// Store is the holds' store (HOLDS).
func (q *Queue) Store() *hold.Store { return q.store }

// Wake receives when work was queued.
func (q *Queue) Wake() <-chan struct{} { return q.wake }

// Set records h as the latest state of its hold.
func (q *Queue) Set(h api.Hold) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.set(h)
}

// set records h (q.mu held), compiling an active dynamic hold's target
// (one that does not compile matches nothing: Place refuses it).
func (q *Queue) set(h api.Hold) {
	q.known[h.ID] = h
	delete(q.match, h.ID)
	if h.Status == api.HoldActive {
		if m, err := hold.Compile(h.Target); err == nil {
			q.match[h.ID] = m
		}
	}
}

// enqueue adds work (q.mu held).
func (q *Queue) enqueue(w Work) {
	q.queue[w] = true
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Add queues work.
func (q *Queue) Add(w Work) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enqueue(w)
}

// Retry queues work again without waking the worker: it is retried at
// the next sweep, not at once.
func (q *Queue) Retry(w Work) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue[w] = true
}

// OnRecord is the live view's hook (under its lock: quick, no I/O): a
// chain that matches an active dynamic hold it does not carry gets the
// hold's record, one that carries a lifted hold gets the lift, and a held
// chain's new record is copied to LEGALHOLD (when legal: LEGALHOLD is
// provisioned). sub is the chain as the view knows it after r (its
// identifiers, the payload's among them); carries tells the holds the
// chain carries (nil: none).
func (q *Queue) OnRecord(r chain.Head, sub hold.Subject, carries func(holdID string) bool, legal bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, h := range q.known {
		carried := carries != nil && carries(h.ID)
		m := q.match[h.ID]
		switch {
		case h.Status == api.HoldActive && !carried && hold.Dynamic(h.Target) && m != nil && m(sub):
			q.enqueue(Work{Kind: Place, HoldID: h.ID, DLQID: r.DLQID, Domain: r.Domain})
		case h.Status == api.HoldLifted && carried:
			q.enqueue(Work{Kind: Lift, HoldID: h.ID, DLQID: r.DLQID, Domain: r.Domain})
		}
	}
	if carries != nil && legal {
		q.enqueue(Work{Kind: Copy, DLQID: r.DLQID, Domain: r.Domain})
	}
}

// Matching returns the ids of the active holds whose target holds the
// chain sub summarizes, sorted: those whose record it carries and those
// whose record is not written yet alike (the redriver refuses it for
// both, hold.Refuse).
func (q *Queue) Matching(sub hold.Subject) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for id, m := range q.match {
		if m(sub) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Held is a held chain as the live view knows it.
type Held struct {
	DLQID, Domain string
	// Records is how many records the chain has.
	Records int
	// Holds are the holds it carries.
	Holds []string
}

// Sweep queues a copy of every held chain with records not copied yet
// (when legal), and the lift of every lifted hold a chain still carries.
func (q *Queue) Sweep(held []Held, legal bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ref := range held {
		if legal && q.copied[ref.DLQID] < ref.Records {
			q.enqueue(Work{Kind: Copy, DLQID: ref.DLQID, Domain: ref.Domain})
		}
		for _, id := range ref.Holds {
			if h, ok := q.known[id]; ok && h.Status == api.HoldLifted {
				q.enqueue(Work{Kind: Lift, HoldID: id, DLQID: ref.DLQID, Domain: ref.Domain})
			}
		}
	}
}

// Pending returns the dlq ids with a place of holdID queued.
func (q *Queue) Pending(holdID string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for w := range q.queue {
		if w.Kind == Place && w.HoldID == holdID {
			out = append(out, w.DLQID)
		}
	}
	slices.Sort(out)
	return out
}

// Take returns the queued work and empties the queue.
func (q *Queue) Take() []Work {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Work, 0, len(q.queue))
	for w := range q.queue {
		out = append(out, w)
	}
	clear(q.queue)
	// Copies last: a place's record is copied with the chain.
	slices.SortStableFunc(out, func(a, b Work) int { return int(a.Kind) - int(b.Kind) })
	return out
}

// Reload reads every hold from HOLDS.
func (q *Queue) Reload(ctx context.Context) error {
	all, err := q.store.All(ctx)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, h := range all {
		if k, ok := q.known[h.ID]; !ok || k.Status != h.Status {
			q.set(h)
		}
	}
	return nil
}

// Hold returns the hold id as last known.
func (q *Queue) Hold(id string) (api.Hold, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	h, ok := q.known[id]
	return h, ok
}

// Copied notes that the first n records of dlqID are in LEGALHOLD.
func (q *Queue) Copied(dlqID string, n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.copied[dlqID] = max(q.copied[dlqID], n)
}

// ChainReader reads quarantine chains (chain.Reader).
type ChainReader interface {
	// Read returns a chain, folded.
	Read(ctx context.Context, domain, dlqID string) (chain.Chain, error)
	// Stored returns a chain's records as stored.
	Stored(ctx context.Context, domain, dlqID string) ([]chain.Stored, error)
}

// Requester sends a request and waits for its reply (*nats.Conn);
// chain.Requester.
type Requester = chain.Requester

// Append appends hold h's record of kind (placed or lifted) to the
// chain, unless the chain already says so (a chain that carries the hold
// gets no second placing; one that does not gets no lift), through the
// quarantiner's quarantiner.hold (chain.Appender.Update: conditional on
// the chain's length; a chain that changed meanwhile is read again).
func Append(ctx context.Context, chains ChainReader, nc Requester, h api.Hold, kind record.Kind, domain, dlqID string) error {
	if kind == record.KindHoldLifted && h.LiftedAt == nil {
		return fmt.Errorf("auditor: hold %s is not lifted", h.ID)
	}
	_, _, err := chain.NewAppender(nc, api.QuarantinerHold).Update(ctx, readSource{chains}, domain, dlqID,
		func(ch chain.Chain) (*api.AppendRequest, error) {
			if has := ch.State.HeldBy(h.ID); has == (kind == record.KindHoldPlaced) {
				return nil, nil
			}
			if ch.FoldErr != nil {
				return nil, fmt.Errorf("auditor: chain %s is not valid (%w): no hold record can follow", dlqID, ch.FoldErr)
			}
			req := api.AppendRequest{DLQID: dlqID, Domain: domain, Kind: kind,
				Actor: h.PlacedBy, Reason: h.Reason, Hold: &record.HoldMark{HoldID: h.ID, CaseID: h.CaseID, At: h.PlacedAt}}
			if kind == record.KindHoldLifted {
				req.Actor, req.Reason, req.Hold.At = h.LiftedBy, h.LiftReason, *h.LiftedAt
			}
			return &req, nil
		})
	return err
}

// readSource is a ChainReader as the chain.Source of Append, its read
// errors named as the auditor's.
type readSource struct{ chains ChainReader }

func (r readSource) Read(ctx context.Context, domain, dlqID string) (chain.Chain, error) {
	ch, err := r.chains.Read(ctx, domain, dlqID)
	if err != nil {
		return ch, fmt.Errorf("auditor: read chain: %w", err)
	}
	return ch, nil
}

// CopyChain copies the chain's records not yet in LEGALHOLD there, each
// as stored (the sealed bytes) with its provenance (source stream,
// sequence and subject), in index order. Each copy is conditional on the
// last copy of the chain (expected last subject sequence), so two
// copiers never write a record twice. It returns how many of the chain's
// records are in LEGALHOLD then.
func CopyChain(ctx context.Context, js jetstream.JetStream, chains ChainReader, domain, dlqID string) (int, error) {
	subj := subjects.LegalHold(domain, dlqID)
	n, lastSeq := 0, uint64(0)
	_, err := streams.DirectGet(ctx, js, subjects.LegalHoldStream, streams.DirectRequest{LastFor: subj}, func(m *jetstream.RawStreamMsg) error {
		h, err := chain.DecodeHead(m.Data)
		if err != nil {
			return err
		}
		n, lastSeq = h.Index+1, m.Sequence
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("auditor: read %s: %w", subjects.LegalHoldStream, err)
	}
	stored, err := chains.Stored(ctx, domain, dlqID)
	if err != nil && !errors.Is(err, chain.ErrNotFound) {
		return 0, fmt.Errorf("auditor: read chain: %w", err)
	}
	for _, m := range stored {
		h, err := chain.DecodeHead(m.Data)
		if err != nil {
			return 0, fmt.Errorf("auditor: chain %s: %w", dlqID, err)
		}
		if h.Index < n {
			continue
		}
		if h.Index > n {
			return 0, fmt.Errorf("auditor: chain %s: records %d..%d expired from %s before they were copied", dlqID, n, h.Index-1, subjects.QuarantineStream)
		}
		msg := nats.NewMsg(subj)
		msg.Data = m.Data
		msg.Header.Set(HeaderSourceStream, subjects.QuarantineStream)
		msg.Header.Set(HeaderSourceSeq, strconv.FormatUint(m.Seq, 10))
		msg.Header.Set(HeaderSourceSubject, subjects.Quarantine(domain, dlqID))
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastSeq, 10))
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			return 0, fmt.Errorf("auditor: copy record %d of %s to %s: %w", h.Index, dlqID, subjects.LegalHoldStream, err)
		}
		n, lastSeq = n+1, ack.Sequence
	}
	return n, nil
}
