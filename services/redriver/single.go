package redriver

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/deadletter/deadletter/services/redriver/approved"
	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// readFor reads the chain of a request's dlq id; its errors are
// *api.Error.
func (s *Service) readFor(ctx context.Context, id string) (chain.Chain, error) {
	dom, err := domainOfID(id)
	if err != nil {
		return chain.Chain{}, api.BadField("dlq_id", "must be \"<domain>_<id>\" of letters, digits, '_' and '-'")
	}
	ch, err := s.chains.read(ctx, dom, id)
	switch {
	case errors.Is(err, ErrNoChain):
		return chain.Chain{}, api.Wrap(api.ErrNotFound, err, "no quarantine record has this dlq id")
	case errors.Is(err, ErrUnreadableChain):
		return chain.Chain{}, api.Wrap(api.ErrNotRedrivable, err, err.Error())
	case err != nil:
		return chain.Chain{}, api.Wrap(api.ErrUnavailable, err, err.Error())
	case ch.FoldErr != nil:
		return chain.Chain{}, api.Wrap(api.ErrNotRedrivable, ch.FoldErr, "the chain is not in a valid state: "+ch.FoldErr.Error())
	}
	return ch, nil
}

// handleRedrive replays one event, after storing its correction if one is
// given. It answers with the outcome observed within RedriveWait, or
// pending; observation then continues in the background.
func (s *Service) handleRedrive(ctx context.Context, m endpoint.Meta, req api.RedriveRequest) (api.RedriveReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.RedriveReply{}, err
	}
	if len(req.Payload) > s.gate.MaxPayload() {
		return api.RedriveReply{}, api.BadField("payload", "exceeds %d bytes", s.gate.MaxPayload())
	}
	// The records name the caller, never the request's free-text actor.
	req.Actor = id.User
	return s.redrive(ctx, req, askerOf(id, m), nil)
}

// redrive serves a redrive whose Actor is the authenticated caller: asked
// for by ask (a correction may then need approval), or, with ask nil, the
// execution of signed approval ap (its correction at the index after the
// approved record).
func (s *Service) redrive(ctx context.Context, req api.RedriveRequest, ask *asker, ap *api.Approval) (api.RedriveReply, error) {
	ch, err := s.readFor(ctx, req.DLQID)
	if err != nil {
		return api.RedriveReply{}, err
	}
	if err := approved.CheckSigned(ch, ap); err != nil {
		return api.RedriveReply{}, err
	}
	// A held event is neither corrected nor replayed (HELD); its replay
	// checks again against the holds read here.
	holds, err := s.holdStore.Active(ctx)
	if err != nil {
		return api.RedriveReply{}, api.Wrap(api.ErrUnavailable, err, "the legal holds could not be read")
	}
	if err := hold.Refuse(ch.State, holds); err != nil {
		return api.RedriveReply{}, err
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
			if err := s.requireApproval(ctx, ask.who, s.correction(ch, req.Payload), approval.Request{
				DLQID: req.DLQID, Domain: ch.Domain, ChainRecords: len(ch.Records), Body: ask.body, Payload: req.Payload, Reason: req.Reason,
			}); err != nil {
				return api.RedriveReply{}, err
			}
		}
		// The corrected record names a trace linked to the original's.
		cctx, span := s.tr.StartLifecycle(ctx, "correct", origin(ch))
		ar, err := s.chains.append(cctx, api.AppendRequest{
			DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindCorrected, ExpectedIndex: &exp,
			Payload: req.Payload, Actor: req.Actor, Reason: req.Reason,
		})
		if err != nil {
			telemetry.Error(span, codeOf(err))
		}
		span.End()
		if err != nil {
			return api.RedriveReply{}, api.Wrap(codeOf(err), err, err.Error())
		}
		rep.Corrected = &ar.Index
		s.log.Info("correction appended", "dlq_id", req.DLQID, "domain", ch.Domain, "index", ar.Index, "actor", req.Actor)
	}
	o := replayOpts{includeValidation: req.IncludeValidation, actor: req.Actor, reason: req.Reason, wait: s.cfg.RedriveWait,
		holds: func(context.Context) ([]api.Hold, error) { return holds, nil }}
	res := s.replay(ctx, ch.Domain, req.DLQID, o)
	if res.outcome == "" || (res.outcome == api.OutcomeNotRedrivable && res.err != nil) {
		code := res.code
		if code == "" {
			code = api.ErrUnavailable
		}
		return api.RedriveReply{}, api.Wrap(code, res.err, res.err.Error())
	}
	rep.Outcome, rep.EventsSeq, rep.RedriveCount = res.outcome, res.eventsSeq, res.state.RedriveCount
	rep.Status, rep.Class = string(statusAfter(res)), string(res.state.Class)
	switch res.outcome {
	case api.OutcomeReplayFailed, api.OutcomePoisoned:
		rep.RedriveCount = res.redriveCount
		if res.outcome == api.OutcomePoisoned {
			rep.Class = string(record.ClassPoison)
		}
	case api.OutcomePending:
		// Keep observing for the full outcome timeout (resuming the same
		// replay; a re-publish is de-duplicated by its Nats-Msg-Id).
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			bctx, cancel := context.WithTimeout(s.runCtx, s.cfg.OutcomeTimeout+30*time.Second)
			defer cancel()
			res := s.replay(bctx, ch.Domain, req.DLQID, replayOpts{includeValidation: req.IncludeValidation, actor: req.Actor, reason: req.Reason})
			s.metrics.outcomes.WithLabelValues(orError(res.outcome)).Inc()
		}()
	}
	s.metrics.outcomes.WithLabelValues(orError(res.outcome)).Inc()
	return rep, nil
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
func statusAfter(res result) record.Status {
	if k, ok := outcomeKind[res.outcome]; ok {
		return record.StatusAfter(res.state.Status, k)
	}
	return res.state.Status
}

// handleRelease records a person's decision to move a poison event back
// to redrivable, restoring the class it had before it was poisoned (or the
// one requested).
func (s *Service) handleRelease(ctx context.Context, m endpoint.Meta, req api.ReleaseRequest) (api.AppendReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.AppendReply{}, err
	}
	// The record names the caller, never the request's free-text actor.
	req.Actor = id.User
	return s.release(ctx, req, askerOf(id, m), nil)
}

// release serves a release whose Actor is the authenticated caller: asked
// for by ask (it may then need approval), or, with ask nil, the execution
// of signed approval ap (the released record after the approved one).
func (s *Service) release(ctx context.Context, req api.ReleaseRequest, ask *asker, ap *api.Approval) (api.AppendReply, error) {
	ch, exp, done, err := s.decisionChain(ctx, req.DLQID, record.KindReleased, ap)
	if err != nil || done != nil {
		return deref(done), err
	}
	if ch.State.Status != record.StatusPoison {
		return api.AppendReply{}, api.Errorf(api.ErrInvalidTransition, "only a poison event can be released; this one is %s", ch.State.Status)
	}
	if ask != nil {
		if err := s.requireApproval(ctx, ask.who, approval.Action{Kind: api.ActionRelease, Domain: ch.Domain}, approval.Request{
			DLQID: req.DLQID, Domain: ch.Domain, ChainRecords: len(ch.Records), Body: ask.body, Reason: req.Reason,
		}); err != nil {
			return api.AppendReply{}, err
		}
	}
	class := record.Class(req.Class)
	if class == "" {
		class = prePoisonClass(ch.Records)
	}
	// The released record names a trace linked to the original's.
	rctx, span := s.tr.StartLifecycle(ctx, "release", origin(ch))
	rep, err := s.chains.append(rctx, api.AppendRequest{
		DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindReleased, ExpectedIndex: &exp,
		Class: class, Actor: req.Actor, Reason: req.Reason,
	})
	if err != nil {
		telemetry.Error(span, codeOf(err))
	}
	span.End()
	if err != nil {
		return api.AppendReply{}, api.Wrap(codeOf(err), err, err.Error())
	}
	s.log.Info("release appended", "dlq_id", req.DLQID, "domain", ch.Domain, "class", string(class), "actor", req.Actor, "index", rep.Index)
	return rep, nil
}

// correction is the approval.Action of correcting ch's effective payload
// to corrected.
func (s *Service) correction(ch chain.Chain, corrected []byte) approval.Action {
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

// plan computes what a drain with filter f would do, writing nothing;
// unless ignoreOrder, unselected earlier events hold later ones
// (HeldByEarlier, HeldBy); canary events are picked as the drain's canary
// would (Canary).
func (s *Service) plan(ctx context.Context, req api.DrainStartRequest, dups bool) (*api.DrainPlan, error) {
	return s.planFor(ctx, req, dups, "")
}

// planFor is plan for the drain to be stored as self (not counted among
// the drains it overlaps).
func (s *Service) planFor(ctx context.Context, req api.DrainStartRequest, dups bool, self string) (*api.DrainPlan, error) {
	f, ignoreOrder := req.Filter, req.IgnoreOrder
	canary := req.WithDefaultGuard().Canary
	if req.NoGuard {
		canary = 0
	}
	guard := req.Guard()
	p := &api.DrainPlan{ByDomain: map[string]int{}, ByClass: map[string]int{}, ByCode: map[string]int{}, Guard: &guard}
	// The unfinished drains: the events their filters select among this
	// selection's are counted (overlap.go).
	ov, err := s.unfinishedDrains(ctx, self)
	if err != nil {
		return nil, err
	}
	const maxNames, maxChecks = 100000, 10000
	names := map[uint64]string{}
	// What the plan counts of each tentatively selected chain (a later
	// record may unselect it): its (domain, class, code), interned, by
	// item index; its idempotency key for the first maxChecks.
	type dcc struct{ domain, class, code string }
	var triples []dcc
	tripleIdx := map[dcc]uint32{}
	var info []uint32 // by item index: 1 + the index in triples; 0: none
	idem := map[int32]string{}
	holds, err := s.holdStore.Active(ctx)
	if err != nil {
		return nil, fmt.Errorf("redriver: read the legal holds: %w", err)
	}
	sl := &selection.Selector{JS: s.js, Seed: maphash.MakeSeed(), IgnoreOrder: ignoreOrder, Holds: holds}
	sl.OnItem = func(l chain.Head, idx int32) {
		t := dcc{l.Domain, string(l.Class), string(l.ErrorCode)}
		ti, ok := tripleIdx[t]
		if !ok {
			ti = uint32(len(triples))
			triples = append(triples, t)
			tripleIdx[t] = ti
		}
		for int(idx) >= len(info) {
			info = append(info, 0)
		}
		info[idx] = ti + 1
		if l.OrderingKey != "" && len(names) < maxNames {
			names[selection.HashKey(sl.Seed, l.Domain, l.OrderingKey)] = l.OrderingKey
		}
		if _, ok := idem[idx]; (ok || len(idem) < maxChecks) && l.IdempotencyKey != "" && dups {
			idem[idx] = l.IdempotencyKey
		}
		ov.visit(l, idx)
	}
	var keys []string // idempotency keys to check, at most maxChecks
	sl.OnFinal = func(sel *selection.Selection) {
		for idx, ti := range info {
			if ti == 0 || !sel.Live(int32(idx)) {
				continue
			}
			t := triples[ti-1]
			p.ByDomain[t.domain]++
			p.ByClass[t.class]++
			p.ByCode[t.code]++
			if k, ok := idem[int32(idx)]; ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		ov.count(sel)
	}
	sel, err := sl.Run(ctx, f, time.Time{}, f.Limit)
	if err != nil {
		return nil, err
	}
	p.Selected, p.Excluded = sel.Selected, sel.Excluded
	p.HeldByHold, p.UnderHold, p.Holds = sel.HeldByHold, sel.UnderHold, sel.HoldCounts()
	p.Overlaps = ov.overlaps()
	type kc struct {
		h uint64
		n int
	}
	var top []kc
	sel.Lanes(func(lane []selection.Item) bool {
		held, n := false, 0
		var first selection.Item // the lane's first blocker
		named := -1              // its place in p.HeldBy, once it holds an event
		for _, it := range lane {
			switch {
			case it.Blocker():
				if !held {
					first = it
				}
				held = true
			case held:
				p.HeldByEarlier++
				if named < 0 && len(p.HeldBy) < api.MaxHeldBy {
					named = len(p.HeldBy)
					p.HeldBy = append(p.HeldBy, sel.BlockerOf(first))
				}
				if named >= 0 {
					p.HeldBy[named].Holds++
				}
				n++
			default:
				n++
			}
		}
		if n > 0 && lane[0].Keyed() {
			p.Keys++
			top = append(top, kc{lane[0].KeyHash(), n})
			if len(top) > 200 {
				slices.SortFunc(top, func(a, b kc) int { return b.n - a.n })
				top = top[:20]
			}
		}
		return true
	})
	slices.SortFunc(top, func(a, b kc) int { return b.n - a.n })
	for _, t := range top[:min(20, len(top))] {
		name, ok := names[t.h]
		if !ok {
			name = fmt.Sprintf("#%016x", t.h)
		}
		p.TopKeys = append(p.TopKeys, api.KeyCount{OrderingKey: name, Events: t.n})
	}
	for _, lo := range sel.Canary(canary) {
		_, id := sel.IDOf(sel.Items[lo])
		p.Canary = append(p.Canary, api.CanaryPick{DLQID: id, Code: sel.CodeOfItem(sel.Items[lo])})
	}
	for _, k := range keys {
		st, found, err := idempotency.Lookup(ctx, s.idem, k)
		if err != nil {
			return nil, err
		}
		p.Checked++
		if found && st.Committed() {
			p.WouldSkipDuplicate++
		}
	}
	return p, nil
}

// handleDismiss records a person's decision to close a chain for good
// without committing its event: a dismissed record (record.KindDismissed),
// after a second person's approval unless the policy waives it.
func (s *Service) handleDismiss(ctx context.Context, m endpoint.Meta, req api.DismissRequest) (api.AppendReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.AppendReply{}, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return api.AppendReply{}, api.Errorf(api.ErrBadRequest, "a dismissal needs a reason")
	}
	// The record names the caller, never the request's free-text actor.
	req.Actor = id.User
	return s.dismiss(ctx, req, askerOf(id, m), nil)
}

// dismiss serves a dismissal whose Actor is the authenticated caller:
// asked for by ask (it may then need approval), or, with ask nil, the
// execution of signed approval ap (the dismissed record after the
// approved one). Only an open or poison chain may be dismissed (one being
// replayed waits for its outcome), and never one under a legal hold.
func (s *Service) dismiss(ctx context.Context, req api.DismissRequest, ask *asker, ap *api.Approval) (api.AppendReply, error) {
	ch, exp, done, err := s.decisionChain(ctx, req.DLQID, record.KindDismissed, ap)
	if err != nil || done != nil {
		return deref(done), err
	}
	if st := ch.State.Status; st != record.StatusOpen && st != record.StatusPoison {
		return api.AppendReply{}, api.Errorf(api.ErrInvalidTransition, "only an open or poison event can be dismissed; this one is %s", st)
	}
	if ask != nil {
		if err := s.requireApproval(ctx, ask.who, approval.Action{Kind: api.ActionDismiss, Domain: ch.Domain}, approval.Request{
			DLQID: req.DLQID, Domain: ch.Domain, ChainRecords: len(ch.Records), Body: ask.body, Reason: req.Reason,
		}); err != nil {
			return api.AppendReply{}, err
		}
	}
	rctx, span := s.tr.StartLifecycle(ctx, "dismiss", origin(ch))
	rep, err := s.chains.append(rctx, api.AppendRequest{
		DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindDismissed, ExpectedIndex: &exp,
		Actor: req.Actor, Reason: req.Reason,
	})
	if err != nil {
		telemetry.Error(span, codeOf(err))
	}
	span.End()
	if err != nil {
		return api.AppendReply{}, api.Wrap(codeOf(err), err, err.Error())
	}
	s.log.Info("dismissal appended", "dlq_id", req.DLQID, "domain", ch.Domain, "actor", req.Actor, "index", rep.Index)
	return rep, nil
}

// decisionChain reads the chain a person's decision (a release or a
// dismissal of kind) appends to, after the signed approval ap when it
// executes one: the index the new record must take, or, when ap's record
// is already there (an execution repeated), the reply it got; a chain
// under a legal hold is refused.
func (s *Service) decisionChain(ctx context.Context, dlqID string, kind record.Kind, ap *api.Approval) (chain.Chain, int, *api.AppendReply, error) {
	ch, err := s.readFor(ctx, dlqID)
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
	if err := s.refuseHeld(ctx, ch); err != nil {
		return chain.Chain{}, 0, nil, err
	}
	return ch, exp, nil, nil
}

// deref is the reply r points to, or the zero reply.
func deref(r *api.AppendReply) api.AppendReply {
	if r == nil {
		return api.AppendReply{}
	}
	return *r
}
