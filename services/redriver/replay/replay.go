package replay

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// MsgID returns the Nats-Msg-Id of replay n of chain dlqID:
// "<dlq_id>-<n>-<128-bit tag>", the tag the first half of an HMAC-SHA256
// keyed with the replay secret over (dlq_id, n).
//
// Replays are stored in EVENTS, each on its own subject
// (subjects.Redriven) expected empty, which makes a retry a refusal
// (publishAlone); EVENTS honours no Nats-Msg-Id, so this id de-duplicates
// nothing there. It names the replay in its headers and in a failure
// record's, and it is the id REPLAYS de-duplicated by when replays went
// through it (earlier redrivers). The tag keeps the id unpredictable all
// the same: were it "<dlq_id>-<n>" (dlq ids are shown to every viewer, and
// n is the chain's redrive count plus one), a de-duplicating stream shared
// with a second writer could have that id stored first and make the replay
// a silent duplicate, never validated. The tag cannot be computed without
// the secret. It is derived rather than drawn at random so that every
// retry of one replay (a re-publish after a lost ack, a resume of a chain
// left redriving, by this or another instance sharing the secret) carries
// the same id; a random id would have to be stored with the
// redrive_requested record, a field the quarantiner's append does not
// take. The id seen in a failure record's headers names only that replay:
// the next one's tag is unrelated.
func MsgID(secret []byte, dlqID string, n int) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("deadletter replay msg-id v1\x00"))
	mac.Write([]byte(dlqID))
	mac.Write([]byte{0})
	mac.Write([]byte(strconv.Itoa(n)))
	return dlqID + "-" + strconv.Itoa(n) + "-" + hex.EncodeToString(mac.Sum(nil)[:16])
}

// Opts are the controls of one replay.
type Opts struct {
	// DrainID is the drain on whose behalf it runs ("" for a redrive). A
	// drain replays an event at most once: an open chain this drain
	// already requested a replay of is skipped (a resumed drain).
	DrainID string
	// IncludeValidation allows uncorrected validation-class events.
	IncludeValidation bool
	// Actor and Reason are recorded with the redrive request.
	Actor, Reason string
	// Limiter, when set, gives the token each published replay needs.
	Limiter *rate.Limiter
	// LimiterCtx, when set, bounds the wait for a token (a cancelled
	// drain stops waiting; nothing is written before the token).
	LimiterCtx context.Context
	// IgnoreOrder marks the redrive_requested record: the drain waived
	// per-key order.
	IgnoreOrder bool
	// OnPublish is called once per replay published.
	OnPublish func()
	// Wait, when set, bounds the outcome observation (else OutcomeTimeout).
	Wait time.Duration
	// Holds returns the active legal holds the chain is checked against
	// before a replay starts (nil: read them, Replayer.Holds).
	Holds HoldsFunc
}

// Result is what one replay came to.
type Result struct {
	// Outcome is an api.Outcome*; "" when Err is set and nothing changed.
	Outcome string
	// Reason explains not_redrivable.
	Reason string
	// Code is the api error code of Err.
	Code string
	Err  error
	// State is the chain's state as last read (before the outcome).
	State record.State
	// Next is the index the next record of the chain gets.
	Next int
	// Published reports a replay message was published; ReplaySeq its
	// EVENTS sequence (the publish acknowledgement's, or the stored copy's
	// when a retry was refused as stored); EventsSeq the EVENTS sequence
	// the validator committed for this chain's replay, known once it did
	// (0 otherwise); RedriveCount its number.
	Published    bool
	ReplaySeq    uint64
	EventsSeq    uint64
	RedriveCount int
	// Attempted: this drain already replayed the event (not counted again).
	Attempted bool
	// FailCode is the error code of the failure record that followed a
	// replay_failed or poisoned outcome.
	FailCode string
	// HoldID and CaseID name the legal hold that holds the event (code
	// api.ErrHeld: nothing was done).
	HoldID, CaseID string
}

// failed returns a Result for an error with its api code.
func failed(code string, err error) Result { return Result{Code: code, Err: err} }

// errConflict: the chain kept changing under concurrent writers.
var errConflict = errors.New("redriver: chain kept changing")

// Replay runs one event's replay to its observed outcome: read and fold the
// chain, decide, check IDEMPOTENCY (a key already committed with the same
// content is resolved skipped_duplicate, never re-published; with other
// content the replay goes on, and the validator records the conflict), append redrive_requested
// conditional on the chain length (so only one redriver replays an event at
// a time), publish the effective payload to its events subject, and observe
// the outcome. A chain found redriving (a replay whose outcome nobody
// recorded) is resumed: committed → replayed, else re-published on the
// same subject, which EVENTS refuses when the replay is stored already
// (publishAlone): it is then observed at the stored copy's sequence.
func (r *Replayer) Replay(ctx context.Context, domain, id string, o Opts) Result {
	for range 5 {
		ch, err := r.Chains.Read(ctx, domain, id)
		switch {
		case errors.Is(err, chain.ErrNotFound):
			return failed(api.ErrNotFound, err)
		case errors.Is(err, chain.ErrUnreadable):
			return Result{Outcome: api.OutcomeNotRedrivable, Reason: "unreadable_chain", Code: api.ErrNotRedrivable, Err: err}
		case err != nil:
			return failed(api.ErrUnavailable, err)
		}
		st := ch.State
		res := Result{State: st, Next: len(ch.Records)}
		if ch.FoldErr != nil {
			res.Outcome, res.Reason, res.Code = api.OutcomeNotRedrivable, "invalid_chain", api.ErrNotRedrivable
			res.Err = fmt.Errorf("%w: %v", chain.ErrUnreadable, ch.FoldErr)
			return res
		}
		switch st.Status {
		case record.StatusResolved:
			res.Outcome = api.OutcomeResolvedElsewhere
			return res
		case record.StatusPoison:
			res.Outcome, res.Reason, res.Code = api.OutcomeNotRedrivable, "poison", api.ErrPoisoned
			res.Err = errors.New("the event is poison: release it first")
			return res
		case record.StatusRedriving:
			return r.resume(ctx, ch, o)
		case record.StatusOpen:
			// A legal hold: nothing starts (a replay in flight, above, is
			// finished: it was asked for before the hold).
			holds := o.Holds
			if holds == nil {
				holds = r.Holds
			}
			hs, err := holds(ctx)
			if err != nil {
				return failed(api.ErrUnavailable, fmt.Errorf("redriver: read the legal holds: %w", err))
			}
			if err := hold.Refuse(st, hs); err != nil {
				res.Code, res.Err = api.ErrHeld, err
				res.HoldID, res.CaseID = heldBy(st, hs)
				return res
			}
			if o.DrainID != "" && attemptedBy(ch.Records, o.DrainID) {
				res.Outcome, res.Reason, res.Attempted = api.OutcomeNotRedrivable, "attempted_by_this_drain", true
				return res
			}
			if !st.Redrivable(o.IncludeValidation) {
				res.Outcome, res.Reason, res.Code = api.OutcomeNotRedrivable, "class_"+string(st.Class), api.ErrNotRedrivable
				res.Err = fmt.Errorf("a %s event is replayed only with a correction or include_validation", st.Class)
				return res
			}
		default:
			res.Outcome, res.Reason, res.Code = api.OutcomeNotRedrivable, "status_"+string(st.Status), api.ErrNotRedrivable
			res.Err = errors.New("unknown state")
			return res
		}
		n := st.RedriveCount + 1
		p, err := r.prepare(st, id, n)
		if err != nil {
			res.Outcome, res.Reason, res.Code, res.Err = api.OutcomeNotRedrivable, "payload", api.ErrNotRedrivable, err
			return res
		}
		if p.key != "" {
			ks, found, err := idempotency.Lookup(ctx, r.Idem, p.key)
			if err != nil {
				return failed(api.ErrUnavailable, err)
			}
			same := false
			if found && ks.Committed() {
				if same, err = r.sameAsCommitted(ctx, p, ks); err != nil {
					return failed(api.ErrUnavailable, err)
				}
			}
			if same {
				out, err := r.appendOutcome(ctx, ch, res.Next, record.KindSkippedDuplicate, o.DrainID, "", 0)
				if errors.Is(err, errConflict) {
					continue
				}
				if err != nil {
					return failed(chainio.CodeOf(err), err)
				}
				res.Outcome = out
				return res
			}
		}
		if err := o.wait4token(ctx); err != nil {
			return failed(api.ErrUnavailable, err)
		}
		exp := res.Next
		// The request record names the replay's trace.
		rctx, span, m := r.startReplay(ctx, ch.Domain, id, st, p, n)
		_, err = r.Chains.Append(rctx, api.AppendRequest{
			DLQID: id, Domain: domain, Kind: record.KindRedriveRequested, ExpectedIndex: &exp,
			RedriveCount: n, DrainID: o.DrainID, Actor: o.Actor, Reason: o.Reason, IgnoreOrder: o.IgnoreOrder,
		})
		if chainio.CodeOf(err) == api.ErrConflict || chainio.CodeOf(err) == api.ErrInvalidTransition {
			span.SetAttributes(telemetry.OutcomeKey.String("conflict"))
			span.End()
			continue // another redriver got there first: decide again
		}
		if err != nil {
			telemetry.Error(span, chainio.CodeOf(err))
			span.End()
			return failed(chainio.CodeOf(err), err)
		}
		res.Next++
		res.RedriveCount = n
		r.cfg.Failpoint.Hit(failpoint.RedriverAfterClaim, id)
		return r.publishAndObserve(rctx, span, m, ch.Domain, id, p, n, res, o)
	}
	return failed(api.ErrConflict, errConflict)
}

// resume continues a replay left redriving: if it committed, the chain gets
// its outcome; else the same replay is published again, on the same
// subject: refused when it is stored already, and then observed at the
// stored copy's sequence (publishAlone), never stored twice.
func (r *Replayer) resume(ctx context.Context, ch chain.Chain, o Opts) Result {
	st := ch.State
	n := st.RedriveCount + 1
	res := Result{State: st, Next: len(ch.Records), RedriveCount: n}
	p, err := r.prepare(st, ch.DLQID, n)
	if err != nil {
		res.Outcome, res.Reason, res.Code, res.Err = api.OutcomeNotRedrivable, "payload", api.ErrNotRedrivable, err
		return res
	}
	if p.key != "" {
		ks, found, err := idempotency.Lookup(ctx, r.Idem, p.key)
		if err != nil {
			return failed(api.ErrUnavailable, err)
		}
		same := false
		if found && ks.Committed() && ks.DLQID != ch.DLQID {
			if same, err = r.sameAsCommitted(ctx, p, ks); err != nil {
				return failed(api.ErrUnavailable, err)
			}
		}
		if found && ks.Committed() && (ks.DLQID == ch.DLQID || same) {
			kind := record.KindSkippedDuplicate
			if ks.DLQID == ch.DLQID {
				kind = record.KindReplayed
			}
			out, err := r.appendOutcome(ctx, ch, res.Next, kind, o.DrainID, subjects.EventsStream, ks.SourceSeq)
			if err != nil && !errors.Is(err, errConflict) {
				return failed(chainio.CodeOf(err), err)
			}
			if errors.Is(err, errConflict) {
				out = r.reread(ctx, ch.Domain, ch.DLQID, res.Next-1)
			}
			res.Outcome = out
			if kind == record.KindReplayed {
				res.EventsSeq = ks.SourceSeq
			}
			return res
		}
	}
	if err := o.wait4token(ctx); err != nil {
		return failed(api.ErrUnavailable, err)
	}
	ctx, span, m := r.startReplay(ctx, ch.Domain, ch.DLQID, st, p, n)
	return r.publishAndObserve(ctx, span, m, ch.Domain, ch.DLQID, p, n, res, o)
}

// wait4token waits for the limiter's token, if any.
func (o Opts) wait4token(ctx context.Context) error {
	if o.Limiter == nil {
		return nil
	}
	if o.LimiterCtx != nil {
		ctx = o.LimiterCtx
	}
	return o.Limiter.Wait(ctx)
}

// prepared is a replay's message: subject, bytes and idempotency key ("" when
// the payload does not pass the gate: the replay will fail again, visibly),
// the domain of its LEDGER subject and its content hash (idempotency.ContentHash).
type prepared struct {
	subject string
	data    []byte
	key     string
	domain  string
	hash    string
}

// sameAsCommitted reports whether the committed key state ks names the
// same content as the replay p (idempotency.CommittedHash): only then is the
// replay a duplicate of the committed event. A replay (an original or a
// correction) of other content is published all the same, and the
// validator records it on the chain as IDEMPOTENCY_CONFLICT, its gate
// deciding as for any other event.
func (r *Replayer) sameAsCommitted(ctx context.Context, p prepared, ks idempotency.KeyState) (bool, error) {
	h, err := idempotency.CommittedHash(ctx, r.cfg.JS, ks, subjects.Ledger(p.domain, p.key))
	if err != nil {
		return false, err
	}
	return h == p.hash, nil
}

// prepare derives replay n of chain id, of state st: the effective payload
// (the latest correction, else the original), its subject
// (redriven.<domain>.<type>.<id>.<n>, subjects.Redriven, of the domain
// and type Target names: the original's, or the one a correction's
// payload names) and its idempotency key: the one the validator derived
// when the event failed (stored in the chain), else (a correction, or an
// original that never passed the gate) by the gate now, on the events
// subject of that domain and type.
func (r *Replayer) prepare(st record.State, id string, n int) (prepared, error) {
	if !subjects.ValidToken(id) {
		return prepared{}, fmt.Errorf("redriver: the dlq id is not a subject token")
	}
	data, err := st.Payload.Bytes()
	if err != nil {
		return prepared{}, err
	}
	dom, typ, err := r.Target(st, data, st.Corrected)
	if err != nil {
		return prepared{}, err
	}
	// Replays go to their own subject, which only the redriver may
	// publish to: only there does the validator honour the redrive
	// headers. One subject per replay: its publish expects it empty.
	subject := subjects.Redriven(dom, typ, id, n)
	p := prepared{subject: subject, data: data, domain: dom, hash: idempotency.ContentHash(dom, data)}
	if !st.Corrected && st.IdempotencyKey != "" {
		p.key = st.IdempotencyKey
		return p, nil
	}
	if env, err := r.cfg.Gate.Check(subject, data); err == nil {
		p.key = env.IdempotencyKey
	}
	return p, nil
}

// startReplay builds the message of replay n and starts its span: a new
// trace, linked to the original event's and carrying its trace id; the
// redrive_requested record, the validator's processing of the replay and
// the outcome record join it.
func (r *Replayer) startReplay(ctx context.Context, domain, id string, st record.State, p prepared, n int) (context.Context, trace.Span, *nats.Msg) {
	m := nats.NewMsg(p.subject)
	m.Data = p.data
	m.Header.Set(envelope.DLQID, id)
	m.Header.Set(envelope.RedriveCount, strconv.Itoa(n))
	if st.Publisher != "" {
		// The original's publisher: the validator checks the replay's
		// party against it as it checked the original's.
		m.Header.Set(envelope.Publisher, st.Publisher)
	}
	rd := chainio.Origin(chain.Chain{Domain: domain, DLQID: id, State: st})
	rd.Count = n
	ctx, span := r.cfg.Tracer.StartRedrive(ctx, m, rd)
	return ctx, span, m
}

// publishAndObserve publishes replay n (m, started by startReplay with its
// span, which it ends) and waits for its outcome.
func (r *Replayer) publishAndObserve(ctx context.Context, span trace.Span, m *nats.Msg, domain, id string, p prepared, n int, res Result, o Opts) Result {
	defer span.End()
	// Watch before publishing, so that a fast commit still wakes us.
	wake := make(chan *nats.Msg, 8)
	stop := r.notify.watch(wake, p.key, domain, id)
	defer stop()
	m.Header.Set(jetstream.MsgIDHeader, MsgID(r.cfg.Secret, id, n))
	// Stored at most once: a retry finds the subject written and resolves
	// to the stored copy (publishAlone).
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	ack, err := r.batcher.publish(ctx, m)
	if err == nil {
		telemetry.RecordAck(span, ack)
	} else {
		telemetry.Error(span, api.ErrUnavailable)
	}
	if err != nil {
		// The chain stays redriving: a later drain or redrive resumes it.
		res.Outcome, res.Code, res.Err = api.OutcomePending, api.ErrUnavailable, fmt.Errorf("redriver: publish replay: %w", err)
		return res
	}
	// The acknowledgement is EVENTS': the replay's one sequence.
	res.Published, res.ReplaySeq = true, ack.Sequence
	r.cfg.Failpoint.Hit(failpoint.RedriverAfterReplay, id)
	if o.OnPublish != nil {
		o.OnPublish()
	}
	r.cfg.Metrics.Published.Inc()
	r.cfg.Log.Info("DLQ_REPLAY_PUBLISHED", "dlq_id", id, "domain", domain, "redrive_count", n, "events_seq", ack.Sequence,
		"duplicate", ack.Duplicate, "drain_id", o.DrainID)
	res.Outcome, res.EventsSeq, res.FailCode, res.Err = r.observe(ctx, domain, id, p, ack.Sequence, res.Next-1, o, wake, stop)
	if res.Err != nil {
		res.Code = chainio.CodeOf(res.Err)
	}
	return res
}

// observe polls for the outcome of the replay whose redrive_requested
// record is at index idx and whose EVENTS sequence is replaySeq: committed
// in IDEMPOTENCY by a replay of this chain (the commit carries its dlq id,
// which the validator takes from a replay subject's headers) → the chain
// gets replayed, located by the EVENTS sequence of the committed copy,
// which it returns; committed by another copy of the event →
// skipped_duplicate, located by the replay's EVENTS sequence; the chain
// gains a failure → failed; neither before the timeout → pending. The
// watch is stopped (stop) before the outcome is appended: the record it
// appends wakes nobody.
//
// A key committed by another copy with other content than the replay's
// (sameAsCommitted) is no duplicate: the validator quarantines the replay
// IDEMPOTENCY_CONFLICT on the chain, and its failure is the outcome.
func (r *Replayer) observe(ctx context.Context, domain, id string, p prepared, replaySeq uint64, idx int, o Opts, wake <-chan *nats.Msg, stop func()) (outcome string, eventsSeq uint64, failCode string, err error) {
	key := p.key
	timeout := r.cfg.OutcomeTimeout
	if o.Wait > 0 {
		timeout = o.Wait
	}
	deadline := time.Now().Add(timeout)
	// The first look waits for a wake-up (the commit or a new record) or
	// PollMin; later looks back off to PollMax when nothing wakes them.
	wait := r.cfg.PollMin
	for {
		timer := time.NewTimer(wait)
		var woken *nats.Msg
		select {
		case <-ctx.Done():
			timer.Stop()
			return api.OutcomePending, 0, "", nil
		case woken = <-wake:
			timer.Stop()
		case <-timer.C:
			wait = min(2*wait, r.cfg.PollMax)
		}
		if key != "" {
			ks, found, err := committedBy(woken, wake, key)
			if !found {
				ks, found, err = idempotency.Lookup(ctx, r.Idem, key)
			}
			if err == nil && found && ks.Committed() && ks.DLQID != id {
				if same, serr := r.sameAsCommitted(ctx, p, ks); serr != nil || !same {
					found = false // a conflict (or unknown yet): the chain's record tells
				}
			}
			if err == nil && found && ks.Committed() {
				// Matched by dlq id only: another copy's commit names
				// another EVENTS sequence (ks.SourceSeq); the duplicate
				// is located by the replay's own (replaySeq).
				kind, stream, seq := record.KindSkippedDuplicate, subjects.EventsStream, replaySeq
				if ks.DLQID == id {
					kind, stream, seq = record.KindReplayed, subjects.EventsStream, ks.SourceSeq
				}
				stop()
				ch := chain.Chain{Domain: domain, DLQID: id}
				out, err := r.appendOutcome(ctx, ch, idx+1, kind, o.DrainID, stream, seq)
				if errors.Is(err, errConflict) {
					return r.reread(ctx, domain, id, idx), 0, "", nil
				}
				if err != nil || kind != record.KindReplayed {
					return out, 0, "", err
				}
				return out, ks.SourceSeq, "", nil
			}
		}
		last, err := r.Chains.Last(ctx, domain, id)
		if err == nil && key == "" && last.Index > idx && last.Kind == record.KindReplayed && last.SourceSeq == replaySeq {
			// A replay without a key of its own, a whole EPCIS
			// document's: the validator reports its outcome (its events
			// on their own chains) and the quarantiner appends it,
			// located on this replay.
			return api.OutcomeReplayed, replaySeq, "", nil
		}
		if err == nil && last.Index > idx {
			return outcomeOfKind(last.Kind), 0, string(last.ErrorCode), nil
		}
		if time.Now().After(deadline) {
			r.cfg.Log.Warn("DLQ_REPLAY_PENDING", "dlq_id", id, "domain", domain, "events_seq", replaySeq, "drain_id", o.DrainID)
			return api.OutcomePending, 0, "", nil
		}
	}
}

// committedBy looks for key's committed state in the wake-up m and the
// others already waiting in wake: an IDEMPOTENCY put carries the entry's
// value. found is false when none does (then the bucket is read).
func committedBy(m *nats.Msg, wake <-chan *nats.Msg, key string) (idempotency.KeyState, bool, error) {
	for {
		if m != nil && m.Subject == kvPrefix+key && m.Header.Get(kvOperation) == "" {
			if ks, err := idempotency.Decode(m.Data); err == nil && ks.Committed() {
				return ks, true, nil
			}
		}
		select {
		case m = <-wake:
		default:
			return idempotency.KeyState{}, false, nil
		}
	}
}

// kvOperation is the header marking a key-value delete or purge.
const kvOperation = "KV-Operation"

// reread returns the outcome another writer recorded after index idx.
func (r *Replayer) reread(ctx context.Context, domain, id string, idx int) string {
	last, err := r.Chains.Last(ctx, domain, id)
	if err != nil || last.Index <= idx {
		return api.OutcomePending
	}
	return outcomeOfKind(last.Kind)
}

// outcomeOfKind maps the kind of the record that followed a replay request
// to an outcome.
func outcomeOfKind(kind record.Kind) string {
	switch kind {
	case record.KindReplayFailed:
		return api.OutcomeReplayFailed
	case record.KindPoisoned:
		return api.OutcomePoisoned
	}
	return api.OutcomeResolvedElsewhere
}

// appendOutcome appends replayed or skipped_duplicate at index next, with
// the replay message's location when known (stream "" when not): EVENTS
// and the sequence the validator committed, or EVENTS and the replay's
// own sequence (a skipped duplicate; earlier redrivers recorded REPLAYS
// and the replay's sequence there). It returns errConflict when the chain changed.
func (r *Replayer) appendOutcome(ctx context.Context, ch chain.Chain, next int, kind record.Kind, drainID, stream string, seq uint64) (string, error) {
	req := api.AppendRequest{DLQID: ch.DLQID, Domain: ch.Domain, Kind: kind, ExpectedIndex: &next, DrainID: drainID}
	if stream != "" && seq != 0 {
		req.SourceStream, req.SourceSeq = stream, seq
	}
	_, err := r.Chains.Append(ctx, req)
	switch c := chainio.CodeOf(err); {
	case err == nil:
	case c == api.ErrConflict || c == api.ErrInvalidTransition:
		return "", errConflict
	default:
		return "", err
	}
	r.cfg.Log.Info("replay outcome appended", "dlq_id", ch.DLQID, "domain", ch.Domain, "kind", string(kind), "source_stream", req.SourceStream,
		"source_seq", req.SourceSeq, "drain_id", drainID)
	if kind == record.KindReplayed {
		return api.OutcomeReplayed, nil
	}
	return api.OutcomeSkippedDuplicate, nil
}

// attemptedBy reports whether drain already requested a replay in records.
func attemptedBy(records []record.Record, drainID string) bool {
	for _, r := range records {
		if r.Kind == record.KindRedriveRequested && r.DrainID == drainID {
			return true
		}
	}
	return false
}
