package redriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/ledger"
	"github.com/deadletter/deadletter/shared/record"
)

// readFor reads the chain of a request's dlq id, answering the error itself.
func (s *Service) readFor(ctx context.Context, r micro.Request, id string) (chain.Chain, bool) {
	dom, err := domainOfID(id)
	if err != nil {
		_ = r.Error(api.ErrBadRequest, "dlq_id must be \"<domain>_<id>\" of letters, digits, '_' and '-'", nil)
		return chain.Chain{}, false
	}
	ch, err := s.chains.read(ctx, dom, id)
	switch {
	case errors.Is(err, ErrNoChain):
		_ = r.Error(api.ErrNotFound, "no quarantine record has this dlq id", nil)
		return chain.Chain{}, false
	case errors.Is(err, ErrUnreadableChain):
		_ = r.Error(api.ErrNotRedrivable, err.Error(), nil)
		return chain.Chain{}, false
	case err != nil:
		_ = r.Error(api.ErrUnavailable, err.Error(), nil)
		return chain.Chain{}, false
	case ch.FoldErr != nil:
		_ = r.Error(api.ErrNotRedrivable, "the chain is not in a valid state: "+ch.FoldErr.Error(), nil)
		return chain.Chain{}, false
	}
	return ch, true
}

// handleRedrive replays one event, after storing its correction if one is
// given. It answers with the outcome observed within RedriveWait, or
// pending; observation then continues in the background.
func (s *Service) handleRedrive(r micro.Request) {
	var req api.RedriveRequest
	if err := decodeStrict(r.Data(), &req); err != nil {
		badRequest(r, err)
		return
	}
	id, ok := s.caller(r, req.Actor, changeRoles)
	if !ok {
		return
	}
	switch {
	case req.DLQID == "":
		_ = r.Error(api.ErrBadRequest, "dlq_id is required", nil)
		return
	case len(req.Payload) > 0 && req.Reason == "":
		_ = r.Error(api.ErrBadRequest, "a corrected payload needs a reason", nil)
		return
	case len(req.Payload) > s.gate.MaxPayload():
		_ = r.Error(api.ErrBadRequest, fmt.Sprintf("payload exceeds %d bytes", s.gate.MaxPayload()), nil)
		return
	case len(req.Actor) > 256 || len(req.Reason) > 2048:
		_ = r.Error(api.ErrBadRequest, "actor or reason too long", nil)
		return
	}
	// The records name the caller, never the request's free-text actor.
	req.Actor = id.User
	d := endpoint.Detach(s.nc, r) // answered after this handler returns
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.redrive(d, req)
	}()
}

// redrive serves a redrive whose Actor is the authenticated caller.
func (s *Service) redrive(r micro.Request, req api.RedriveRequest) {
	ctx, cancel := context.WithTimeout(s.runCtx, s.cfg.RedriveWait+30*time.Second)
	defer cancel()
	ch, ok := s.readFor(ctx, r, req.DLQID)
	if !ok {
		return
	}
	rep := api.RedriveReply{DLQID: req.DLQID}
	if len(req.Payload) > 0 {
		switch ch.State.Status {
		case record.StatusPoison:
			_ = r.Error(api.ErrPoisoned, "the event is poison: release it first", nil)
			return
		case record.StatusRedriving:
			_ = r.Error(api.ErrConflict, "a replay of this event is in flight", nil)
			return
		case record.StatusResolved:
			_ = r.Error(api.ErrNotRedrivable, "the event is resolved", nil)
			return
		}
		exp := len(ch.Records)
		ar, err := s.chains.append(ctx, api.AppendRequest{
			DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindCorrected, ExpectedIndex: &exp,
			Payload: req.Payload, Actor: req.Actor, Reason: req.Reason,
		})
		if err != nil {
			_ = r.Error(codeOf(err), err.Error(), nil)
			return
		}
		rep.Corrected = &ar.Index
		s.log.Info("correction appended", "dlq_id", req.DLQID, "domain", ch.Domain, "index", ar.Index, "actor", req.Actor)
	}
	o := replayOpts{includeValidation: req.IncludeValidation, actor: req.Actor, reason: req.Reason, wait: s.cfg.RedriveWait}
	res := s.replay(ctx, ch.Domain, req.DLQID, o)
	if res.outcome == "" || (res.outcome == api.OutcomeNotRedrivable && res.err != nil) {
		code := res.code
		if code == "" {
			code = api.ErrUnavailable
		}
		_ = r.Error(code, res.err.Error(), nil)
		return
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
	_ = r.RespondJSON(rep)
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
func (s *Service) handleRelease(r micro.Request) {
	var req api.ReleaseRequest
	if err := decodeStrict(r.Data(), &req); err != nil {
		badRequest(r, err)
		return
	}
	id, ok := s.caller(r, req.Actor, changeRoles)
	if !ok {
		return
	}
	// The record names the caller, never the request's free-text actor.
	req.Actor = id.User
	switch {
	case req.DLQID == "" || req.Reason == "":
		_ = r.Error(api.ErrBadRequest, "dlq_id and reason are required", nil)
		return
	case req.Class != "" && record.Class(req.Class) != record.ClassExhausted && record.Class(req.Class) != record.ClassValidation:
		_ = r.Error(api.ErrBadRequest, "class must be exhausted or validation", nil)
		return
	case len(req.Actor) > 256 || len(req.Reason) > 2048:
		_ = r.Error(api.ErrBadRequest, "actor or reason too long", nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, ok := s.readFor(ctx, r, req.DLQID)
	if !ok {
		return
	}
	if ch.State.Status != record.StatusPoison {
		_ = r.Error(api.ErrInvalidTransition, "only a poison event can be released; this one is "+string(ch.State.Status), nil)
		return
	}
	class := record.Class(req.Class)
	if class == "" {
		class = prePoisonClass(ch.Records)
	}
	exp := len(ch.Records)
	rep, err := s.chains.append(ctx, api.AppendRequest{
		DLQID: req.DLQID, Domain: ch.Domain, Kind: record.KindReleased, ExpectedIndex: &exp,
		Class: class, Actor: req.Actor, Reason: req.Reason,
	})
	if err != nil {
		_ = r.Error(codeOf(err), err.Error(), nil)
		return
	}
	s.log.Info("release appended", "dlq_id", req.DLQID, "domain", ch.Domain, "class", string(class), "actor", req.Actor, "index", rep.Index)
	_ = r.RespondJSON(rep)
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

// plan computes what a drain with filter f would do, writing nothing.
func (s *Service) plan(ctx context.Context, f api.DrainFilter) (*api.DrainPlan, error) {
	p := &api.DrainPlan{ByDomain: map[string]int{}, ByClass: map[string]int{}, ByCode: map[string]int{}}
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
	sl := &selector{js: s.js}
	sl.seed = seedOf()
	sl.onItem = func(l chain.Head, idx int32) {
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
			names[hashKey(sl.seed, l.Domain, l.OrderingKey)] = l.OrderingKey
		}
		if _, ok := idem[idx]; (ok || len(idem) < maxChecks) && l.IdempotencyKey != "" {
			idem[idx] = l.IdempotencyKey
		}
	}
	var keys []string // idempotency keys to check, at most maxChecks
	sl.onFinal = func(sel *selection) {
		for idx, ti := range info {
			if ti == 0 || !sel.live(int32(idx)) {
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
	}
	sel, err := sl.run(ctx, f, time.Time{}, f.Limit)
	if err != nil {
		return nil, err
	}
	p.Selected, p.Excluded = sel.selected, sel.excluded
	type kc struct {
		h uint64
		n int
	}
	var top []kc
	sel.lanes(func(lane []item) bool {
		held, n := false, 0
		for _, it := range lane {
			switch {
			case it.flags&flagBlocker != 0:
				held = true
			case held:
				p.HeldByEarlier++
				n++
			default:
				n++
			}
		}
		if n > 0 && lane[0].flags&flagNoKey == 0 {
			p.Keys++
			top = append(top, kc{lane[0].okey, n})
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
	for _, k := range keys {
		st, found, err := ledger.Lookup(ctx, s.idem, k)
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
