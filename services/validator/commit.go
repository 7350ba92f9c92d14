package validator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// KeyState is the IDEMPOTENCY value (see package idempotency).
type KeyState = idempotency.KeyState

// Commit states, re-exported from package idempotency.
const (
	StateClaimed   = idempotency.StateClaimed
	StateReleased  = idempotency.StateReleased
	StateCommitted = idempotency.StateCommitted
)

// ErrAlreadyCommitted reports that the key was committed before with the
// same content (idempotency.ContentHash, the domain's content identity): the
// event is a duplicate and must be acknowledged, never committed again.
// The same key committed with other content is a conflictError instead.
var ErrAlreadyCommitted = errors.New("validator: idempotency key already committed")

// conflictError is an IDEMPOTENCY_CONFLICT: the event's key is committed
// in LEDGER (at ledgerSeq) with content whose hash is committed, and the
// event's own content hashes to content. Structural: the event is
// quarantined, never acknowledged as a duplicate.
type conflictError struct {
	ledgerSeq          uint64
	committed, content string
}

func (e *conflictError) Error() string {
	return fmt.Sprintf("%s: %s", codes.IdempotencyConflict, e.detail())
}

// detail names the committed entry and both hashes (no payload values).
func (e *conflictError) detail() string {
	return fmt.Sprintf("idempotency key committed at %s sequence %d with content sha256 %s; this event's content sha256 %s",
		subjects.LedgerStream, e.ledgerSeq, e.committed, e.content)
}

// Unwrap makes the error classify as IDEMPOTENCY_CONFLICT.
func (e *conflictError) Unwrap() error {
	return codes.Errorf(codes.IdempotencyConflict, "%s", e.detail())
}

// conflict is the record.Conflict the quarantine record names.
func (e *conflictError) conflict() *record.Conflict {
	return &record.Conflict{LedgerStream: subjects.LedgerStream, LedgerSeq: e.ledgerSeq, CommittedHash: e.committed, ContentHash: e.content}
}

// sameContent returns ErrAlreadyCommitted when the committed entry's
// content hash equals the event's, else the conflict.
func sameContent(ledgerSeq uint64, committed, content string) error {
	if committed == content {
		return ErrAlreadyCommitted
	}
	return &conflictError{ledgerSeq: ledgerSeq, committed: committed, content: content}
}

// committer implements the exactly-once commit. The atomic step is the
// LEDGER write: each key has its own subject and the write is conditional on
// that subject being empty (expected last subject sequence 0), so the server
// refuses a second commit of a key whatever the de-duplication window.
//
// With a downstream system of record, whose POST is an external side effect
// that nothing can make conditional, the full protocol runs:
//
//  1. claim the key in IDEMPOTENCY with create-if-absent (or take over a
//     released or expired claim with a revision CAS);
//  2. POST downstream with Idempotency-Key = key;
//  3. write LEDGER (conditional, Nats-Msg-Id = key);
//  4. mark the key committed with a revision CAS on the claim.
//
// Without a downstream the claim would guard nothing the conditional LEDGER
// write does not already guard, so the path is 3 then 4 (create-if-absent of
// the committed state): one store write fewer per event; and the events
// ready at the same time are committed together, in two atomic batches
// (batcher).
//
// A validator dying anywhere in between leaves either nothing, a claim that
// expires after the lease, or a LEDGER message without a committed mark. The
// next delivery repeats the POST (the downstream de-duplicates on the key),
// finds the LEDGER subject written and adopts that message, then marks the
// key. So an event is never lost and never committed twice.
//
// A key found committed (or its LEDGER subject written) is a duplicate only
// when the committed content is the event's (idempotency.ContentHash: the
// canonical JSON's SHA-256, or for DSCSA the CBV 2.0 event hash ID's
// digest, recorded on the LEDGER entry and in the key state with its
// identity; a key committed under an older identity is compared by the
// current one, idempotency.CommittedHash); other content under the same key is an IDEMPOTENCY_CONFLICT,
// quarantined, never acknowledged as a duplicate (conflictError). LEDGER
// itself keeps one message per key subject (server-enforced, streams.Ledger).
type committer struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	owner  string
	lease  time.Duration
	down   *downstream // nil: LEDGER only
	now    func() time.Time
	hooks  *testHooks
	ledger func(domain, key string) string
	// failpoint is Config.Failpoint.
	failpoint *failpoint.Armed
	// batch commits in atomic batches when there is no downstream (nil:
	// one event at a time).
	batch *batcher
	// restoring is set while IDEMPOTENCY is restored from LEDGER at
	// start (Service.restoreKeys): a new claim then looks LEDGER up
	// before the downstream POST (committedBefore).
	restoring atomic.Bool
}

// testHooks lets tests stop a validator at precise points.
type testHooks struct {
	afterClaim  func(key string)
	afterLedger func(key string)
	// beforeLedgerBatch runs before a group's LEDGER batch is written,
	// with its keys (after the look-up of the keys LEDGER holds).
	beforeLedgerBatch func(keys []string)
	// restoreGrace overrides the grace of the restore at start (0: the
	// default; negative: none).
	restoreGrace time.Duration
}

type claim struct {
	rev   uint64
	state KeyState
	// adopted: the key was marked committed from LEDGER's message of this
	// very delivery (KeyState.Adopts); the event is committed.
	adopted bool
}

// commit runs the protocol for one event; ledgerSeq is the LEDGER sequence.
// With a batcher, the event is committed in a group (batcher); the
// protocol per event is the same.
// hash is the event's idempotency.ContentHash.
func (c *committer) commit(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string) (ledgerSeq uint64, err error) {
	if c.batch != nil {
		return c.batch.commit(ctx, env, data, hash, sourceSeq, dlqID)
	}
	return c.commitOne(ctx, env, data, hash, sourceSeq, dlqID)
}

// commitOne runs the protocol for one event on its own.
func (c *committer) commitOne(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string) (uint64, error) {
	if c.down == nil {
		return c.commitLedgerOnly(ctx, env, data, hash, sourceSeq, dlqID)
	}
	cl, err := c.claim(ctx, env, hash, sourceSeq, dlqID)
	if err != nil {
		return 0, err
	}
	if cl.adopted {
		return cl.state.LedgerSeq, nil
	}
	if c.hooks != nil && c.hooks.afterClaim != nil {
		c.hooks.afterClaim(env.IdempotencyKey)
	}
	if c.restoring.Load() {
		// IDEMPOTENCY is being restored from LEDGER: a committed key's
		// mark may be missing still, and the claim just taken would post
		// the event downstream a second time. LEDGER decides first.
		if seq, done, err := c.committedBefore(ctx, env, hash, sourceSeq, cl); done {
			return seq, err
		}
	}
	if err := c.post(ctx, env, data, cl); err != nil {
		return 0, err
	}
	return c.finish(ctx, env, data, hash, sourceSeq, dlqID, cl)
}

// post sends a claimed event downstream; a transient failure releases the
// claim (step 2).
func (c *committer) post(ctx context.Context, env envelope.Envelope, data []byte, cl claim) error {
	if err := c.down.post(ctx, env, data); err != nil {
		if codes.Of(err).Transient() {
			c.release(ctx, env.IdempotencyKey, cl)
		}
		return err
	}
	c.failpoint.Hit(failpoint.ValidatorAfterDownstream, env.IdempotencyKey)
	return nil
}

// finish writes LEDGER and marks the claimed key committed (steps 3 and 4).
// A LEDGER entry of the key found written with other content (a claimer
// that died before marking it committed another event of the key) is a
// conflict: the claim is released, and that event's redelivery marks it.
func (c *committer) finish(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string, cl claim) (uint64, error) {
	ledgerSeq, prior, err := c.writeLedger(ctx, env, data, hash, sourceSeq, dlqID)
	if err == nil && prior != nil {
		if committed := idempotency.ContentHash(env.Domain, prior.Data); committed != hash {
			err = sameContent(ledgerSeq, committed, hash)
		} else if resent(prior, sourceSeq) {
			// Another event committed the key and its mark was lost: a
			// duplicate (resent). The key is marked as LEDGER names it.
			c.markFrom(ctx, env.IdempotencyKey, prior, cl.rev)
			return ledgerSeq, ErrAlreadyCommitted
		}
	}
	if err != nil {
		c.release(ctx, env.IdempotencyKey, cl)
		return 0, err
	}
	if c.hooks != nil && c.hooks.afterLedger != nil {
		c.hooks.afterLedger(env.IdempotencyKey)
	}
	return ledgerSeq, c.markClaimed(ctx, env.IdempotencyKey, cl, ledgerSeq)
}

// doneState is the committed state of a claim whose event LEDGER holds at
// ledgerSeq.
func (c *committer) doneState(cl claim, ledgerSeq uint64) []byte {
	done := cl.state
	done.State, done.Owner, done.LeaseUntil = StateCommitted, "", time.Time{}
	done.LedgerSeq, done.CommittedAt = ledgerSeq, c.now().UTC()
	b, _ := json.Marshal(done)
	return b
}

// markClaimed marks a claimed key committed with a revision CAS on the
// claim (step 4).
func (c *committer) markClaimed(ctx context.Context, key string, cl claim, ledgerSeq uint64) error {
	if _, err := c.kv.Update(ctx, key, c.doneState(cl, ledgerSeq), cl.rev); err != nil {
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			// LEDGER holds the event; the next delivery adopts it.
			return codes.Wrap(codes.StoreUnavailable, err, "mark committed failed")
		}
		// Our lease expired and another validator took the claim over: it
		// will find the LEDGER subject written and mark it committed.
	}
	return nil
}

// claimState is the IDEMPOTENCY value of this validator's claim on env's
// key.
func (c *committer) claimState(env envelope.Envelope, hash string, sourceSeq uint64, dlqID string) KeyState {
	return KeyState{
		State: StateClaimed, Owner: c.owner, LeaseUntil: c.now().Add(c.lease).UTC(),
		Domain: env.Domain, EventType: env.EventType, SourceSeq: sourceSeq, DLQID: dlqID, ContentHash: hash,
		ContentIdentity: idempotency.StoredIdentity(env.Domain),
	}
}

// claim acquires the key. For a committed key it returns
// ErrAlreadyCommitted when the content is the same (committedContent),
// else the conflict; a CLAIM_HELD error while another validator's claim
// is live.
func (c *committer) claim(ctx context.Context, env envelope.Envelope, hash string, sourceSeq uint64, dlqID string) (claim, error) {
	st := c.claimState(env, hash, sourceSeq, dlqID)
	b, _ := json.Marshal(st)
	rev, err := c.kv.Create(ctx, env.IdempotencyKey, b)
	if err == nil {
		return claim{rev: rev, state: st}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return claim{}, codes.Wrap(codes.StoreUnavailable, err, "claim failed")
	}
	e, err := c.kv.Get(ctx, env.IdempotencyKey)
	if err != nil {
		return claim{}, codes.Wrap(codes.StoreUnavailable, err, "read claim failed")
	}
	cur, err := idempotency.Decode(e.Value())
	if err != nil {
		return claim{}, codes.Wrap(codes.StoreUnavailable, err, "claim state unreadable")
	}
	switch {
	case cur.State == StateCommitted:
		committed, err := c.committedContent(ctx, env, cur)
		if err != nil {
			return claim{}, err
		}
		if committed == hash && cur.Adopts(sourceSeq) {
			c.adopt(ctx, env, hash, sourceSeq, cur.LedgerSeq, dlqID, e.Revision())
			return claim{state: cur, adopted: true}, nil
		}
		return claim{state: cur}, sameContent(cur.LedgerSeq, committed, hash)
	case cur.State == StateClaimed && c.now().Before(cur.LeaseUntil):
		return claim{state: cur}, &heldError{until: cur.LeaseUntil}
	}
	// Released, or claimed by a holder whose lease ran out: take it over.
	rev, err = c.kv.Update(ctx, env.IdempotencyKey, b, e.Revision())
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			return claim{}, &heldError{until: c.now().Add(time.Second)}
		}
		return claim{}, codes.Wrap(codes.StoreUnavailable, err, "claim takeover failed")
	}
	return claim{rev: rev, state: st}, nil
}

// release gives a claim back after a transient failure, so the next delivery
// (on any instance) can claim at once. Best effort: an unreleased claim
// expires with its lease.
func (c *committer) release(ctx context.Context, key string, cl claim) {
	st := cl.state
	st.State, st.Owner, st.LeaseUntil = StateReleased, "", time.Time{}
	b, _ := json.Marshal(st)
	_, _ = c.kv.Update(ctx, key, b, cl.rev)
}

// commitLedgerOnly commits without a downstream: the conditional LEDGER
// write, then the committed mark (create-if-absent). A LEDGER entry of the
// key found written with other content is a conflict (nothing is marked:
// the entry's own event marks it, and an entry no event wrote is for
// reconciliation to list).
func (c *committer) commitLedgerOnly(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string) (uint64, error) {
	ledgerSeq, prior, err := c.writeLedger(ctx, env, data, hash, sourceSeq, dlqID)
	if err != nil {
		return 0, err
	}
	if prior != nil {
		if committed := idempotency.ContentHash(env.Domain, prior.Data); committed != hash {
			return 0, sameContent(ledgerSeq, committed, hash)
		}
		// Either a duplicate (marked committed), an earlier validator
		// died between its LEDGER write and its mark (adopt and mark),
		// or the mark was lost and this is another copy (resent: a
		// duplicate).
		e, err := c.kv.Get(ctx, env.IdempotencyKey)
		if err == nil {
			if cur, err := idempotency.Decode(e.Value()); err == nil && cur.State == StateCommitted {
				if cur.Adopts(sourceSeq) && !resent(prior, sourceSeq) {
					c.adopt(ctx, env, hash, sourceSeq, ledgerSeq, dlqID, e.Revision())
					return ledgerSeq, nil
				}
				return ledgerSeq, ErrAlreadyCommitted
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, codes.Wrap(codes.StoreUnavailable, err, "read key state failed")
		}
		if resent(prior, sourceSeq) {
			c.markFrom(ctx, env.IdempotencyKey, prior, 0)
			return ledgerSeq, ErrAlreadyCommitted
		}
	}
	if c.hooks != nil && c.hooks.afterLedger != nil {
		c.hooks.afterLedger(env.IdempotencyKey)
	}
	return ledgerSeq, c.mark(ctx, env, hash, sourceSeq, ledgerSeq, dlqID)
}

// committedState is the IDEMPOTENCY value of a key committed without a
// downstream.
func (c *committer) committedState(env envelope.Envelope, hash string, sourceSeq, ledgerSeq uint64, dlqID string) []byte {
	b, _ := json.Marshal(KeyState{
		State: StateCommitted, Domain: env.Domain, EventType: env.EventType, SourceSeq: sourceSeq,
		LedgerSeq: ledgerSeq, CommittedAt: c.now().UTC(), DLQID: dlqID, ContentHash: hash,
		ContentIdentity: idempotency.StoredIdentity(env.Domain),
	})
	return b
}

// mark writes the committed state of a key LEDGER holds (create-if-absent,
// or over a claim of a validator configured with a downstream). It returns
// ErrAlreadyCommitted when the key was marked committed already.
func (c *committer) mark(ctx context.Context, env envelope.Envelope, hash string, sourceSeq, ledgerSeq uint64, dlqID string) error {
	b := c.committedState(env, hash, sourceSeq, ledgerSeq, dlqID)
	if _, err := c.kv.Create(ctx, env.IdempotencyKey, b); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return codes.Wrap(codes.StoreUnavailable, err, "mark committed failed")
		}
		// A state from a validator configured with a downstream: overwrite
		// it only if it is not already committed.
		e, err := c.kv.Get(ctx, env.IdempotencyKey)
		if err != nil {
			return codes.Wrap(codes.StoreUnavailable, err, "read key state failed")
		}
		if cur, err := idempotency.Decode(e.Value()); err == nil && cur.State == StateCommitted {
			if cur.Adopts(sourceSeq) {
				c.adopt(ctx, env, hash, sourceSeq, ledgerSeq, dlqID, e.Revision())
				return nil
			}
			return ErrAlreadyCommitted
		}
		if _, err := c.kv.Update(ctx, env.IdempotencyKey, b, e.Revision()); err != nil {
			return codes.Wrap(codes.StoreUnavailable, err, "mark committed failed")
		}
	}
	return nil
}

// ledgerMsg is the LEDGER message of a commit. It carries no trace
// context (see writeLedger). Its Nats-Msg-Id and expectation (the key's
// subject still empty) are headers, so that a batch can carry them too.
// It names its source (the EVENTS message, and the chain of a replay) and
// its content hash, which reconciliation checks against the source.
func (c *committer) ledgerMsg(env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string) *nats.Msg {
	m := nats.NewMsg(c.ledger(env.Domain, env.IdempotencyKey))
	m.Data = data
	m.Header.Set(envelope.IdempotencyKey, env.IdempotencyKey)
	m.Header.Set(envelope.EventType, env.EventType)
	m.Header.Set(envelope.SourceStream, subjects.EventsStream)
	m.Header.Set(envelope.SourceSeq, strconv.FormatUint(sourceSeq, 10))
	if dlqID != "" {
		m.Header.Set(envelope.DLQID, dlqID)
	}
	m.Header.Set(envelope.ContentHash, hash)
	if id := idempotency.StoredIdentity(env.Domain); id != "" {
		m.Header.Set(envelope.ContentIdentity, id)
	}
	if env.Publisher != "" {
		m.Header.Set(envelope.Publisher, env.Publisher)
	}
	if d := env.Document; d != nil {
		m.Header.Set(envelope.DocumentSHA256, d.SHA256)
		m.Header.Set(envelope.DocumentIndex, strconv.Itoa(d.Index))
		m.Header.Set(envelope.DocumentOffset, strconv.Itoa(d.Offset))
		m.Header.Set(envelope.DocumentLength, strconv.Itoa(d.Length))
	}
	m.Header.Set(jetstream.MsgIDHeader, env.IdempotencyKey)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	return m
}

// writeLedger appends the event to its key's LEDGER subject; prior is the
// message found there when the subject was already written (its sequence
// is returned), by a duplicate, by a claimer that died before marking, or
// by anyone else (nil: written now).
func (c *committer) writeLedger(ctx context.Context, env envelope.Envelope, data []byte, hash string, sourceSeq uint64, dlqID string) (seq uint64, prior *jetstream.RawStreamMsg, err error) {
	m := c.ledgerMsg(env, data, hash, sourceSeq, dlqID)
	subj := m.Subject
	// The span in ctx (the commit span, or the validate span when there is
	// no downstream) stands for the LEDGER write, whose sequence it records
	// when it ends (deadletter.ledger_seq): no span of its own. The LEDGER
	// message carries no trace context: nothing continues a trace from it,
	// and a traceparent header makes the server parse every header of the
	// message (its message-tracing check), a cost per commit.
	span := trace.SpanFromContext(ctx)
	ack, err := c.js.PublishMsg(ctx, m)
	if err == nil && !ack.Duplicate {
		return ack.Sequence, nil, nil
	}
	var apiErr *jetstream.APIError
	if err == nil || errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant || apiErr.ErrorCode == streams.ErrCodeMaxMsgsPerSubject) {
		// Written already: a Nats-Msg-Id duplicate within the window, a
		// failed expectation, or the server's one message per subject.
		// Its content decides between duplicate and conflict.
		span.SetAttributes(telemetry.OutcomeKey.String("already_written"))
		raw, err := c.ledgerEntry(ctx, subj)
		if err != nil {
			return 0, nil, err
		}
		return raw.Sequence, raw, nil
	}
	return 0, nil, codes.Wrap(codes.StoreUnavailable, err, "ledger write failed")
}

// committedBefore looks env's key up in LEDGER for a claim taken while
// IDEMPOTENCY is restored. done reports that LEDGER holds it: the event
// is then a duplicate (another EVENTS message committed it; the key is
// marked as LEDGER names it), committed (this one did, before its validator stopped
// short of its mark; its POST was made before its LEDGER write; the key
// is marked as LEDGER says) or a conflict (other content under the key;
// the claim is given back, as finish does). A look-up that fails is not done: the
// protocol goes on as without a restore (LEDGER still refuses a second
// commit).
func (c *committer) committedBefore(ctx context.Context, env envelope.Envelope, hash string, sourceSeq uint64, cl claim) (uint64, bool, error) {
	prior, err := c.ledgerEntry(ctx, c.ledger(env.Domain, env.IdempotencyKey))
	if err != nil {
		return 0, false, nil
	}
	if committed := idempotency.ContentHash(env.Domain, prior.Data); committed != hash {
		c.release(ctx, env.IdempotencyKey, cl)
		return 0, true, sameContent(prior.Sequence, committed, hash)
	}
	if resent(prior, sourceSeq) {
		c.markFrom(ctx, env.IdempotencyKey, prior, cl.rev)
		return prior.Sequence, true, ErrAlreadyCommitted
	}
	return prior.Sequence, true, c.markClaimed(ctx, env.IdempotencyKey, cl, prior.Sequence)
}

// markFrom marks key committed as LEDGER's message of it, prior, names
// (idempotency.FromLedger: its source, chain and sequence, never this
// copy's): over this validator's claim at revision rev, or, without one
// (rev 0), over an absent, released or expired state. Best effort: a mark
// that fails is written by the key's next delivery or the rebuild from
// LEDGER. Without it, a committed key whose own delivery has ended (its
// LEDGER write landed but its acknowledgement was lost, and its retries
// ran out) would stay released while LEDGER holds it (#37 chaos).
func (c *committer) markFrom(ctx context.Context, key string, prior *jetstream.RawStreamMsg, rev uint64) {
	_, st, ok := idempotency.FromLedger(prior)
	if !ok {
		return
	}
	b, _ := json.Marshal(st)
	if rev != 0 {
		_, _ = c.kv.Update(ctx, key, b, rev)
		return
	}
	if _, err := c.kv.Create(ctx, key, b); !errors.Is(err, jetstream.ErrKeyExists) {
		return
	}
	e, err := c.kv.Get(ctx, key)
	if err != nil {
		return
	}
	cur, err := idempotency.Decode(e.Value())
	if err != nil || cur.State == StateCommitted || (cur.State == StateClaimed && c.now().Before(cur.LeaseUntil)) {
		return
	}
	_, _ = c.kv.Update(ctx, key, b, e.Revision())
}

// adopt writes this delivery's own committed mark over a state written
// from LEDGER's message of it (KeyState.Adopts) at revision rev, so that
// a later redelivery of the event is a duplicate. Best effort: the state
// it replaces already says committed.
func (c *committer) adopt(ctx context.Context, env envelope.Envelope, hash string, sourceSeq, ledgerSeq uint64, dlqID string, rev uint64) {
	_, _ = c.kv.Update(ctx, env.IdempotencyKey, c.committedState(env, hash, sourceSeq, ledgerSeq, dlqID), rev)
}

// resent reports whether LEDGER's message of a key, prior, was committed
// from another EVENTS message than sourceSeq: this event is then another
// copy of a committed event whose IDEMPOTENCY mark is missing (wiped and
// not restored yet, or its validator died before marking it), a
// duplicate, never a commit of its own. Its mark is written from LEDGER's
// message (markFrom), never from this copy. A message that names no
// source (written before LEDGER named it) is taken for this event's, as
// before.
func resent(prior *jetstream.RawStreamMsg, sourceSeq uint64) bool {
	src, err := strconv.ParseUint(prior.Header.Get(envelope.SourceSeq), 10, 64)
	return err == nil && src != 0 && src != sourceSeq
}

// ledgerEntry reads the LEDGER message on subj.
func (c *committer) ledgerEntry(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	s, err := c.js.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return nil, codes.Wrap(codes.StoreUnavailable, err, "ledger lookup failed")
	}
	raw, err := s.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		return nil, codes.Wrap(codes.StoreUnavailable, err, "ledger lookup failed")
	}
	return raw, nil
}

// committedContent returns the content hash of the event a committed key
// state names (idempotency.CommittedHash).
func (c *committer) committedContent(ctx context.Context, env envelope.Envelope, st KeyState) (string, error) {
	h, err := idempotency.CommittedHash(ctx, c.js, st, c.ledger(env.Domain, env.IdempotencyKey))
	if err != nil {
		return "", codes.Wrap(codes.StoreUnavailable, err, "ledger lookup failed")
	}
	return h, nil
}

// heldError is a CLAIM_HELD failure carrying when the holder's lease ends.
type heldError struct{ until time.Time }

func (e *heldError) Error() string {
	return fmt.Sprintf("%s: idempotency key claimed by another validator until %s", codes.ClaimHeld, e.until.Format(time.RFC3339))
}

// Unwrap makes the error classify as CLAIM_HELD.
func (e *heldError) Unwrap() error {
	return codes.Errorf(codes.ClaimHeld, "idempotency key claimed by another validator")
}
