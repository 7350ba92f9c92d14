package drains

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/services/redriver/outbox"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
)

// TakeOver resumes the drains left running by this instance or by an
// owner whose heartbeat is older than DrainLease (CAS on the revision, so
// one instance wins).
func (r *Runner) TakeOver(ctx context.Context) {
	drains, err := listDrains(ctx, r.cfg.JS)
	if err != nil {
		r.cfg.Log.Warn("drains not listed", "err", err)
		return
	}
	for _, d := range drains {
		r.mu.Lock()
		_, local := r.running[d.key]
		full := len(r.running) >= r.cfg.MaxDrains
		r.mu.Unlock()
		if local || full || d.err != nil {
			continue
		}
		st := d.state
		if st.Status != api.DrainRunning && st.Status != api.DrainSelecting {
			continue
		}
		if st.Owner != r.cfg.InstanceID && time.Since(st.Heartbeat) < r.cfg.DrainLease {
			continue
		}
		if err := recordedStart(ctx, r.cfg.JS, st); err != nil {
			// Never run a filter its starter did not ask for: verify
			// reports the entry, a restore writes REQUESTS' back.
			r.cfg.Log.Error("DRAIN_START_UNRECORDED: not resumed", "drain_id", d.key, "err", err)
			continue
		}
		st.Resumed++
		st.Owner, st.Heartbeat = r.cfg.InstanceID, time.Now().UTC()
		b, _ := json.Marshal(st)
		rev, err := r.kv.Update(ctx, d.key, b, d.rev)
		if err != nil {
			continue // another instance took it
		}
		r.cfg.Log.Info("DRAIN_RESUMED", "drain_id", d.key, "status", st.Status)
		r.start(r.newRun(st, rev), true)
	}
}

// start runs a drain in the background.
func (r *Runner) start(d *drainRun, resumed bool) {
	r.mu.Lock()
	r.running[d.id] = d
	r.mu.Unlock()
	r.wg.Add(1)
	go r.execute(d, resumed)
}

// validateStart checks what a drain.start request's own Validate cannot:
// the instance's concurrency ceiling and the dlq ids' domains.
func (r *Runner) validateStart(req *api.DrainStartRequest) error {
	f := &req.Filter
	for i, id := range f.DLQIDs {
		dom, err := chainio.DomainOf(id)
		if err != nil {
			return api.BadField(fmt.Sprintf("filter.dlq_ids[%d]", i), "%v", err)
		}
		if f.Domain != "" && dom != f.Domain {
			return api.BadField(fmt.Sprintf("filter.dlq_ids[%d]", i), "not in filter.domain")
		}
	}
	if req.MaxConcurrency > r.cfg.MaxConcurrency {
		return api.BadField("max_concurrency", "must be 0..%d", r.cfg.MaxConcurrency)
	}
	return nil
}

// Start starts drain req as id (the caller; body the request as
// received, kept for an approval), or answers a dry run's plan.
func (r *Runner) Start(ctx context.Context, id access.Identity, body []byte, req api.DrainStartRequest) (api.DrainStartReply, error) {
	if err := r.validateStart(&req); err != nil {
		return api.DrainStartReply{}, err
	}
	if req.DryRun {
		plan, err := r.plan.planFor(ctx, req, true, "")
		if err != nil {
			return api.DrainStartReply{}, api.Wrap(api.ErrUnavailable, err, err.Error())
		}
		return api.DrainStartReply{Status: "dry_run", Plan: plan}, nil
	}
	// One start at a time on this instance: two overlapping drains
	// started together are not both let through (across instances the
	// redrive_requested CAS still replays each event once).
	r.startMu.Lock()
	defer r.startMu.Unlock()
	did := newDrainID(time.Now())
	if err := r.plan.refuseOverlap(ctx, req, did); err != nil {
		return api.DrainStartReply{}, err
	}
	if err := r.drainApproval(ctx, id, body, req); err != nil {
		return api.DrainStartReply{}, err
	}
	// The drain and its records name the caller, never the request's
	// free-text actor.
	req.Actor = id.User
	did, err := r.launchDrain(ctx, req, id, did)
	if err != nil {
		return api.DrainStartReply{}, err
	}
	return api.DrainStartReply{DrainID: did, Status: api.DrainSelecting}, nil
}

// drainApproval asks whether drain req, asked for by who, needs approval
// (nil when not; APPROVAL_REQUIRED with the pending approval else). The
// selection is counted (a plan) only when the policy has a rule on it.
func (r *Runner) drainApproval(ctx context.Context, who access.Identity, body []byte, req api.DrainStartRequest) error {
	p, err := r.cfg.Approvals.Policy(ctx)
	if err != nil {
		return err
	}
	a := approval.Action{Kind: api.ActionDrain, IgnoreOrder: req.IgnoreOrder}
	if p.Policy.DrainMaxSelected > 0 || p.Policy.DrainValidation {
		plan, err := r.plan.planFor(ctx, req, false, "")
		if err != nil {
			return api.Wrap(api.ErrUnavailable, err, err.Error())
		}
		a.Selected, a.IncludesValidation = plan.Selected, plan.ByClass[string(record.ClassValidation)] > 0
	}
	return r.cfg.Approvals.Require(ctx, who, a, approval.Request{Domain: req.Filter.Domain, Body: body, Reason: req.Reason})
}

// launchDrain stores drain req as drainID, started by who, and runs it. A
// drain already stored under drainID (an approved drain executed again) is
// not started twice: its id is returned.
func (r *Runner) launchDrain(ctx context.Context, req api.DrainStartRequest, who access.Identity, drainID string) (string, error) {
	r.mu.Lock()
	n := len(r.running)
	r.mu.Unlock()
	if n >= r.cfg.MaxDrains {
		return "", api.Errorf(api.ErrTooManyDrains, "this instance already runs %d drains", n)
	}
	now := time.Now().UTC()
	// The guard in force is stored with the request: the default one
	// unless the request names its own or turns it off.
	req = req.WithDefaultGuard()
	st := api.DrainState{
		DrainID: drainID, Status: api.DrainSelecting, Request: req,
		Owner: r.cfg.InstanceID, Heartbeat: now, StartedAt: now, StartedBy: who.User,
	}
	b, _ := json.Marshal(st)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Its start goes to REQUESTS first (write-once: the filter and
	// controls a lost or altered entry is restored from), then the entry.
	if err := writeStart(cctx, r.cfg.JS, st, b); err != nil {
		r.cfg.Log.Error("DRAIN_START_UNRECORDED", "drain_id", st.DrainID, "err", err)
		return "", api.Wrap(api.ErrUnavailable, err, "drain not started: its start could not be recorded in "+streams.RequestsStream)
	}
	rev, err := r.kv.Create(cctx, st.DrainID, b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return st.DrainID, nil
	}
	if err != nil {
		return "", api.Wrap(api.ErrUnavailable, err, "drain not stored: "+err.Error())
	}
	r.cfg.Log.Info("DRAIN_STARTED", "drain_id", st.DrainID, "actor", who.User, "role", string(who.Role))
	r.start(r.newRun(st, rev), false)
	return st.DrainID, nil
}

// statusOf returns a drain's status: live when it runs here, else stored.
func (r *Runner) statusOf(ctx context.Context, id string) (api.DrainState, uint64, error) {
	r.mu.Lock()
	d, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		return d.snapshot(), 0, nil
	}
	e, err := r.kv.Get(ctx, id)
	if err != nil {
		return api.DrainState{}, 0, err
	}
	var st api.DrainState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return api.DrainState{}, 0, err
	}
	st.Remaining = max(0, st.Selected-st.Done())
	return st.WithOutcome(), e.Revision(), nil
}

// CheckID refuses a drain id request without a well-formed id.
func CheckID(id string) error {
	if !validDrainID(id) {
		return api.BadField("drain_id", "is required: letters, digits, '-' and '_', at most 64")
	}
	return nil
}

// storeError classifies a DRAINS read error.
func storeError(err error) error {
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return api.Wrap(api.ErrNotFound, err, "no drain has this id")
	}
	return api.Wrap(api.ErrUnavailable, err, err.Error())
}

// State answers a drain's status: live when it runs here, else stored.
func (r *Runner) State(ctx context.Context, id string) (api.DrainState, error) {
	st, _, err := r.statusOf(ctx, id)
	if err != nil {
		return api.DrainState{}, storeError(err)
	}
	return st, nil
}

// Cancel cancels drain id as who: at once when it runs here, else by a
// CAS on its stored status that its owner sees at its next checkpoint.
func (r *Runner) Cancel(ctx context.Context, who access.Identity, id string) (api.DrainState, error) {
	r.mu.Lock()
	d, local := r.running[id]
	r.mu.Unlock()
	if local {
		ev := personEvent(api.ActionCancelled, who, "")
		first := false
		d.setStatus(func(st *api.DrainState) {
			if st.CancelledBy == "" {
				st.CancelledBy, first = who.User, true
				st.Events = append(st.Events, ev)
			}
		})
		d.userCancel()
		select {
		case <-d.done:
		case <-ctx.Done():
		}
		snap := d.snapshot()
		if first && r.auditDrain(id, ev, len(snap.Events)) {
			outbox.ClearMark(&snap, ev, len(snap.Events))
		}
		return snap, nil
	}
	for range 3 {
		st, rev, err := r.statusOf(ctx, id)
		if err != nil {
			return api.DrainState{}, storeError(err)
		}
		switch st.Status {
		case api.DrainCancelled:
			return st, nil
		case api.DrainCompleted, api.DrainFailed:
			return api.DrainState{}, api.Errorf(api.ErrInvalidTransition, "the drain already finished: %s", st.Status)
		}
		ev := personEvent(api.ActionCancelled, who, "")
		st.Status, st.FinishedAt, st.CancelledBy = api.DrainCancelled, &ev.At, who.User
		st.Events = append(st.Events, ev)
		b, _ := json.Marshal(st)
		if _, err := r.kv.Update(ctx, id, b, rev); err == nil {
			r.cfg.Log.Info("DRAIN_CANCELLED", "drain_id", id, "actor", who.User)
			if r.auditDrain(id, ev, len(st.Events)) {
				outbox.ClearMark(&st, ev, len(st.Events))
			}
			return st, nil
		}
	}
	return api.DrainState{}, api.Errorf(api.ErrConflict, "the drain's status kept changing; retry")
}

// Resume continues a paused drain as who: its stored status becomes
// running, owned by this instance, which runs it as a resumed drain (its
// counts are taken from the chains, each event replayed at most once by
// the drain); the resume is an event of the drain and an action in AUDIT.
// A drain that is not paused is refused (INVALID_TRANSITION).
func (r *Runner) Resume(ctx context.Context, who access.Identity, req api.DrainResumeRequest) (api.DrainState, error) {
	id := req.DrainID
	r.mu.Lock()
	d, local := r.running[id]
	r.mu.Unlock()
	if local {
		if !d.paused.Load() || d.userCancelled.Load() {
			return api.DrainState{}, api.Wrap(api.ErrInvalidTransition, errNotPaused, "the drain is not paused: "+d.snapshot().Status)
		}
		// Paused here: its replays in flight finish first.
		select {
		case <-d.done:
		case <-ctx.Done():
			return api.DrainState{}, api.Errorf(api.ErrUnavailable, "the drain is still pausing; retry")
		}
	}
	for range 3 {
		st, rev, err := r.statusOf(ctx, id)
		if err != nil {
			return api.DrainState{}, storeError(err)
		}
		if st.Status != api.DrainPaused {
			return api.DrainState{}, api.Wrap(api.ErrInvalidTransition, errNotPaused, "the drain is not paused: "+st.Status)
		}
		if err := recordedStart(ctx, r.cfg.JS, st); err != nil {
			r.cfg.Log.Error("DRAIN_START_UNRECORDED: not resumed", "drain_id", id, "err", err)
			if errors.Is(err, errStartUnrecorded) {
				return api.DrainState{}, api.Wrap(api.ErrConflict, err, "the drain's filter or starter is not the one it was started with: not resumed (audit.verify reports it; a rebuild restores it)")
			}
			return api.DrainState{}, api.Wrap(api.ErrUnavailable, err, "the drain's start could not be read: retry")
		}
		r.mu.Lock()
		n := len(r.running)
		r.mu.Unlock()
		if n >= r.cfg.MaxDrains {
			return api.DrainState{}, api.Errorf(api.ErrTooManyDrains, "this instance already runs %d drains", n)
		}
		ev := personEvent(api.ActionResumed, who, req.Reason)
		st.Status, st.Owner, st.Heartbeat = api.DrainRunning, r.cfg.InstanceID, ev.At
		st.Events = append(st.Events, ev)
		b, _ := json.Marshal(st)
		nrev, err := r.kv.Update(ctx, id, b, rev)
		if err != nil {
			continue
		}
		r.cfg.Log.Info("DRAIN_RESUMED_BY", "drain_id", id, "actor", who.User, "role", string(who.Role))
		r.start(r.newRun(st, nrev), true)
		if r.auditDrain(id, ev, len(st.Events)) {
			outbox.ClearMark(&st, ev, len(st.Events))
		}
		return st, nil
	}
	return api.DrainState{}, api.Errorf(api.ErrConflict, "the drain's status kept changing; retry")
}

// List lists the drains in DRAINS, those running here live.
func (r *Runner) List(ctx context.Context) (api.DrainListReply, error) {
	out := api.DrainListReply{Drains: []api.DrainState{}}
	drains, err := listDrains(ctx, r.cfg.JS)
	if err != nil {
		return api.DrainListReply{}, api.Wrap(api.ErrUnavailable, err, err.Error())
	}
	for _, d := range drains {
		r.mu.Lock()
		run, local := r.running[d.key]
		r.mu.Unlock()
		switch {
		case local:
			out.Drains = append(out.Drains, run.snapshot())
		case d.err == nil:
			st := d.state
			st.Remaining = max(0, st.Selected-st.Done())
			out.Drains = append(out.Drains, st.WithOutcome())
		}
	}
	sort.Slice(out.Drains, func(i, j int) bool { return out.Drains[i].StartedAt.Before(out.Drains[j].StartedAt) })
	return out, nil
}

// Status returns the live status of a drain running on this instance; ok
// is false when it does not run here.
func (r *Runner) Status(id string) (st api.DrainState, ok bool) {
	r.mu.Lock()
	d, ok := r.running[id]
	r.mu.Unlock()
	if !ok {
		return api.DrainState{}, false
	}
	return d.snapshot(), true
}
