package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Legal holds (package hold) are placed and lifted here: hold.place and
// hold.lift store the hold in HOLDS, write the action to AUDIT and append
// the hold's record to every chain it holds (on quarantiner.hold, which
// appends nothing else). A party or filter hold is dynamic: the live view
// tells holdWorker of every record it applies, and a chain that matches an
// active dynamic hold and does not carry it gets its record. When
// QUARANTINE has a MaxAge, every held chain is copied, record by record as
// stored, into LEGALHOLD (no age limit) as soon as it is held or grows,
// and a sweep every legalHoldSweep(MaxAge) catches up whatever failed.

// Provenance headers of a LEGALHOLD copy.
const (
	HeaderSourceStream  = "Deadletter-Source-Stream"
	HeaderSourceSeq     = "Deadletter-Source-Seq"
	HeaderSourceSubject = "Deadletter-Source-Subject"
)

// holdReload is how often the active holds are read again from HOLDS
// (another auditor instance may have placed or lifted one).
const holdReload = 5 * time.Second

// legalHoldSweep is how often held chains are checked against their
// LEGALHOLD copies and failed hold work is retried: a quarter of
// QUARANTINE's MaxAge, between 100 ms and a minute, so a copy that failed
// is retried well before the original can expire; a minute without a
// MaxAge.
func legalHoldSweep(maxAge time.Duration) time.Duration {
	if maxAge == 0 {
		return time.Minute
	}
	return min(max(maxAge/4, 100*time.Millisecond), time.Minute)
}

// workKind is what one piece of hold work does.
type workKind int

const (
	workPlace workKind = iota // append the hold's hold_placed record
	workLift                  // append the hold's hold_lifted record
	workCopy                  // copy the chain's new records to LEGALHOLD
)

// holdWork is one chain's pending hold work.
type holdWork struct {
	kind          workKind
	holdID        string // place, lift
	dlqID, domain string
}

// holdState is the auditor's view of the holds and its pending work.
type holdState struct {
	store *hold.Store
	legal bool // LEGALHOLD is provisioned (QUARANTINE has a MaxAge)

	mu     sync.Mutex
	known  map[string]api.Hold // every hold read or written, by id
	queue  map[holdWork]bool
	copied map[string]int // records copied to LEGALHOLD, by dlq id
	wake   chan struct{}
}

func newHoldState(store *hold.Store) *holdState {
	return &holdState{store: store, known: map[string]api.Hold{}, queue: map[holdWork]bool{},
		copied: map[string]int{}, wake: make(chan struct{}, 1)}
}

// set records h as the latest state of its hold.
func (hs *holdState) set(h api.Hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.known[h.ID] = h
}

// enqueue adds work (hs.mu held).
func (hs *holdState) enqueue(w holdWork) {
	hs.queue[w] = true
	select {
	case hs.wake <- struct{}{}:
	default:
	}
}

// add queues work.
func (hs *holdState) add(w holdWork) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.enqueue(w)
}

// onRecord is the live view's hook (under its lock: quick, no I/O): a
// chain that matches an active dynamic hold it does not carry gets the
// hold's record, one that carries a lifted hold gets the lift, and a held
// chain's new record is copied to LEGALHOLD.
func (hs *holdState) onRecord(r chain.Head, hc *heldChain) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	sub := hold.FromHead(r)
	for _, h := range hs.known {
		carried := hc != nil && hc.holds[h.ID]
		switch {
		case h.Status == api.HoldActive && !carried && hold.Dynamic(h.Target) && hold.Matches(h.Target, sub):
			hs.enqueue(holdWork{kind: workPlace, holdID: h.ID, dlqID: r.DLQID, domain: r.Domain})
		case h.Status == api.HoldLifted && carried:
			hs.enqueue(holdWork{kind: workLift, holdID: h.ID, dlqID: r.DLQID, domain: r.Domain})
		}
	}
	if hc != nil && hs.legal {
		hs.enqueue(holdWork{kind: workCopy, dlqID: r.DLQID, domain: r.Domain})
	}
}

// pending returns the dlq ids with a place of holdID queued.
func (hs *holdState) pending(holdID string) []string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var out []string
	for w := range hs.queue {
		if w.kind == workPlace && w.holdID == holdID {
			out = append(out, w.dlqID)
		}
	}
	slices.Sort(out)
	return out
}

// take returns the queued work and empties the queue.
func (hs *holdState) take() []holdWork {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	out := make([]holdWork, 0, len(hs.queue))
	for w := range hs.queue {
		out = append(out, w)
	}
	clear(hs.queue)
	// Copies last: a place's record is copied with the chain.
	slices.SortStableFunc(out, func(a, b holdWork) int { return int(a.kind) - int(b.kind) })
	return out
}

// reload reads every hold from HOLDS.
func (hs *holdState) reload(ctx context.Context) error {
	all, err := hs.store.All(ctx)
	if err != nil {
		return err
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, h := range all {
		hs.known[h.ID] = h
	}
	return nil
}

// hold returns the hold id as last known.
func (hs *holdState) hold(id string) (api.Hold, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	h, ok := hs.known[id]
	return h, ok
}

// runHolds does the queued hold work until ctx is done: once the live
// view has caught up with QUARANTINE as it was at start (the records it
// replays then queue work for chains that may already carry a hold), then
// whenever work is queued, with a sweep of the held chains' copies every
// sweep.
func (s *Service) runHolds(ctx context.Context, sweep time.Duration) {
	if info, err := s.quarantine.Info(ctx); err == nil {
		if err := s.index.waitFor(ctx, info.State.LastSeq); err != nil {
			return
		}
	}
	reload := time.NewTicker(holdReload)
	defer reload.Stop()
	sweeps := time.NewTicker(sweep)
	defer sweeps.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			if err := s.holds.reload(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reading the legal holds failed", "err", err)
			}
			continue
		case <-sweeps.C:
			s.sweepHolds()
		case <-s.holds.wake:
		}
		for _, w := range s.holds.take() {
			if err := s.doHoldWork(ctx, w); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Error("legal hold work failed; retried at the next sweep", "dlq_id", w.dlqID, "hold_id", w.holdID,
					"work", int(w.kind), "err", err)
				s.holds.mu.Lock()
				s.holds.queue[w] = true // retried at the next sweep, not at once
				s.holds.mu.Unlock()
			}
		}
	}
}

// sweepHolds queues a copy of every held chain with records not copied
// yet, and the lift of every lifted hold a chain still carries.
func (s *Service) sweepHolds() {
	refs := s.index.heldChains("")
	hs := s.holds
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, ref := range refs {
		if hs.legal && hs.copied[ref.dlqID] < ref.records {
			hs.enqueue(holdWork{kind: workCopy, dlqID: ref.dlqID, domain: ref.domain})
		}
		for _, id := range ref.holds {
			if h, ok := hs.known[id]; ok && h.Status == api.HoldLifted {
				hs.enqueue(holdWork{kind: workLift, holdID: id, dlqID: ref.dlqID, domain: ref.domain})
			}
		}
	}
}

// doHoldWork does one piece of queued work.
func (s *Service) doHoldWork(ctx context.Context, w holdWork) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if w.kind == workCopy {
		return s.copyChain(ctx, w.domain, w.dlqID)
	}
	h, ok := s.holds.hold(w.holdID)
	switch {
	case !ok:
		return nil
	case w.kind == workPlace && (h.Status != api.HoldActive || s.index.carries(w.dlqID, h.ID)):
		return nil // lifted meanwhile, or the record is written
	case w.kind == workLift && h.Status != api.HoldLifted:
		return nil
	}
	kind := record.KindHoldPlaced
	if w.kind == workLift {
		kind = record.KindHoldLifted
	}
	return s.appendHold(ctx, h, kind, w.domain, w.dlqID)
}

// errHoldAppend is a refused quarantiner.hold, with its reply code.
type errHoldAppend struct{ code, msg string }

func (e *errHoldAppend) Error() string { return api.QuarantinerHold + ": " + e.code + ": " + e.msg }

// appendHold appends hold h's record of kind (placed or lifted) to the
// chain, unless the chain already says so (a chain that carries the hold
// gets no second placing; one that does not gets no lift). The append is
// conditional on the chain's length; a chain that changed meanwhile is
// read again.
func (s *Service) appendHold(ctx context.Context, h api.Hold, kind record.Kind, domain, dlqID string) error {
	for attempt := 0; attempt < 5; attempt++ {
		ch, err := s.chains.Read(ctx, domain, dlqID)
		if err != nil {
			return fmt.Errorf("auditor: read chain: %w", err)
		}
		if has := ch.State.HeldBy(h.ID); has == (kind == record.KindHoldPlaced) {
			return nil
		}
		if ch.FoldErr != nil {
			return fmt.Errorf("auditor: chain %s is not valid (%w): no hold record can follow", dlqID, ch.FoldErr)
		}
		n := len(ch.Records)
		req := api.AppendRequest{DLQID: dlqID, Domain: domain, Kind: kind, ExpectedIndex: &n,
			Actor: h.PlacedBy, Reason: h.Reason, Hold: &record.HoldMark{HoldID: h.ID, CaseID: h.CaseID, At: h.PlacedAt}}
		if kind == record.KindHoldLifted {
			if h.LiftedAt == nil {
				return fmt.Errorf("auditor: hold %s is not lifted", h.ID)
			}
			req.Actor, req.Reason, req.Hold.At = h.LiftedBy, h.LiftReason, *h.LiftedAt
		}
		err = s.requestHold(ctx, req)
		var ae *errHoldAppend
		if errors.As(err, &ae) && (ae.code == api.ErrConflict || ae.code == api.ErrInvalidTransition) {
			continue // the chain changed: decide again on the stored chain
		}
		return err
	}
	return fmt.Errorf("auditor: chain %s kept changing", dlqID)
}

// requestHold asks the quarantiner to append a hold's record.
func (s *Service) requestHold(ctx context.Context, req api.AppendRequest) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, api.QuarantinerHold, b)
	if err != nil {
		return &errHoldAppend{code: api.ErrUnavailable, msg: err.Error()}
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &errHoldAppend{code: code, msg: m.Header.Get(micro.ErrorHeader)}
	}
	var rep api.AppendReply
	if err := jsonv2.Unmarshal(m.Data, &rep); err != nil {
		return &errHoldAppend{code: api.ErrUnavailable, msg: "unreadable append reply"}
	}
	return nil
}

// copyChain copies the chain's records not yet in LEGALHOLD there, each
// as stored (the sealed bytes) with its provenance (source stream,
// sequence and subject), in index order. Each copy is conditional on the
// last copy of the chain (expected last subject sequence), so two
// copiers never write a record twice.
func (s *Service) copyChain(ctx context.Context, domain, dlqID string) error {
	subj := subjects.LegalHold(domain, dlqID)
	n, lastSeq := 0, uint64(0)
	_, err := streams.DirectGet(ctx, s.js, subjects.LegalHoldStream, streams.DirectRequest{LastFor: subj}, func(m *jetstream.RawStreamMsg) error {
		h, err := chain.DecodeHead(m.Data)
		if err != nil {
			return err
		}
		n, lastSeq = h.Index+1, m.Sequence
		return nil
	})
	if err != nil {
		return fmt.Errorf("auditor: read %s: %w", subjects.LegalHoldStream, err)
	}
	stored, err := s.chains.Stored(ctx, domain, dlqID)
	if err != nil && !errors.Is(err, chain.ErrNotFound) {
		return fmt.Errorf("auditor: read chain: %w", err)
	}
	for _, m := range stored {
		h, err := chain.DecodeHead(m.Data)
		if err != nil {
			return fmt.Errorf("auditor: chain %s: %w", dlqID, err)
		}
		if h.Index < n {
			continue
		}
		if h.Index > n {
			return fmt.Errorf("auditor: chain %s: records %d..%d expired from %s before they were copied", dlqID, n, h.Index-1, subjects.QuarantineStream)
		}
		msg := nats.NewMsg(subj)
		msg.Data = m.Data
		msg.Header.Set(HeaderSourceStream, subjects.QuarantineStream)
		msg.Header.Set(HeaderSourceSeq, strconv.FormatUint(m.Seq, 10))
		msg.Header.Set(HeaderSourceSubject, subjects.Quarantine(domain, dlqID))
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastSeq, 10))
		ack, err := s.js.PublishMsg(ctx, msg)
		if err != nil {
			return fmt.Errorf("auditor: copy record %d of %s to %s: %w", h.Index, dlqID, subjects.LegalHoldStream, err)
		}
		n, lastSeq = n+1, ack.Sequence
	}
	s.holds.mu.Lock()
	s.holds.copied[dlqID] = max(s.holds.copied[dlqID], n)
	s.holds.mu.Unlock()
	return nil
}

// holder is the authenticated caller placing or lifting a hold (the
// endpoint subject): a role the endpoint table allows on it (the server's
// imports already restrict the endpoints to them); anonymous only with
// AllowAnonymous.
func (s *Service) holder(ctx context.Context, subject string) (access.Identity, error) {
	id, err := callerOf(ctx)
	switch {
	case err != nil && s.cfg.AllowAnonymous:
		return access.Identity{User: anonymous}, nil
	case err != nil:
		return access.Identity{}, api.Wrap(api.ErrUnauthenticated, err, "legal holds are placed and lifted only by an authenticated inspector or operator")
	case !access.Allowed(subject, id.Role):
		return access.Identity{}, api.Errorf(api.ErrForbidden, "role %s may not place or lift legal holds", id.Role)
	}
	return id, nil
}

// holdErr maps the store's errors to coded ones.
func holdErr(err error) error {
	switch {
	case errors.Is(err, hold.ErrNotFound):
		return api.Wrap(api.ErrNotFound, err, "no hold has this id")
	case errors.Is(err, hold.ErrNotPlaced):
		return api.Wrap(api.ErrNotPlaced, err, "the hold is not placed (lifted already, or for another case)")
	case errors.Is(err, hold.ErrConflict):
		return api.Wrap(api.ErrConflict, err, "the hold changed meanwhile")
	}
	return api.Wrap(api.ErrUnavailable, err, "the legal holds could not be read or written")
}

// auditHold writes a hold's action to AUDIT, retrying a few times (it is
// idempotent).
func (s *Service) auditHold(ctx context.Context, h api.Hold, action string) error {
	err := retry.Policy{}.Times(ctx, 3, nil, func(ctx context.Context) error { return s.holds.store.Audit(ctx, h, action) })
	if err == nil {
		return nil
	}
	s.log.Error("legal hold action not written to AUDIT", "hold_id", h.ID, "action", action, "err", err)
	return api.Wrap(api.ErrUnavailable, err, "hold "+h.ID+" is "+action+" but its action could not be written to AUDIT")
}

// HoldPlace places a legal hold (hold.place) by the authenticated caller
// and appends its record to every chain it holds now: one event, or every
// stored chain (resolved ones included) that matches a party or filter
// hold, which then also holds the chains quarantined later that match it.
func (s *Service) HoldPlace(ctx context.Context, req api.HoldPlaceRequest) (api.HoldReply, error) {
	who, err := s.holder(ctx, api.HoldPlace)
	if err != nil {
		return api.HoldReply{}, err
	}
	if !s.placeLimit.allow(who.User) {
		s.log.Warn("hold placement refused", "user", who.User, "code", api.ErrHoldRateLimited)
		return api.HoldReply{}, api.Errorf(api.ErrHoldRateLimited, "%s placed more holds than %d a minute (burst %d): retry later",
			who.User, s.cfg.HoldPlacePerMinute, s.cfg.HoldPlaceBurst)
	}
	if id := req.Target.DLQID; id != "" {
		if _, err := s.chains.Last(ctx, domain.DomainOfID(id), id); errors.Is(err, chain.ErrNotFound) {
			return api.HoldReply{}, api.Errorf(api.ErrNotFound, "no quarantine chain has this dlq id")
		} else if err != nil {
			return api.HoldReply{}, fmt.Errorf("auditor: read chain: %w", err)
		}
	}
	if req.Target.DLQID == "" && !req.Confirm {
		// A party or filter that matches nothing is likely misspelt: the
		// person confirms it (it will hold what is quarantined later).
		found, err := s.holdTargets(ctx, req.Target)
		if err != nil {
			return api.HoldReply{}, fmt.Errorf("auditor: find the chains the hold would hold: %w", err)
		}
		if len(found) == 0 {
			return api.HoldReply{}, api.Errorf(api.ErrHoldMatchesNothing,
				"the hold's party or filter matches no stored event; place it with confirm to hold the matching events quarantined later")
		}
	}
	h, err := s.holds.store.Place(ctx, req, who, s.now())
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	s.holds.set(h) // from now on the live view matches new chains against it
	s.log.Info("legal hold placed", "hold_id", h.ID, "case_id", h.CaseID, "user", who.User)
	if err := s.auditHold(ctx, h, hold.AuditPlaced); err != nil {
		return api.HoldReply{}, err
	}
	targets, err := s.holdTargets(ctx, h.Target)
	if err != nil {
		return api.HoldReply{}, fmt.Errorf("auditor: find the chains hold %s holds: %w", h.ID, err)
	}
	rep := api.HoldReply{HeldHold: api.HeldHold{Hold: h, DLQIDs: []string{}}}
	for _, t := range targets {
		if err := s.appendHold(ctx, h, record.KindHoldPlaced, t.domain, t.dlqID); err != nil {
			s.log.Error("legal hold record not appended; retried", "hold_id", h.ID, "dlq_id", t.dlqID, "err", err)
			rep.Failed = append(rep.Failed, t.dlqID)
			s.holds.add(holdWork{kind: workPlace, holdID: h.ID, dlqID: t.dlqID, domain: t.domain})
			continue
		}
		rep.DLQIDs = append(rep.DLQIDs, t.dlqID)
	}
	return rep, nil
}

// chainRef names a chain.
type chainRef struct{ domain, dlqID string }

// holdTargets returns the stored chains target holds: its one event, or
// those whose last record matches it, read from QUARANTINE up to its last
// sequence now (a chain stored later is the live view's to match).
func (s *Service) holdTargets(ctx context.Context, t api.HoldTarget) ([]chainRef, error) {
	if t.DLQID != "" {
		return []chainRef{{domain.DomainOfID(t.DLQID), t.DLQID}}, nil
	}
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return nil, err
	}
	filter := subjects.QuarantineAll
	if t.Filter != nil && t.Filter.Domain != "" && validToken(t.Filter.Domain) {
		filter = "quarantine." + t.Filter.Domain + ".>"
	}
	match := map[string]chainRef{}
	matches := map[string]bool{}
	if info.State.Msgs > 0 {
		_, _, err = scan(ctx, s.js, subjects.QuarantineStream, filter, info.State.FirstSeq, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
			h, err := chain.DecodeHead(m.Data)
			if err != nil {
				return true
			}
			matches[h.DLQID] = hold.Matches(t, hold.FromHead(h)) // the last record decides
			match[h.DLQID] = chainRef{h.Domain, h.DLQID}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	var out []chainRef
	for id, ok := range matches {
		if ok {
			out = append(out, match[id])
		}
	}
	slices.SortFunc(out, func(a, b chainRef) int { return strings.Compare(a.dlqID, b.dlqID) })
	return out, nil
}

// Two-person approval of a lift (package approval, ActionHoldLift): when
// the policy in force names it (the default does), hold.lift lifts
// nothing: it asks the redriver, the approval owner and the only writer
// of APPROVALS, to store a pending approval (approval.hold_lift) and
// answers APPROVAL_REQUIRED with it. An approver other than the requester signs it
// at the redriver (approval.approve, re-authenticating), which executes
// approvals: it asks hold.lift.approved here with the approval's id, a
// subject of the services' account that no person's account imports. The
// lift is done only for an approval read from APPROVALS as approved, of
// kind hold_lift, for that hold, not executed, with a proof of its
// signature that verifies against the configured approval key and
// matches its request and decision in AUDIT; it is the requester's
// lift (the hold's LiftedBy, the chains' hold_lifted records), with the
// approval and its signer kept in the hold (LiftApprovalID,
// LiftApprovedBy) and its AUDIT action; the signature itself is the
// approval's AUDIT action. Without a signed approval no path lifts a
// hold the policy holds for a second person: hold.lift refuses, and
// hold.lift.approved finds no proven approval (only the redriver writes
// APPROVALS, and only the redriver's key, used after re-authenticating an
// approver, makes a proof).

// noSigning is the auditor's Reauthenticator: it never signs approvals
// (the redriver does), so it refuses every re-authentication.
type noSigning struct{}

// Reauthenticate refuses.
func (noSigning) Reauthenticate(context.Context, string, api.Password) error {
	return fmt.Errorf("%w: approvals are signed at the redriver", approval.ErrForbidden)
}

// HoldLift lifts a legal hold (hold.lift) by the authenticated caller
// and appends the lift to every chain that carries it; when the approval
// policy names hold lifts it lifts nothing and answers APPROVAL_REQUIRED
// with the pending approval it created.
func (s *Service) HoldLift(ctx context.Context, req api.HoldLiftRequest) (api.HoldReply, error) {
	who, err := s.holder(ctx, api.HoldLift)
	if err != nil {
		return api.HoldReply{}, err
	}
	// The hold must be liftable (NOT_FOUND, NOT_PLACED) before anyone is
	// asked to approve its lift.
	cur, err := s.holds.store.Get(ctx, req.ID)
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	if cur.Status != api.HoldActive || cur.CaseID != req.CaseID {
		return api.HoldReply{}, holdErr(fmt.Errorf("%w: %s", hold.ErrNotPlaced, req.ID))
	}
	if err := s.requireLiftApproval(ctx, who, req); err != nil {
		return api.HoldReply{}, err
	}
	h, err := s.holds.store.Lift(ctx, req.ID, req.CaseID, req.Reason, who, s.now())
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return s.lifted(ctx, h)
}

// requireLiftApproval returns nil when the policy in force lets who lift
// at once, else an APPROVAL_REQUIRED *api.Error carrying the pending
// approval the redriver created. The auditor writes no approval: the
// redriver, the approval owner, alone writes APPROVALS
// (api.ApprovalHoldLift). It fails closed: a redriver that does not
// answer refuses the lift.
func (s *Service) requireLiftApproval(ctx context.Context, who access.Identity, req api.HoldLiftRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return api.Wrap(api.ErrInternal, err, "the request could not be encoded")
	}
	_, err = endpoint.Call[api.ApprovalHoldLiftRequest, api.ApprovalReply](ctx, s.nc, api.ApprovalHoldLift, api.ApprovalHoldLiftRequest{
		HoldID: req.ID, Request: body, Requester: who.User, RequesterRole: string(who.Role), Reason: req.Reason})
	if e := api.AsError(err); e != nil && e.Code == api.ErrApprovalRequired && e.Approval != nil {
		s.log.Info("APPROVAL_REQUIRED", "approval_id", e.Approval.ID, "action", e.Approval.Action, "hold_id", req.ID, "user", who.User)
		return e
	}
	if err != nil && api.AsError(err) == nil {
		return api.Wrap(api.ErrUnavailable, err, "the approval owner (the redriver) did not answer: the lift is refused; retry")
	}
	return err
}

// HoldLiftApproved executes signed approval req.ApprovalID of a hold lift
// (hold.lift.approved: the redriver's request; no person's account
// imports the subject, and a request that carries a person is refused).
// The approval must be approved, of kind hold_lift, for the hold its
// request names; the hold is lifted as the requester. A repeat (the
// redriver retrying before it marked the approval executed) finds the
// hold lifted by this approval and completes the lift's records.
func (s *Service) HoldLiftApproved(ctx context.Context, req api.HoldLiftApprovedRequest) (api.HoldReply, error) {
	if who, err := callerOf(ctx); err == nil {
		return api.HoldReply{}, api.Errorf(api.ErrForbidden, "%s may not execute approvals: the redriver does", who.User)
	}
	a, err := s.approvals.Get(ctx, req.ApprovalID)
	if err != nil {
		return api.HoldReply{}, approval.APIError(err)
	}
	var lift api.HoldLiftRequest
	switch {
	case a.Action != api.ActionHoldLift:
		return api.HoldReply{}, api.Errorf(api.ErrForbidden, "approval %s is not a hold lift", a.ID)
	case a.Status != api.ApprovalApproved:
		return api.HoldReply{}, api.Errorf(api.ErrForbidden, "approval %s is %s, not approved", a.ID, a.Status)

	case json.Unmarshal(a.Request, &lift) != nil || lift.Validate() != nil || lift.ID != a.HoldID:
		return api.HoldReply{}, api.Errorf(api.ErrBadRequest, "approval %s does not hold a lift of hold %s", a.ID, a.HoldID)
	}
	// Only a decision the approval owner signed after re-authenticating
	// the approver, recorded in AUDIT with its request, lifts the hold.
	if err := s.approvals.Proven(ctx, a); err != nil {
		s.log.Error("approved hold lift refused", "approval_id", a.ID, "hold_id", a.HoldID, "code", approval.Code(err))
		return api.HoldReply{}, approval.APIError(err)
	}
	sig, err := approval.Signature(a)
	if err != nil {
		return api.HoldReply{}, approval.APIError(err)
	}
	requester := access.Identity{User: a.Requester, Role: access.Role(a.RequesterRole)}
	h, err := s.holds.store.LiftApproved(ctx, lift.ID, lift.CaseID, lift.Reason, requester, hold.Approval{ID: a.ID, Approver: sig.Approver}, s.now())
	if errors.Is(err, hold.ErrNotPlaced) {
		if cur, gerr := s.holds.store.Get(ctx, lift.ID); gerr == nil && cur.LiftApprovalID == a.ID {
			h, err = cur, nil // a repeat: lifted by this approval
		}
	}
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return s.lifted(ctx, h)
}

// lifted completes lifted hold h: its AUDIT action and the lift appended
// to every chain that carries it.
func (s *Service) lifted(ctx context.Context, h api.Hold) (api.HoldReply, error) {
	s.holds.set(h)
	s.log.Info("legal hold lifted", "hold_id", h.ID, "case_id", h.CaseID, "user", h.LiftedBy, "approval_id", h.LiftApprovalID)
	if err := s.auditHold(ctx, h, hold.AuditLifted); err != nil {
		return api.HoldReply{}, err
	}
	// Every record stored so far applied: the chains carrying the hold.
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return api.HoldReply{}, fmt.Errorf("auditor: %w", err)
	}
	if err := s.index.waitFor(ctx, info.State.LastSeq); err != nil {
		return api.HoldReply{}, err
	}
	rep := api.HoldReply{HeldHold: api.HeldHold{Hold: h, DLQIDs: []string{}}}
	for _, ref := range s.index.heldChains(h.ID) {
		if err := s.appendHold(ctx, h, record.KindHoldLifted, ref.domain, ref.dlqID); err != nil {
			s.log.Error("legal hold lift not appended; retried", "hold_id", h.ID, "dlq_id", ref.dlqID, "err", err)
			rep.Failed = append(rep.Failed, ref.dlqID)
			s.holds.add(holdWork{kind: workLift, holdID: h.ID, dlqID: ref.dlqID, domain: ref.domain})
			continue
		}
		rep.DLQIDs = append(rep.DLQIDs, ref.dlqID)
	}
	return rep, nil
}

// heldHold is h with the chains that carry it now.
func (s *Service) heldHold(h api.Hold) api.HeldHold {
	out := api.HeldHold{Hold: h, DLQIDs: []string{}, Pending: s.holds.pending(h.ID)}
	for _, ref := range s.index.heldChains(h.ID) {
		out.DLQIDs = append(out.DLQIDs, ref.dlqID)
	}
	out.Count, out.PendingCount = len(out.DLQIDs), len(out.Pending)
	return out
}

// listedHold is h as hold.list shows it: its counts and at most
// api.MaxListedHoldIDs of its ids.
func (s *Service) listedHold(h api.Hold) api.HeldHold {
	out := s.heldHold(h)
	if len(out.DLQIDs) > api.MaxListedHoldIDs || len(out.Pending) > api.MaxListedHoldIDs {
		out.Truncated = true
		out.DLQIDs = out.DLQIDs[:min(len(out.DLQIDs), api.MaxListedHoldIDs)]
		out.Pending = out.Pending[:min(len(out.Pending), api.MaxListedHoldIDs)]
	}
	return out
}

// HoldGet returns a hold and the chains it holds (hold.get).
func (s *Service) HoldGet(ctx context.Context, req api.HoldGetRequest) (api.HoldReply, error) {
	h, err := s.holds.store.Get(ctx, req.ID)
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return api.HoldReply{HeldHold: s.heldHold(h)}, nil
}

// HoldList lists the holds, newest first, each with how many chains it
// holds and the first api.MaxListedHoldIDs of them (hold.list).
func (s *Service) HoldList(ctx context.Context, req api.HoldListRequest) (api.HoldListReply, error) {
	all, err := s.holds.store.All(ctx)
	if err != nil {
		return api.HoldListReply{}, holdErr(err)
	}
	rep := api.HoldListReply{Holds: []api.HeldHold{}}
	for _, h := range all {
		if h.Status == api.HoldActive || req.IncludeLifted {
			rep.Holds = append(rep.Holds, s.listedHold(h))
		}
	}
	return rep, nil
}
