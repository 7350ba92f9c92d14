// Package single is the redriver's part for single redrives and
// corrections, and for a person's decisions on one chain: a release of a
// poison event and a dismissal. Each is asked for by a person (an Asker:
// it may then need a second person's approval, an Approver) or is the
// execution of a signed approval. A held event is never corrected,
// replayed, released or dismissed. The replay itself is the replay part's
// (replay.Replayer), and so is the subject it takes: a correction is
// replayed on the event type its payload names (replay.Replayer.Target).
// A redrive's dry run (api.RedriveRequest.DryRun) answers, writing
// nothing, that subject, the gate's verdict there and whether a second
// person would be needed (a Decider).
//
// Redrives checks no caller: the redriver's handlers do, and pass the
// identity they serve the request as (its Actor the caller).
package single

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/services/redriver/approved"
	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Approver decides whether an action needs a second person: nil when not,
// else the APPROVAL_REQUIRED error carrying the pending approval
// (approvals.Desk.Require).
type Approver interface {
	Require(ctx context.Context, who access.Identity, action approval.Action, req approval.Request) error
}

// Decider decides, creating nothing, whether an action would need a
// second person under the policy in force: the dry run's answer. It is
// the same rule Approver applies (approval.Needs).
type Decider interface {
	Decide(ctx context.Context, action approval.Action) (approval.Decision, error)
}

// Asker is the person asking for an action that may need approval, with
// the request as received (kept byte for byte to execute once approved).
// A nil *Asker is the execution of a signed approval.
type Asker struct {
	Who  access.Identity
	Body []byte
}

// Redrives serves single redrives (with or without a correction),
// releases and dismissals. Its fields are set before the first request.
type Redrives struct {
	// Chains reads the chains and asks for their appends.
	Chains chainio.Chains
	// Replayer replays the event.
	Replayer *replay.Replayer
	// Holds returns the active legal holds.
	Holds replay.HoldsFunc
	// Approver decides on second persons; Decider answers a dry run's
	// question whether one would be needed.
	Approver Approver
	Decider  Decider
	// Decisions checks a release's or dismissal's decision signed by its
	// person against the people registry (issue #38).
	Decisions approval.Checker
	// Now is the clock a signed decision's time is checked against (nil:
	// time.Now).
	Now func() time.Time
	// Tracer starts the lifecycle spans; Log logs ids and codes only.
	Tracer telemetry.Tracer
	Log    *slog.Logger
	// RedriveWait bounds a redrive's wait for its outcome; OutcomeTimeout
	// the observation that goes on in the background (Spawn) after it.
	RedriveWait, OutcomeTimeout time.Duration
	// Outcomes counts the outcomes (deadletter_redrive_outcomes_total).
	Outcomes *prometheus.CounterVec
	// Spawn runs fn in the background under the service's run context,
	// waited for at shutdown.
	Spawn func(fn func(ctx context.Context))
}

// readFor reads the chain of a request's dlq id; its errors are
// *api.Error.
func (r *Redrives) readFor(ctx context.Context, id string) (chain.Chain, error) {
	dom, err := chainio.DomainOf(id)
	if err != nil {
		return chain.Chain{}, api.BadField("dlq_id", "must be \"<domain>_<id>\" of letters, digits, '_' and '-'")
	}
	ch, err := r.Chains.Read(ctx, dom, id)
	switch {
	case errors.Is(err, chain.ErrNotFound):
		return chain.Chain{}, api.Wrap(api.ErrNotFound, err, "no quarantine record has this dlq id")
	case errors.Is(err, chain.ErrUnreadable):
		return chain.Chain{}, api.Wrap(api.ErrNotRedrivable, err, err.Error())
	case err != nil:
		return chain.Chain{}, api.Wrap(api.ErrUnavailable, err, err.Error())
	case ch.FoldErr != nil:
		return chain.Chain{}, api.Wrap(api.ErrNotRedrivable, ch.FoldErr, "the chain is not in a valid state: "+ch.FoldErr.Error())
	}
	return ch, nil
}

// Redrive serves a redrive whose Actor is the authenticated caller: asked
// for by ask (a correction may then need approval), or, with ask nil, the
// execution of signed approval ap (its correction at the index after the
// approved record).
func (r *Redrives) Redrive(ctx context.Context, req api.RedriveRequest, ask *Asker, ap *api.Approval) (api.RedriveReply, error) {
	ch, err := r.readFor(ctx, req.DLQID)
	if err != nil {
		return api.RedriveReply{}, err
	}
	if err := approved.CheckSigned(ch, ap); err != nil {
		return api.RedriveReply{}, err
	}
	// A held event is neither corrected nor replayed (HELD); its replay
	// checks again against the holds read here.
	holds, err := r.Holds(ctx)
	if err != nil {
		return api.RedriveReply{}, api.Wrap(api.ErrUnavailable, err, "the legal holds could not be read")
	}
	if err := hold.Refuse(ch.State, holds); err != nil {
		return api.RedriveReply{}, err
	}
	if req.DryRun && ap == nil {
		return r.dryRun(ctx, ch, req)
	}
	rep := api.RedriveReply{DLQID: req.DLQID}
	exp := len(ch.Records)
	if ap != nil {
		exp = ap.ChainRecords + 1
	}
	if len(req.Payload) > 0 && approved.StepAt(ch, exp, record.KindCorrected, ap) {
		// A repeated execution: the correction is stored; replay it.
		rep.Corrected = &exp
	} else if len(req.Payload) > 0 {
		switch ch.State.Status {
		case record.StatusPoison:
			return api.RedriveReply{}, api.Errorf(api.ErrPoisoned, "the event is poison: release it first")
		case record.StatusRedriving:
			return api.RedriveReply{}, api.Errorf(api.ErrConflict, "a replay of this event is in flight")
		case record.StatusResolved:
			return api.RedriveReply{}, api.Errorf(api.ErrNotRedrivable, "the event is resolved")
		}
		if ask != nil {
			if err := r.Approver.Require(ctx, ask.Who, r.correction(ch, req.Payload), approval.Request{
				DLQID: req.DLQID, Domain: ch.Domain, ChainRecords: len(ch.Records), ChainHead: head(ch), Body: ask.Body, Payload: req.Payload, Reason: req.Reason,
			}); err != nil {
				return api.RedriveReply{}, err
			}
		}
		// The corrected record names a trace linked to the original's.
		cctx, span := r.Tracer.StartLifecycle(ctx, "correct", chainio.Origin(ch))
		ar, err := r.Chains.Append(cctx, api.AppendRequest{
			DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindCorrected, ExpectedIndex: &exp,
			Payload: req.Payload, Actor: req.Actor, Reason: req.Reason,
		})
		if err != nil {
			telemetry.Error(span, chainio.CodeOf(err))
		}
		span.End()
		if err != nil {
			return api.RedriveReply{}, api.Wrap(chainio.CodeOf(err), err, err.Error())
		}
		rep.Corrected = &ar.Index
		r.Log.Info("correction appended", "dlq_id", req.DLQID, "domain", ch.Domain, "index", ar.Index, "actor", req.Actor)
	}
	o := replay.Opts{IncludeValidation: req.IncludeValidation, Actor: req.Actor, Reason: req.Reason, Wait: r.RedriveWait,
		Holds: func(context.Context) ([]api.Hold, error) { return holds, nil }}
	res := r.Replayer.Replay(ctx, ch.Domain, req.DLQID, o)
	if res.Outcome == "" || (res.Outcome == api.OutcomeNotRedrivable && res.Err != nil) {
		code := res.Code
		if code == "" {
			code = api.ErrUnavailable
		}
		return api.RedriveReply{}, api.Wrap(code, res.Err, res.Err.Error())
	}
	rep.Outcome, rep.EventsSeq, rep.RedriveCount = res.Outcome, res.EventsSeq, res.State.RedriveCount
	rep.Status, rep.Class = string(statusAfter(res)), string(res.State.Class)
	switch res.Outcome {
	case api.OutcomeReplayFailed, api.OutcomePoisoned:
		rep.RedriveCount = res.RedriveCount
		if res.Outcome == api.OutcomePoisoned {
			rep.Class = string(record.ClassPoison)
		}
	case api.OutcomePending:
		// Keep observing for the full outcome timeout (resuming the same
		// replay; a re-publish is de-duplicated by its Nats-Msg-Id).
		r.Spawn(func(ctx context.Context) {
			bctx, cancel := context.WithTimeout(ctx, r.OutcomeTimeout+30*time.Second)
			defer cancel()
			res := r.Replayer.Replay(bctx, ch.Domain, req.DLQID, replay.Opts{IncludeValidation: req.IncludeValidation, Actor: req.Actor, Reason: req.Reason})
			r.Outcomes.WithLabelValues(orError(res.Outcome)).Inc()
		})
	}
	r.Outcomes.WithLabelValues(orError(res.Outcome)).Inc()
	return rep, nil
}

// dryRun answers a redrive's dry run on chain ch (read and checked
// against the legal holds just before): the subject the replay would be
// checked on, the gate's verdict there and, for a correction, the
// identity fields it changes and whether the policy asks for a second
// person. It writes nothing and refuses what the redrive would refuse: a
// poison, resolved or redriving event, or a validation-class one replayed
// without a correction or include_validation.
func (r *Redrives) dryRun(ctx context.Context, ch chain.Chain, req api.RedriveRequest) (api.RedriveReply, error) {
	st := ch.State
	switch st.Status {
	case record.StatusPoison:
		return api.RedriveReply{}, api.Errorf(api.ErrPoisoned, "the event is poison: release it first")
	case record.StatusRedriving:
		return api.RedriveReply{}, api.Errorf(api.ErrConflict, "a replay of this event is in flight")
	case record.StatusResolved:
		return api.RedriveReply{}, api.Errorf(api.ErrNotRedrivable, "the event is resolved")
	}
	payload, corrected := []byte(req.Payload), len(req.Payload) > 0
	if !corrected {
		if !st.Redrivable(req.IncludeValidation) {
			return api.RedriveReply{}, api.Errorf(api.ErrNotRedrivable, "a %s event is replayed only with a correction or include_validation", st.Class)
		}
		b, err := st.Payload.Bytes()
		if err != nil {
			return api.RedriveReply{}, api.Wrap(api.ErrNotRedrivable, err, "the event's payload cannot be read from its chain")
		}
		payload, corrected = b, st.Corrected
	}
	chk, err := r.Replayer.Check(st, payload, corrected)
	if err != nil {
		return api.RedriveReply{}, api.Wrap(api.ErrNotRedrivable, err, "the event's original subject names no domain and event type to replay on")
	}
	if len(req.Payload) > 0 {
		dec, err := r.Decider.Decide(ctx, r.correction(ch, req.Payload))
		if err != nil {
			return api.RedriveReply{}, err
		}
		chk.ApprovalRequired, chk.ApprovalReasons, chk.IdentityChanges = dec.Needed, dec.Reasons, dec.DiffFields()
	}
	r.Log.Info("redrive dry run", "dlq_id", req.DLQID, "domain", ch.Domain, "corrected", len(req.Payload) > 0, "ok", chk.OK, "code", chk.Code,
		"subject_changed", chk.EventType != chk.OriginalEventType, "approval_required", chk.ApprovalRequired, "actor", req.Actor)
	return api.RedriveReply{DLQID: req.DLQID, Status: string(st.Status), Class: string(st.Class), RedriveCount: st.RedriveCount, Check: &chk}, nil
}

func orError(outcome string) string {
	if outcome == "" {
		return "error"
	}
	return outcome
}

// outcomeKind is the kind of the record an outcome leaves last in its
// chain (a resolution elsewhere stands for any resolving kind).
var outcomeKind = map[string]record.Kind{
	api.OutcomeReplayed:          record.KindReplayed,
	api.OutcomeSkippedDuplicate:  record.KindSkippedDuplicate,
	api.OutcomeResolvedElsewhere: record.KindResolved,
	api.OutcomeReplayFailed:      record.KindReplayFailed,
	api.OutcomePoisoned:          record.KindPoisoned,
	api.OutcomePending:           record.KindRedriveRequested,
}

// statusAfter is the chain status an outcome leaves, as the lifecycle
// defines it for the outcome's record.
func statusAfter(res replay.Result) record.Status {
	if k, ok := outcomeKind[res.Outcome]; ok {
		return record.StatusAfter(res.State.Status, k)
	}
	return res.State.Status
}

// Release serves a release whose Actor is the authenticated caller: asked
// for by ask (it may then need approval), or, with ask nil, the execution
// of signed approval ap (the released record after the approved one).
func (r *Redrives) Release(ctx context.Context, req api.ReleaseRequest, ask *Asker, ap *api.Approval) (api.AppendReply, error) {
	ch, exp, done, err := r.decisionChain(ctx, req.DLQID, record.KindReleased, ap)
	if err != nil || done != nil {
		return deref(done), err
	}
	if ch.State.Status != record.StatusPoison {
		return api.AppendReply{}, api.Errorf(api.ErrInvalidTransition, "only a poison event can be released; this one is %s", ch.State.Status)
	}
	if err := r.signedBy(ctx, api.DecisionRelease, req.DLQID, req, req.Signed, ch, ask, ap, req.Actor); err != nil {
		return api.AppendReply{}, err
	}
	if ask != nil {
		if err := r.Approver.Require(ctx, ask.Who, approval.Action{Kind: api.ActionRelease, Domain: ch.Domain}, approval.Request{
			DLQID: req.DLQID, Domain: ch.Domain, ChainRecords: len(ch.Records), ChainHead: head(ch), Body: ask.Body, Reason: req.Reason,
		}); err != nil {
			return api.AppendReply{}, err
		}
	}
	class := record.Class(req.Class)
	if class == "" {
		class = prePoisonClass(ch.Records)
	}
	// The released record names a trace linked to the original's.
	rctx, span := r.Tracer.StartLifecycle(ctx, "release", chainio.Origin(ch))
	rep, err := r.Chains.Append(rctx, api.AppendRequest{
		DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindReleased, ExpectedIndex: &exp,
		Class: class, Actor: req.Actor, Reason: req.Reason, Signed: req.Signed,
	})
	if err != nil {
		telemetry.Error(span, chainio.CodeOf(err))
	}
	span.End()
	if err != nil {
		return api.AppendReply{}, api.Wrap(chainio.CodeOf(err), err, err.Error())
	}
	r.Log.Info("release appended", "dlq_id", req.DLQID, "domain", ch.Domain, "class", string(class), "actor", req.Actor, "index", rep.Index)
	return rep, nil
}

// correction is the approval.Action of correcting ch's effective payload
// to corrected.
func (r *Redrives) correction(ch chain.Chain, corrected []byte) approval.Action {
	a := approval.Action{Kind: api.ActionCorrect, Domain: ch.Domain, Corrected: corrected}
	if ch.State.Payload != nil {
		a.Original, _ = ch.State.Payload.Bytes()
	}
	if _, t, ok := subjects.ParseEvent(ch.State.SourceSubject); ok {
		a.SubjectEventType = t
	}
	return a
}

// prePoisonClass returns the class of the last record that was not poison.
func prePoisonClass(records []record.Record) record.Class {
	for _, r := range slices.Backward(records) {
		if r.Class == record.ClassValidation || r.Class == record.ClassExhausted {
			return r.Class
		}
	}
	return record.ClassExhausted
}

// Dismiss serves a dismissal whose Actor is the authenticated caller:
// asked for by ask (it may then need approval), or, with ask nil, the
// execution of signed approval ap (the dismissed record after the
// approved one). Only an open or poison chain may be dismissed (one being
// replayed waits for its outcome), and never one under a legal hold.
func (r *Redrives) Dismiss(ctx context.Context, req api.DismissRequest, ask *Asker, ap *api.Approval) (api.AppendReply, error) {
	ch, exp, done, err := r.decisionChain(ctx, req.DLQID, record.KindDismissed, ap)
	if err != nil || done != nil {
		return deref(done), err
	}
	if st := ch.State.Status; st != record.StatusOpen && st != record.StatusPoison {
		return api.AppendReply{}, api.Errorf(api.ErrInvalidTransition, "only an open or poison event can be dismissed; this one is %s", st)
	}
	if err := r.signedBy(ctx, api.DecisionDismiss, req.DLQID, req, req.Signed, ch, ask, ap, req.Actor); err != nil {
		return api.AppendReply{}, err
	}
	if ask != nil {
		if err := r.Approver.Require(ctx, ask.Who, approval.Action{Kind: api.ActionDismiss, Domain: ch.Domain}, approval.Request{
			DLQID: req.DLQID, Domain: ch.Domain, ChainRecords: len(ch.Records), ChainHead: head(ch), Body: ask.Body, Reason: req.Reason,
		}); err != nil {
			return api.AppendReply{}, err
		}
	}
	rctx, span := r.Tracer.StartLifecycle(ctx, "dismiss", chainio.Origin(ch))
	rep, err := r.Chains.Append(rctx, api.AppendRequest{
		DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindDismissed, ExpectedIndex: &exp,
		Actor: req.Actor, Reason: req.Reason, Signed: req.Signed,
	})
	if err != nil {
		telemetry.Error(span, chainio.CodeOf(err))
	}
	span.End()
	if err != nil {
		return api.AppendReply{}, api.Wrap(chainio.CodeOf(err), err, err.Error())
	}
	r.Log.Info("dismissal appended", "dlq_id", req.DLQID, "domain", ch.Domain, "actor", req.Actor, "index", rep.Index)
	return rep, nil
}

// decisionChain reads the chain a person's decision (a release or a
// dismissal of kind) appends to, after the signed approval ap when it
// executes one: the index the new record must take, or, when ap's record
// is already there (an execution repeated), the reply it got; a chain
// under a legal hold is refused.
func (r *Redrives) decisionChain(ctx context.Context, dlqID string, kind record.Kind, ap *api.Approval) (chain.Chain, int, *api.AppendReply, error) {
	ch, err := r.readFor(ctx, dlqID)
	if err != nil {
		return chain.Chain{}, 0, nil, err
	}
	if err := approved.CheckSigned(ch, ap); err != nil {
		return chain.Chain{}, 0, nil, err
	}
	exp := len(ch.Records)
	if ap != nil {
		exp = ap.ChainRecords + 1
		if approved.StepAt(ch, exp, kind, ap) {
			r := ch.Records[exp]
			return ch, exp, &api.AppendReply{DLQID: r.DLQID, Index: r.Index, AuditHash: r.AuditHash, Status: ch.State.Status, Class: ch.State.Class}, nil
		}
	}
	if err := r.refuseHeld(ctx, ch); err != nil {
		return chain.Chain{}, 0, nil, err
	}
	return ch, exp, nil, nil
}

// head is the AuditHash of ch's last record: the chain a person reviewed
// (api.Decision.Chain).
func head(ch chain.Chain) string {
	if len(ch.Records) == 0 {
		return ""
	}
	return ch.Records[len(ch.Records)-1].AuditHash
}

// signedBy checks actor's signed decision sd (action, of the direct
// request req on dlqID; issue #38): asked for by ask, the decision of ch
// as it stands, signed now (approval.CheckSigned); executing signed
// approval ap, the decision its requester signed when asking, of the
// chain the approval names (approval.CheckRecorded). A refusal is
// DECISION_UNSIGNED, logged with ids and the code only.
func (r *Redrives) signedBy(ctx context.Context, action, dlqID string, req any, sd *api.SignedDecision, ch chain.Chain, ask *Asker, ap *api.Approval, actor string) error {
	chainHead, role := head(ch), ""
	switch {
	case ap != nil:
		chainHead, role = ap.ChainHead, ap.RequesterRole
	case ask != nil:
		role = string(ask.Who.Role)
	}
	want := approval.ForRecord(action, dlqID, approval.DirectDigest(req), chainHead, "", access.PersonOf(actor), role, time.Time{})
	var err error
	if ap != nil {
		err = approval.CheckRecorded(ctx, r.Decisions, want, sd)
	} else {
		now := time.Now
		if r.Now != nil {
			now = r.Now
		}
		err = approval.CheckSigned(ctx, r.Decisions, want, sd, now())
	}
	if err != nil {
		r.Log.Warn("DECISION_UNSIGNED", "action", action, "dlq_id", dlqID, "actor", actor, "code", approval.Code(err))
		return approval.APIError(err)
	}
	return nil
}

// deref is the reply r points to, or the zero reply.
func deref(r *api.AppendReply) api.AppendReply {
	if r == nil {
		return api.AppendReply{}
	}
	return *r
}

// refuseHeld returns the coded HELD error when a legal hold holds ch (read
// just before), after reading the active holds; UNAVAILABLE when they
// cannot be read (nothing is done without knowing).
func (r *Redrives) refuseHeld(ctx context.Context, ch chain.Chain) error {
	holds, err := r.Holds(ctx)
	if err != nil {
		return api.Wrap(api.ErrUnavailable, err, fmt.Sprintf("the legal holds could not be read: %v", err))
	}
	return hold.Refuse(ch.State, holds)
}
