package legalhold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/decision"
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
// tells the part of every record it applies (OnRecord), and a chain that
// matches an active dynamic hold and does not carry it gets its record.
// When QUARANTINE has a MaxAge, every held chain is copied, record by
// record as stored, into LEGALHOLD (no age limit) as soon as it is held or
// grows, and a sweep every SweepEvery(MaxAge) catches up whatever failed.

// anonymous is the user of an unauthenticated hold action, allowed only
// with Config.AllowAnonymous.
const anonymous = "anonymous"

// View is what the part reads from the auditor's live view of QUARANTINE.
type View interface {
	// WaitFor returns once the view applied every record up to seq.
	WaitFor(ctx context.Context, seq uint64) error
	// HeldChains returns the chains that carry holdID ("": any hold).
	HeldChains(holdID string) []Held
	// Carries reports whether chain dlqID carries holdID.
	Carries(dlqID, holdID string) bool
}

// Config is what the part needs from the auditor.
type Config struct {
	NC     *nats.Conn
	JS     jetstream.JetStream
	Chains *chain.Reader
	View   View
	Log    *slog.Logger
	// Now is the clock (read on every use: tests set the auditor's).
	Now func() time.Time
	// Caller returns the person a request's context carries.
	Caller func(context.Context) (access.Identity, error)
	// AllowAnonymous lets an unauthenticated caller place and lift holds
	// (tests and a server without accounts).
	AllowAnonymous bool
	// PlacePerMinute and PlaceBurst rate-limit each person's placements.
	PlacePerMinute, PlaceBurst int
	// Retention is the longest retention QUARANTINE must keep
	// (streams.Options.Retention; nil: the domain registry's).
	Retention map[string]time.Duration
	// Decisions checks a lift's decision signed by its person against
	// the people registry (issue #38). Nil: approval.AuditRegistry over
	// JS (the deployment wires decision.Registry).
	Decisions approval.Checker
}

// Holds is the auditor's legal-hold part: the hold endpoints, the queue
// of hold records and LEGALHOLD copies the live view feeds, its worker,
// QUARANTINE's retention check and the LEGALHOLD verification. It writes
// HOLDS, the holds' actions to AUDIT, the holds' records (through the
// quarantiner) and LEGALHOLD.
type Holds struct {
	cfg        Config
	queue      *Queue
	placeLimit *personLimiter

	// Set at start (Bind, CheckRetention) before any request is served.
	quarantine jetstream.Stream
	approvals  *approval.Store
	decisions  approval.Checker
	maxAge     time.Duration // QUARANTINE's MaxAge (0: none)
	legal      bool          // LEGALHOLD is provisioned (QUARANTINE has a MaxAge)
}

// New returns the part over HOLDS, no hold known yet.
func New(cfg Config) *Holds {
	decisions := cfg.Decisions
	if decisions == nil {
		decisions = approval.AuditRegistry{JS: cfg.JS}
	}
	return &Holds{cfg: cfg, queue: NewQueue(hold.NewStore(cfg.JS, cfg.Log)), decisions: decisions,
		placeLimit: newPersonLimiter(cfg.PlacePerMinute, cfg.PlaceBurst, maxPlacers)}
}

// Legal reports whether LEGALHOLD is provisioned (QUARANTINE has a
// MaxAge): held chains' expired records are read from there.
func (p *Holds) Legal() bool { return p.legal }

// OnRecord is the live view's hook (Queue.OnRecord): sub is the chain
// as the view knows it after r, carries tells the holds the chain carries
// (nil: none).
func (p *Holds) OnRecord(r chain.Head, sub hold.Subject, carries func(holdID string) bool) {
	p.queue.OnRecord(r, sub, carries, p.legal)
}

// Matching returns the ids of the active holds that hold the chain sub
// summarizes, its record written or not (Queue.Matching).
func (p *Holds) Matching(sub hold.Subject) []string { return p.queue.Matching(sub) }

// Reload reads every hold from HOLDS.
func (p *Holds) Reload(ctx context.Context) error { return p.queue.Reload(ctx) }

// CheckRetention refuses a QUARANTINE whose MaxAge is below the longest
// retention (the registry's, or Config.Retention's), naming both, and
// binds LEGALHOLD when QUARANTINE has a MaxAge. It waits (package retry)
// until ctx ends for what is not there yet; errors wrap notProvisioned.
func (p *Holds) CheckRetention(ctx context.Context, quarantine jetstream.Stream, notProvisioned error) error {
	p.quarantine = quarantine
	info, err := retry.Value(ctx, p.cfg.Log, "QUARANTINE stream info", func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return quarantine.Info(ctx)
	})
	if err != nil {
		return fmt.Errorf("%w: %s: %w", notProvisioned, subjects.QuarantineStream, err)
	}
	p.maxAge = info.Config.MaxAge
	if err := (streams.Options{Retention: p.cfg.Retention}).CheckMaxAge(p.maxAge); err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	if p.maxAge == 0 {
		return nil
	}
	if _, err := retry.Value(ctx, p.cfg.Log, "LEGALHOLD stream", func(ctx context.Context) (jetstream.Stream, error) {
		return p.cfg.JS.Stream(ctx, subjects.LegalHoldStream)
	}); err != nil {
		return fmt.Errorf("%w: %s (QUARANTINE has a max age): %w", notProvisioned, subjects.LegalHoldStream, err)
	}
	p.legal = true
	return nil
}

// Bind gives the part the approvals store Run opened (a hold lift the
// approval policy names waits for a second person).
func (p *Holds) Bind(approvals *approval.Store) { p.approvals = approvals }

// Run does the queued hold work until ctx is done: once the live view
// has caught up with QUARANTINE as it was at start (the records it
// replays then queue work for chains that may already carry a hold), then
// whenever work is queued, with a sweep of the held chains' copies every
// SweepEvery(MaxAge).
func (p *Holds) Run(ctx context.Context) {
	if info, err := p.quarantine.Info(ctx); err == nil {
		if err := p.cfg.View.WaitFor(ctx, info.State.LastSeq); err != nil {
			return
		}
	}
	reload := time.NewTicker(Reload)
	defer reload.Stop()
	sweeps := time.NewTicker(SweepEvery(p.maxAge))
	defer sweeps.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			if err := p.queue.Reload(ctx); err != nil && ctx.Err() == nil {
				p.cfg.Log.Warn("reading the legal holds failed", "err", err)
			}
			continue
		case <-sweeps.C:
			p.queue.Sweep(p.cfg.View.HeldChains(""), p.legal)
		case <-p.queue.Wake():
		}
		p.work(ctx, p.queue.Take())
		if ctx.Err() != nil {
			return
		}
	}
}

// appenders is how many chains hold work appends to at a time (each
// append is a request to the quarantiner; chains are independent).
const appenders = 8

// work does the queued work: the places and lifts appenders at a time,
// then the copies (a place's record is copied with the chain). Failed
// work is retried at the next sweep, not at once.
func (p *Holds) work(ctx context.Context, ws []Work) {
	i := 0
	for i < len(ws) && ws[i].Kind != Copy {
		i++
	}
	run := func(w Work) {
		if err := p.do(ctx, w); err != nil && ctx.Err() == nil {
			p.cfg.Log.Error("legal hold work failed; retried at the next sweep", "dlq_id", w.DLQID, "hold_id", w.HoldID,
				"work", int(w.Kind), "err", err)
			p.queue.Retry(w)
		}
	}
	sem := make(chan struct{}, appenders)
	var wg sync.WaitGroup
	for _, w := range ws[:i] {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			run(w)
		})
	}
	wg.Wait()
	for _, w := range ws[i:] {
		if ctx.Err() != nil {
			return
		}
		run(w)
	}
}

// do does one piece of queued work.
func (p *Holds) do(ctx context.Context, w Work) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if w.Kind == Copy {
		n, err := CopyChain(ctx, p.cfg.JS, p.cfg.Chains, w.Domain, w.DLQID)
		if err != nil {
			return err
		}
		p.queue.Copied(w.DLQID, n)
		return nil
	}
	h, ok := p.queue.Hold(w.HoldID)
	switch {
	case !ok:
		return nil
	case w.Kind == Place && (h.Status != api.HoldActive || p.cfg.View.Carries(w.DLQID, h.ID)):
		return nil // lifted meanwhile, or the record is written
	case w.Kind == Lift && h.Status != api.HoldLifted:
		return nil
	}
	kind := record.KindHoldPlaced
	if w.Kind == Lift {
		kind = record.KindHoldLifted
	}
	return Append(ctx, p.cfg.Chains, p.cfg.NC, h, kind, w.Domain, w.DLQID)
}

// holder is the authenticated caller placing or lifting a hold (the
// endpoint subject): a role the endpoint table allows on it (the server's
// imports already restrict the endpoints to them); anonymous only with
// AllowAnonymous.
func (p *Holds) holder(ctx context.Context, subject string) (access.Identity, error) {
	id, err := p.cfg.Caller(ctx)
	switch {
	case err != nil && p.cfg.AllowAnonymous:
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

// audit writes a hold's action to AUDIT, retrying a few times (it is
// idempotent).
func (p *Holds) audit(ctx context.Context, h api.Hold, action string) error {
	err := retry.Policy{}.Times(ctx, 3, nil, func(ctx context.Context) error { return p.queue.Store().Audit(ctx, h, action) })
	if err == nil {
		return nil
	}
	p.cfg.Log.Error("legal hold action not written to AUDIT", "hold_id", h.ID, "action", action, "err", err)
	return api.Wrap(api.ErrUnavailable, err, "hold "+h.ID+" is "+action+" but its action could not be written to AUDIT")
}

// placeBudget bounds how long hold.place appends the hold's records
// itself: the chains left are the worker's (the reply counts them as
// pending). The hold holds them from its placing on all the same: the
// redriver refuses every event an active hold matches (hold.Refuse).
const placeBudget = 3 * time.Second

// Place places a legal hold (hold.place) by the authenticated caller and
// appends its record to every chain it holds now: one event, a set of
// events (all of them or none: each must be stored), or every stored
// chain (resolved ones included) that matches a party or filter hold,
// which then also holds the chains quarantined later that match it. It
// is one hold however many events it holds (one placement of the rate
// limit, one lift, one second person to approve it).
func (p *Holds) Place(ctx context.Context, req api.HoldPlaceRequest) (api.HoldReply, error) {
	who, err := p.holder(ctx, api.HoldPlace)
	if err != nil {
		return api.HoldReply{}, err
	}
	if _, err := hold.Compile(req.Target); err != nil {
		return api.HoldReply{}, err // an identifier that does not read: BAD_REQUEST naming it
	}
	if !p.placeLimit.allow(who.User) {
		p.cfg.Log.Warn("hold placement refused", "user", who.User, "code", api.ErrHoldRateLimited)
		return api.HoldReply{}, api.Errorf(api.ErrHoldRateLimited, "%s placed more holds than %d a minute (burst %d): retry later",
			who.User, p.cfg.PlacePerMinute, p.cfg.PlaceBurst)
	}
	ids := req.Target.DLQIDs
	if id := req.Target.DLQID; id != "" {
		ids = []string{id}
	}
	if err := p.stored(ctx, ids); err != nil {
		return api.HoldReply{}, err
	}
	var sc *targetScan
	if hold.Dynamic(req.Target) {
		if sc, err = newTargetScan(req.Target); err != nil {
			return api.HoldReply{}, err
		}
	}
	if sc != nil && !req.Confirm {
		// A party or filter that matches nothing is likely misspelt: the
		// person confirms it (it will hold what is quarantined later).
		if err := p.readScan(ctx, sc); err != nil {
			return api.HoldReply{}, fmt.Errorf("auditor: find the chains the hold would hold: %w", err)
		}
		if len(sc.matched()) == 0 {
			return api.HoldReply{}, api.Errorf(api.ErrHoldMatchesNothing,
				"the hold's party or filter matches no stored event; place it with confirm to hold the matching events quarantined later")
		}
	}
	h, err := p.queue.Store().Place(ctx, req, who, p.cfg.Now())
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	p.queue.Set(h) // from now on the live view matches new chains against it
	p.cfg.Log.Info("legal hold placed", "hold_id", h.ID, "case_id", h.CaseID, "user", who.User)
	if err := p.audit(ctx, h, hold.AuditPlaced); err != nil {
		return api.HoldReply{}, err
	}
	// The chains it holds: its events, or those the scan finds, read on
	// past the records stored while it was placed (a chain stored after
	// it was known to the live view is the view's to match).
	var targets []chainRef
	if sc != nil {
		err = p.readScan(ctx, sc)
		targets = sc.matched()
	} else {
		targets, err = p.targets(ctx, h.Target)
	}
	if err != nil {
		return api.HoldReply{}, fmt.Errorf("auditor: find the chains hold %s holds: %w", h.ID, err)
	}
	rep := api.HoldReply{HeldHold: api.HeldHold{Hold: h, DLQIDs: []string{}}}
	done := make([]error, len(targets))
	appended := make([]bool, len(targets))
	actx, cancel := context.WithTimeout(ctx, placeBudget)
	defer cancel()
	sem := make(chan struct{}, appenders)
	var wg sync.WaitGroup
	for i, t := range targets {
		if actx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			done[i], appended[i] = Append(actx, p.cfg.Chains, p.cfg.NC, h, record.KindHoldPlaced, t.domain, t.dlqID), true
		})
	}
	wg.Wait()
	for i, t := range targets {
		switch {
		case !appended[i] || done[i] != nil && actx.Err() != nil:
			// Past the budget: the worker appends it.
			p.queue.Add(Work{Kind: Place, HoldID: h.ID, DLQID: t.dlqID, Domain: t.domain})
			rep.Pending = append(rep.Pending, t.dlqID)
		case done[i] != nil:
			p.cfg.Log.Error("legal hold record not appended; retried", "hold_id", h.ID, "dlq_id", t.dlqID, "err", done[i])
			rep.Failed = append(rep.Failed, t.dlqID)
			p.queue.Add(Work{Kind: Place, HoldID: h.ID, DLQID: t.dlqID, Domain: t.domain})
		default:
			rep.DLQIDs = append(rep.DLQIDs, t.dlqID)
		}
	}
	rep.Count, rep.PendingCount = len(rep.DLQIDs), len(rep.Pending)
	if len(rep.DLQIDs) > maxReplyIDs || len(rep.Pending) > maxReplyIDs {
		// A reply fits a message: the counts say how many (hold.get lists
		// them all).
		rep.DLQIDs, rep.Pending, rep.Truncated = rep.DLQIDs[:min(len(rep.DLQIDs), maxReplyIDs)], rep.Pending[:min(len(rep.Pending), maxReplyIDs)], true
	}
	return rep, nil
}

// maxReplyIDs bounds the dlq ids of each list of hold.place's answer.
const maxReplyIDs = 1000

// stored refuses a hold of events one of which is not stored (NOT_FOUND,
// nothing placed: a set is held whole or not at all).
func (p *Holds) stored(ctx context.Context, ids []string) error {
	missing, n := "", 0
	var mu sync.Mutex
	var failed error
	sem := make(chan struct{}, appenders)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := p.cfg.Chains.Last(ctx, domain.DomainOfID(id), id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, chain.ErrNotFound):
				if n++; missing == "" || id < missing {
					missing = id
				}
			case err != nil:
				failed = err
			}
		})
	}
	wg.Wait()
	switch {
	case failed != nil:
		return fmt.Errorf("auditor: read chain: %w", failed)
	case n == 1 && len(ids) == 1:
		return api.Errorf(api.ErrNotFound, "no quarantine chain has this dlq id")
	case n > 0:
		return api.Errorf(api.ErrNotFound, "%d of the %d events have no quarantine chain (%s among them): nothing is held", n, len(ids), missing)
	}
	return nil
}

// chainRef names a chain.
type chainRef struct{ domain, dlqID string }

// targets returns the stored chains target holds: its events, or those
// a scan of QUARANTINE up to its last sequence now finds matching it
// (targetScan; a chain stored later is the live view's to match).
func (p *Holds) targets(ctx context.Context, t api.HoldTarget) ([]chainRef, error) {
	switch {
	case t.DLQID != "":
		return []chainRef{{domain.DomainOfID(t.DLQID), t.DLQID}}, nil
	case t.DLQIDs != nil:
		out := make([]chainRef, 0, len(t.DLQIDs))
		for _, id := range slices.Sorted(slices.Values(t.DLQIDs)) {
			out = append(out, chainRef{domain.DomainOfID(id), id})
		}
		return out, nil
	}
	sc, err := newTargetScan(t)
	if err != nil {
		return nil, err
	}
	if err := p.readScan(ctx, sc); err != nil {
		return nil, err
	}
	return sc.matched(), nil
}

// targetScan finds the chains a party or filter hold holds in
// QUARANTINE: each chain as its last record states it (party, code) with
// the identifiers of its first (its listed ones and those its verbatim
// payload names: hold.PayloadIdentifiers). It reads on from where it
// stopped, so a placing reads the stream once (before it is placed, to
// refuse a hold matching nothing; after, the records stored meanwhile).
type targetScan struct {
	match   hold.Matcher
	withIDs bool
	filter  string
	subs    map[string]*hold.Subject
	next    uint64 // the first sequence not read (0: none read)
}

// newTargetScan starts a scan for target t (a party or a filter).
func newTargetScan(t api.HoldTarget) (*targetScan, error) {
	match, err := hold.Compile(t)
	if err != nil {
		return nil, err
	}
	sc := &targetScan{match: match, withIDs: t.Filter != nil && t.Filter.HasIdentifiers(), filter: subjects.QuarantineAll,
		subs: map[string]*hold.Subject{}}
	if t.Filter != nil && t.Filter.Domain != "" && read.ValidToken(t.Filter.Domain) {
		sc.filter = "quarantine." + t.Filter.Domain + ".>"
	}
	return sc, nil
}

// readScan reads QUARANTINE's records sc has not read, up to its last
// sequence now.
func (p *Holds) readScan(ctx context.Context, sc *targetScan) error {
	info, err := p.quarantine.Info(ctx)
	if err != nil {
		return err
	}
	from := max(sc.next, info.State.FirstSeq)
	if info.State.Msgs == 0 || info.State.LastSeq < from {
		return nil
	}
	_, _, err = read.Scan(ctx, p.cfg.JS, subjects.QuarantineStream, sc.filter, from, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
		sc.add(m.Data)
		return true
	})
	if err != nil {
		return err
	}
	sc.next = info.State.LastSeq + 1
	return nil
}

// add notes one stored record.
func (sc *targetScan) add(raw []byte) {
	h, err := chain.DecodeHead(raw)
	if err != nil {
		return
	}
	sub := sc.subs[h.DLQID]
	if sub == nil {
		s := hold.FromHead(h)
		if sc.withIDs && h.Index == 0 {
			okey, party, ids := hold.PayloadIdentifiers(h.Domain, hold.RecordPayload(raw))
			s.Chain = hold.Merge(s.Chain, okey, party, ids)
		}
		sc.subs[h.DLQID] = &s
		return
	}
	// The last record decides the party and the code.
	if h.PartyID != "" {
		sub.PartyID, sub.Chain.PartyID = h.PartyID, h.PartyID
	}
	if h.OrderingKey != "" {
		sub.Chain.OrderingKey = h.OrderingKey
	}
	sub.ErrorCode = h.ErrorCode
}

// matched returns the chains read that match, sorted by dlq id.
func (sc *targetScan) matched() []chainRef {
	var out []chainRef
	for id, sub := range sc.subs {
		if sc.match(*sub) {
			out = append(out, chainRef{sub.Domain, id})
		}
	}
	slices.SortFunc(out, func(a, b chainRef) int { return strings.Compare(a.dlqID, b.dlqID) })
	return out
}

// Two-person approval of a lift (package approval, ActionHoldLift): when
// the policy in force names it (the default does), hold.lift lifts
// nothing: it asks the redriver, the approval owner and the only writer
// of APPROVALS, to store a pending approval (approval.hold_lift) and
// answers APPROVAL_REQUIRED with it. An approver other than the requester signs it
// at the redriver (approval.approve, with their signed decision), which executes
// approvals: it asks hold.lift.approved here with the approval's id, a
// subject of the services' account that no person's account imports. The
// lift is done only for an approval read from APPROVALS as approved, of
// kind hold_lift, for that hold, not executed, carrying its approver's
// signed decision, which the people registry accepts, matching its
// request and decision in AUDIT, and whose request carries the
// requester's own signed lift of the hold as it stands; it is the requester's
// lift (the hold's LiftedBy, the chains' hold_lifted records), with the
// approval and its signer kept in the hold (LiftApprovalID,
// LiftApprovedBy) and its AUDIT action; the signature itself is the
// approval's AUDIT action. Without a signed approval no path lifts a
// hold the policy holds for a second person: hold.lift refuses, and
// hold.lift.approved finds no proven approval (no service holds a key
// that signs a person's decision, issue #38).
//
// Every lift is the decision of its person: hold.lift carries the
// requester's signed decision (api.HoldLiftRequest.Signed, built with
// approval.ForHold over the request and the hold as read), checked
// against the people registry before anything is lifted or asked for.

// Lift lifts a legal hold (hold.lift) by the authenticated caller and
// appends the lift to every chain that carries it; when the approval
// policy names hold lifts it lifts nothing and answers APPROVAL_REQUIRED
// with the pending approval it created.
func (p *Holds) Lift(ctx context.Context, req api.HoldLiftRequest) (api.HoldReply, error) {
	who, err := p.holder(ctx, api.HoldLift)
	if err != nil {
		return api.HoldReply{}, err
	}
	// The hold must be liftable (NOT_FOUND, NOT_PLACED) before anyone is
	// asked to approve its lift.
	cur, err := p.queue.Store().Get(ctx, req.ID)
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	if cur.Status != api.HoldActive || cur.CaseID != req.CaseID {
		return api.HoldReply{}, holdErr(fmt.Errorf("%w: %s", hold.ErrNotPlaced, req.ID))
	}
	if err := p.signedLift(ctx, req, cur, who, false); err != nil {
		return api.HoldReply{}, err
	}
	if err := p.requireLiftApproval(ctx, who, req); err != nil {
		return api.HoldReply{}, err
	}
	h, err := p.queue.Store().LiftSigned(ctx, req.ID, req.CaseID, req.Reason, who, req.Signed, p.cfg.Now())
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return p.lifted(ctx, h)
}

// requireLiftApproval returns nil when the policy in force lets who lift
// at once, else an APPROVAL_REQUIRED *api.Error carrying the pending
// approval the redriver created. The auditor writes no approval: the
// redriver, the approval owner, alone writes APPROVALS
// (api.ApprovalHoldLift). It fails closed: a redriver that does not
// answer refuses the lift.
func (p *Holds) requireLiftApproval(ctx context.Context, who access.Identity, req api.HoldLiftRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return api.Wrap(api.ErrInternal, err, "the request could not be encoded")
	}
	_, err = endpoint.Call[api.ApprovalHoldLiftRequest, api.ApprovalReply](ctx, p.cfg.NC, api.ApprovalHoldLift, api.ApprovalHoldLiftRequest{
		HoldID: req.ID, Request: body, Requester: who.User, RequesterRole: string(who.Role), Reason: req.Reason})
	if e := api.AsError(err); e != nil && e.Code == api.ErrApprovalRequired && e.Approval != nil {
		p.cfg.Log.Info("APPROVAL_REQUIRED", "approval_id", e.Approval.ID, "action", e.Approval.Action, "hold_id", req.ID, "user", who.User)
		return e
	}
	if err != nil && api.AsError(err) == nil {
		return api.Wrap(api.ErrUnavailable, err, "the approval owner (the redriver) did not answer: the lift is refused; retry")
	}
	return err
}

// LiftApproved executes signed approval req.ApprovalID of a hold lift
// (hold.lift.approved: the redriver's request; no person's account
// imports the subject, and a request that carries a person is refused).
// The approval must be approved, of kind hold_lift, for the hold its
// request names; the hold is lifted as the requester. A repeat (the
// redriver retrying before it marked the approval executed) finds the
// hold lifted by this approval and completes the lift's records.
func (p *Holds) LiftApproved(ctx context.Context, req api.HoldLiftApprovedRequest) (api.HoldReply, error) {
	if who, err := p.cfg.Caller(ctx); err == nil {
		return api.HoldReply{}, api.Errorf(api.ErrForbidden, "%s may not execute approvals: the redriver does", who.User)
	}
	a, err := p.approvals.Get(ctx, req.ApprovalID)
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
	// Only a decision its approver signed, recorded in AUDIT with its
	// request, lifts the hold.
	if err := p.approvals.Proven(ctx, a); err != nil {
		p.cfg.Log.Error("approved hold lift refused", "approval_id", a.ID, "hold_id", a.HoldID, "code", approval.Code(err))
		return api.HoldReply{}, approval.APIError(err)
	}
	// And the requester's own signed lift of the hold as it stands (a
	// repeat finds it lifted by this approval: checked the first time).
	if cur, err := p.queue.Store().Get(ctx, lift.ID); err == nil && cur.Status == api.HoldActive {
		requester := access.Identity{User: a.Requester, Role: access.Role(a.RequesterRole)}
		if err := p.signedLift(ctx, lift, cur, requester, true); err != nil {
			return api.HoldReply{}, err
		}
	}
	sig, err := approval.Signature(a)
	if err != nil {
		return api.HoldReply{}, approval.APIError(err)
	}
	requester := access.Identity{User: a.Requester, Role: access.Role(a.RequesterRole)}
	h, err := p.queue.Store().LiftApproved(ctx, lift.ID, lift.CaseID, lift.Reason, requester, hold.Approval{ID: a.ID, Approver: sig.Approver, Signed: lift.Signed}, p.cfg.Now())
	if errors.Is(err, hold.ErrNotPlaced) {
		if cur, gerr := p.queue.Store().Get(ctx, lift.ID); gerr == nil && cur.LiftApprovalID == a.ID {
			h, err = cur, nil // a repeat: lifted by this approval
		}
	}
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return p.lifted(ctx, h)
}

// signedLift checks who's signed decision to lift hold cur by req
// (api.DecisionLift of the request, decision.ForHold; issue #38):
// asked now (CheckSigned), or, recorded in an approval's request
// (CheckRecorded), as of its time. A refusal is DECISION_UNSIGNED.
func (p *Holds) signedLift(ctx context.Context, req api.HoldLiftRequest, cur api.Hold, who access.Identity, recorded bool) error {
	person, role := approval.PersonRole(who)
	req.ID = cur.ID
	want := decision.ForHold(req, person, role, time.Time{})
	var err error
	if recorded {
		err = approval.CheckRecorded(ctx, p.decisions, want, req.Signed)
	} else {
		err = approval.CheckSigned(ctx, p.decisions, want, req.Signed, p.cfg.Now())
	}
	if err != nil {
		p.cfg.Log.Warn("DECISION_UNSIGNED", "hold_id", cur.ID, "user", who.User, "code", approval.Code(err))
		return approval.APIError(err)
	}
	return nil
}

// lifted completes lifted hold h: its AUDIT action and the lift appended
// to every chain that carries it.
func (p *Holds) lifted(ctx context.Context, h api.Hold) (api.HoldReply, error) {
	p.queue.Set(h)
	p.cfg.Log.Info("legal hold lifted", "hold_id", h.ID, "case_id", h.CaseID, "user", h.LiftedBy, "approval_id", h.LiftApprovalID)
	if err := p.audit(ctx, h, hold.AuditLifted); err != nil {
		return api.HoldReply{}, err
	}
	// Every record stored so far applied: the chains carrying the hold.
	info, err := p.quarantine.Info(ctx)
	if err != nil {
		return api.HoldReply{}, fmt.Errorf("auditor: %w", err)
	}
	if err := p.cfg.View.WaitFor(ctx, info.State.LastSeq); err != nil {
		return api.HoldReply{}, err
	}
	rep := api.HoldReply{HeldHold: api.HeldHold{Hold: h, DLQIDs: []string{}}}
	for _, ref := range p.cfg.View.HeldChains(h.ID) {
		if err := Append(ctx, p.cfg.Chains, p.cfg.NC, h, record.KindHoldLifted, ref.Domain, ref.DLQID); err != nil {
			p.cfg.Log.Error("legal hold lift not appended; retried", "hold_id", h.ID, "dlq_id", ref.DLQID, "err", err)
			rep.Failed = append(rep.Failed, ref.DLQID)
			p.queue.Add(Work{Kind: Lift, HoldID: h.ID, DLQID: ref.DLQID, Domain: ref.Domain})
			continue
		}
		rep.DLQIDs = append(rep.DLQIDs, ref.DLQID)
	}
	return rep, nil
}

// held is h with the chains that carry it now.
func (p *Holds) held(h api.Hold) api.HeldHold {
	out := api.HeldHold{Hold: h, DLQIDs: []string{}, Pending: p.queue.Pending(h.ID)}
	for _, ref := range p.cfg.View.HeldChains(h.ID) {
		out.DLQIDs = append(out.DLQIDs, ref.DLQID)
	}
	out.Count, out.PendingCount = len(out.DLQIDs), len(out.Pending)
	return out
}

// Get returns a hold and the chains it holds (hold.get).
func (p *Holds) Get(ctx context.Context, req api.HoldGetRequest) (api.HoldReply, error) {
	h, err := p.queue.Store().Get(ctx, req.ID)
	if err != nil {
		return api.HoldReply{}, holdErr(err)
	}
	return api.HoldReply{HeldHold: p.held(h)}, nil
}

// List lists the holds, newest first, each with how many chains it holds
// and the first api.MaxListedHoldIDs of them (hold.list).
func (p *Holds) List(ctx context.Context, req api.HoldListRequest) (api.HoldListReply, error) {
	all, err := p.queue.Store().All(ctx)
	if err != nil {
		return api.HoldListReply{}, holdErr(err)
	}
	rep := api.HoldListReply{Holds: []api.HeldHold{}}
	for _, h := range all {
		if h.Status != api.HoldActive && !req.IncludeLifted {
			continue
		}
		out := p.held(h)
		if len(out.DLQIDs) > api.MaxListedHoldIDs || len(out.Pending) > api.MaxListedHoldIDs {
			out.Truncated = true
			out.DLQIDs = out.DLQIDs[:min(len(out.DLQIDs), api.MaxListedHoldIDs)]
			out.Pending = out.Pending[:min(len(out.Pending), api.MaxListedHoldIDs)]
		}
		rep.Holds = append(rep.Holds, out)
	}
	return rep, nil
}
