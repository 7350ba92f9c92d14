package validator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Commit states stored in the IDEMPOTENCY bucket.
const (
	// StateClaimed: a validator is committing the event; the claim expires
	// at LeaseUntil.
	StateClaimed = "claimed"
	// StateReleased: the last claimer gave up after a transient failure;
	// anyone may claim again.
	StateReleased = "released"
	// StateCommitted: the event is in LEDGER (and downstream, when set).
	StateCommitted = "committed"
)

// KeyState is the value of an IDEMPOTENCY entry.
type KeyState struct {
	State       string    `json:"state"`
	Owner       string    `json:"owner,omitempty"`
	LeaseUntil  time.Time `json:"lease_until,omitzero"`
	Domain      string    `json:"domain"`
	EventType   string    `json:"event_type,omitempty"`
	SourceSeq   uint64    `json:"source_seq,omitempty"`
	LedgerSeq   uint64    `json:"ledger_seq,omitempty"`
	CommittedAt time.Time `json:"committed_at,omitzero"`
	DLQID       string    `json:"dlq_id,omitempty"`
}

// ErrAlreadyCommitted reports that the key was committed before: the event
// is a duplicate and must be acknowledged, never committed again.
var ErrAlreadyCommitted = errors.New("validator: idempotency key already committed")

// committer implements the exactly-once commit:
//
//  1. claim the key with create-if-absent (or take over a released or
//     expired claim with a revision CAS);
//  2. POST downstream with Idempotency-Key (when configured);
//  3. write LEDGER on the key's own subject, conditional on the subject being
//     empty, with Nats-Msg-Id = key: a second write of the key is refused
//     by the server whatever the de-duplication window;
//  4. mark the key committed with a revision CAS on the claim.
//
// A validator dying between 1 and 4 leaves a claim that expires after the
// lease; the next claimer repeats 2 (the downstream de-duplicates on the
// key) and 3 (refused as already written: the existing LEDGER message is
// adopted), then 4. So an event is never lost and never committed twice.
type committer struct {
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	owner  string
	lease  time.Duration
	down   *downstream // nil: LEDGER only
	now    func() time.Time
	hooks  *testHooks
	ledger func(domain, key string) string
}

// testHooks lets tests stop a validator at precise points.
type testHooks struct {
	afterClaim  func(key string)
	afterLedger func(key string)
}

type claim struct {
	rev   uint64
	state KeyState
}

// commit runs the protocol for one event; ledgerSeq is the LEDGER sequence.
func (c *committer) commit(ctx context.Context, env envelope.Envelope, data []byte, sourceSeq uint64, dlqID string) (ledgerSeq uint64, err error) {
	cl, err := c.claim(ctx, env, sourceSeq, dlqID)
	if err != nil {
		return 0, err
	}
	if c.hooks != nil && c.hooks.afterClaim != nil {
		c.hooks.afterClaim(env.IdempotencyKey)
	}
	if c.down != nil {
		if err := c.down.post(ctx, env, data); err != nil {
			if codes.Of(err).Transient() {
				c.release(ctx, env.IdempotencyKey, cl)
			}
			return 0, err
		}
	}
	ledgerSeq, err = c.writeLedger(ctx, env, data, sourceSeq, dlqID)
	if err != nil {
		c.release(ctx, env.IdempotencyKey, cl)
		return 0, err
	}
	if c.hooks != nil && c.hooks.afterLedger != nil {
		c.hooks.afterLedger(env.IdempotencyKey)
	}
	done := cl.state
	done.State, done.Owner, done.LeaseUntil = StateCommitted, "", time.Time{}
	done.LedgerSeq, done.CommittedAt = ledgerSeq, c.now().UTC()
	b, _ := json.Marshal(done)
	if _, err := c.kv.Update(ctx, env.IdempotencyKey, b, cl.rev); err != nil {
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			// LEDGER holds the event; the next delivery adopts it.
			return 0, codes.Wrap(codes.StoreUnavailable, err, "mark committed failed")
		}
		// Our lease expired and another validator took the claim over: it
		// will find the LEDGER subject written and mark it committed.
	}
	return ledgerSeq, nil
}

// claim acquires the key. It returns ErrAlreadyCommitted for a committed
// key and a CLAIM_HELD error while another validator's claim is live.
func (c *committer) claim(ctx context.Context, env envelope.Envelope, sourceSeq uint64, dlqID string) (claim, error) {
	st := KeyState{
		State: StateClaimed, Owner: c.owner, LeaseUntil: c.now().Add(c.lease).UTC(),
		Domain: env.Domain, EventType: env.EventType, SourceSeq: sourceSeq, DLQID: dlqID,
	}
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
	var cur KeyState
	if err := json.Unmarshal(e.Value(), &cur); err != nil {
		return claim{}, codes.Wrap(codes.StoreUnavailable, err, "claim state unreadable")
	}
	switch {
	case cur.State == StateCommitted:
		return claim{state: cur}, ErrAlreadyCommitted
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

// writeLedger appends the event to its key's LEDGER subject, or adopts the
// existing message when an earlier claimer wrote it before dying.
func (c *committer) writeLedger(ctx context.Context, env envelope.Envelope, data []byte, sourceSeq uint64, dlqID string) (uint64, error) {
	subj := c.ledger(env.Domain, env.IdempotencyKey)
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(envelope.IdempotencyKey, env.IdempotencyKey)
	m.Header.Set(envelope.EventType, env.EventType)
	m.Header.Set(envelope.SourceStream, subjects.EventsStream)
	m.Header.Set(envelope.SourceSeq, strconv.FormatUint(sourceSeq, 10))
	if dlqID != "" {
		m.Header.Set(envelope.DLQID, dlqID)
	}
	ack, err := c.js.PublishMsg(ctx, m, jetstream.WithMsgID(env.IdempotencyKey), jetstream.WithExpectLastSequencePerSubject(0))
	if err == nil {
		return ack.Sequence, nil
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		s, err := c.js.Stream(ctx, subjects.LedgerStream)
		if err != nil {
			return 0, codes.Wrap(codes.StoreUnavailable, err, "ledger lookup failed")
		}
		raw, err := s.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return 0, codes.Wrap(codes.StoreUnavailable, err, "ledger lookup failed")
		}
		return raw.Sequence, nil
	}
	return 0, codes.Wrap(codes.StoreUnavailable, err, "ledger write failed")
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
