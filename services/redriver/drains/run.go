package drains

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/services/redriver/guard"
	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/retry"
)

// drainRun is a drain running on this instance. Its counters are atomics
// (workers update them); its stored status is written to DRAINS at every
// checkpoint by CAS on the entry's revision.
type drainRun struct {
	id  string
	req api.DrainStartRequest

	ctx    context.Context
	cancel context.CancelFunc
	// stopCtx ends when the drain must stop dispatching (cancel, or ctx
	// done); replays in flight finish with ctx.
	stopCtx context.Context
	stop    context.CancelFunc
	done    chan struct{}
	// userCancelled is set by drain.cancel (the drain ends cancelled);
	// a shutdown cancels ctx without it (the drain stays running in
	// DRAINS and is resumed).
	userCancelled atomic.Bool
	// lost is set when another instance took the drain over.
	lost atomic.Bool
	// paused is set when the canary or the failure window paused the
	// drain (it stops dispatching and ends paused).
	paused atomic.Bool
	// window is the drain's failure window (nil: no failure guard).
	window *guard.Window

	mu     sync.Mutex
	stored api.DrainState // status fields not held in atomics
	rev    uint64
	// heldBy names the blockers holding heldByEarlier, underHold the
	// events under a legal hold (under mu).
	heldBy, underHold []api.Blocker
	// holds is the drain's view of the active legal holds (set by
	// drainOnce).
	holds *holdCache

	selected, replayed, committed, skippedDup, replayFailed, poisoned atomic.Int64
	held, heldByEarlier, heldByHold, pending, skipped, errs           atomic.Int64
	inFlight, maxInFlight                                             atomic.Int64
	meter                                                             rateMeter
}

// newDrainID returns a KV-safe drain id: "drain-<UTC time>-<random hex>".
func newDrainID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "drain-" + now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// validDrainID reports whether id can be a DRAINS key.
func validDrainID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// newRun prepares the runtime of a stored drain status.
func (r *Runner) newRun(st api.DrainState, rev uint64) *drainRun {
	ctx, cancel := context.WithCancel(r.ctx)
	d := &drainRun{id: st.DrainID, req: st.Request, ctx: ctx, cancel: cancel, done: make(chan struct{}), stored: st, rev: rev,
		window: guard.NewWindow(st.Request)}
	d.stopCtx, d.stop = context.WithCancel(ctx)
	c := st.DrainCounts
	d.selected.Store(int64(c.Selected))
	d.replayed.Store(int64(c.Replayed))
	d.committed.Store(int64(c.Committed))
	d.skippedDup.Store(int64(c.SkippedDuplicate))
	d.replayFailed.Store(int64(c.ReplayFailed))
	d.poisoned.Store(int64(c.Poisoned))
	d.held.Store(int64(c.Held))
	d.heldByEarlier.Store(int64(c.HeldByEarlier))
	d.heldByHold.Store(int64(c.HeldByHold))
	d.heldBy = slices.Clone(st.HeldBy)
	d.underHold = slices.Clone(st.UnderHold)
	d.pending.Store(int64(c.Pending))
	d.skipped.Store(int64(c.Skipped))
	d.errs.Store(int64(c.Errors))
	d.maxInFlight.Store(int64(st.MaxInFlight))
	return d
}

// userCancel stops the drain for good: nothing new is dispatched, the
// replays in flight finish, and it ends cancelled.
func (d *drainRun) userCancel() {
	d.userCancelled.Store(true)
	d.stop()
}

// snapshot returns the drain's current status.
func (d *drainRun) snapshot() api.DrainState {
	d.mu.Lock()
	st := d.stored
	st.HeldBy = slices.Clone(d.heldBy)
	st.UnderHold = slices.Clone(d.underHold)
	d.mu.Unlock()
	st.DrainCounts = api.DrainCounts{
		Selected: int(d.selected.Load()), Replayed: int(d.replayed.Load()), Committed: int(d.committed.Load()),
		SkippedDuplicate: int(d.skippedDup.Load()), ReplayFailed: int(d.replayFailed.Load()), Poisoned: int(d.poisoned.Load()),
		Held: int(d.held.Load()), HeldByEarlier: int(d.heldByEarlier.Load()), HeldByHold: int(d.heldByHold.Load()),
		Pending: int(d.pending.Load()), Skipped: int(d.skipped.Load()), Errors: int(d.errs.Load()),
	}
	st.Remaining = max(0, st.Selected-st.Done())
	st.MaxInFlight = int(d.maxInFlight.Load())
	st.CurrentRate = d.meter.rate(time.Now())
	return st.WithOutcome()
}

// setStatus changes the stored status fields under the lock.
func (d *drainRun) setStatus(fn func(st *api.DrainState)) {
	d.mu.Lock()
	fn(&d.stored)
	d.mu.Unlock()
}

// save writes the drain's status to DRAINS, conditional on the revision
// last written. A drain cancelled elsewhere is cancelled here; a drain
// another instance took over is stopped (its status left to that owner).
func (r *Runner) save(d *drainRun) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 3 {
		d.setStatus(func(st *api.DrainState) { st.Heartbeat = time.Now().UTC() })
		st := d.snapshot()
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		d.mu.Lock()
		rev := d.rev
		d.mu.Unlock()
		nrev, err := r.kv.Update(ctx, d.id, b, rev)
		if err == nil {
			d.mu.Lock()
			d.rev = nrev
			d.mu.Unlock()
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("redriver: save drain: %w", err)
		}
		e, err := r.kv.Get(ctx, d.id)
		if err != nil {
			return fmt.Errorf("redriver: save drain: %w", err)
		}
		var cur api.DrainState
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			return fmt.Errorf("redriver: drain %s unreadable: %w", d.id, err)
		}
		d.mu.Lock()
		d.rev = e.Revision()
		d.mu.Unlock()
		switch {
		case cur.Owner != r.cfg.InstanceID:
			d.lost.Store(true)
			d.cancel()
			return nil
		case cur.Status == api.DrainCancelled:
			if !d.userCancelled.Load() {
				d.setStatus(func(st *api.DrainState) {
					st.Status, st.FinishedAt, st.CancelledBy = cur.Status, cur.FinishedAt, cur.CancelledBy
				})
				d.userCancel()
			}
		}
	}
	return errors.New("redriver: drain status kept changing")
}

// execute runs a drain: select (streaming), then replay lane by lane.
func (r *Runner) execute(d *drainRun, resumed bool) {
	defer r.wg.Done()
	defer close(d.done)
	defer func() {
		r.mu.Lock()
		delete(r.running, d.id)
		r.mu.Unlock()
	}()
	stopCk := make(chan struct{})
	var ckDone sync.WaitGroup
	ckDone.Add(1)
	go func() {
		defer ckDone.Done()
		t := time.NewTicker(min(time.Second, r.cfg.DrainLease/3))
		defer t.Stop()
		for {
			select {
			case <-stopCk:
				return
			case <-t.C:
				if err := r.save(d); err != nil {
					r.cfg.Log.Warn("drain checkpoint failed", "drain_id", d.id, "err", err)
				}
			}
		}
	}()
	err := r.drainOnce(d, resumed)
	close(stopCk)
	ckDone.Wait()
	if d.lost.Load() {
		r.cfg.Log.Warn("drain taken over by another instance", "drain_id", d.id)
		return
	}
	final := ""
	switch {
	case d.userCancelled.Load():
		final = api.DrainCancelled
	case d.paused.Load():
		// Paused: it stays so in DRAINS until drain.resume or cancel.
	case d.ctx.Err() != nil:
		// Shutting down: the drain stays running in DRAINS and is resumed.
	case err != nil:
		final = api.DrainFailed
	default:
		final = api.DrainCompleted
		if resumed {
			// Events of the first selection that the resumed run found
			// neither settled by this drain (resumeFromChains) nor
			// selectable again were resolved by someone else meanwhile.
			if rest := d.selected.Load() - int64(d.snapshot().Done()); rest > 0 {
				d.skipped.Add(rest)
			}
		}
	}
	if final != "" {
		now := time.Now().UTC()
		d.setStatus(func(st *api.DrainState) {
			st.Status, st.FinishedAt = final, &now
			if err != nil && final == api.DrainFailed {
				st.Error = err.Error()
			}
		})
		r.cfg.Metrics.Drains.WithLabelValues(final).Inc()
		// Its end goes to REQUESTS before DRAINS says it (write-once:
		// a drain whose entry is lost is restored finished, never
		// resumed). Not recorded, the drain still ends: verify reports
		// the entry, and a restore resumes it (it finds nothing left to
		// replay but what it held).
		if err := r.writeEnd(d.snapshot()); err != nil {
			r.cfg.Log.Warn("DRAIN_END_UNRECORDED", "drain_id", d.id, "status", final, "err", err)
		}
	}
	if err := r.save(d); err != nil {
		r.cfg.Log.Warn("drain final save failed", "drain_id", d.id, "err", err)
	}
	snap := d.snapshot()
	r.cfg.Log.Info("DRAIN_"+map[bool]string{true: "STOPPED", false: "FINISHED"}[final == ""], "drain_id", d.id, "status", snap.Status,
		"selected", snap.Selected, "committed", snap.Committed, "skipped_duplicate", snap.SkippedDuplicate,
		"replay_failed", snap.ReplayFailed, "poisoned", snap.Poisoned, "held", snap.Held, "pending", snap.Pending)
}

// drainOnce selects and replays; it returns when every lane is done or the
// drain's context ends.
func (r *Runner) drainOnce(d *drainRun, resumed bool) error {
	ctx := d.ctx
	f := d.req.Filter
	started := d.snapshot().StartedAt
	// The active legal holds: read once for the selection, then again by
	// the replays when older than holdsRefresh (never once per event).
	d.holds = &holdCache{store: r.holds}
	holds, err := d.holds.get(ctx)
	if err != nil {
		return fmt.Errorf("redriver: read the legal holds: %w", err)
	}
	sl := &selection.Selector{JS: r.cfg.JS, Seed: maphash.MakeSeed(), IgnoreOrder: d.req.IgnoreOrder, Holds: holds}
	if resumed {
		sl.ResumeOf = d.id
	}
	// Only events first seen before the drain started: a resumed drain
	// does not grow with events quarantined since. A resumed drain's limit
	// is applied after its earlier outcomes are known (below).
	limit := f.Limit
	if resumed {
		limit = 0
	}
	sel, err := sl.Run(ctx, f, started, limit)
	if err != nil {
		return err
	}
	if !resumed {
		d.selected.Store(int64(sel.Selected))
	} else {
		done := d.resumeFromChains(sel.Tallied())
		if f.Limit > 0 {
			sel.Truncate(max(0, f.Limit-done))
		}
	}
	// The selected events under a legal hold are held from the start.
	d.setStatus(func(st *api.DrainState) { st.Holds = sel.HoldCounts() })
	d.held.Add(int64(sel.HeldByHold))
	d.heldByHold.Add(int64(sel.HeldByHold))
	for _, b := range sel.UnderHold {
		d.noteUnderHold(b)
	}
	d.setStatus(func(st *api.DrainState) { st.Status = api.DrainRunning })
	if err := r.save(d); err != nil {
		r.cfg.Log.Warn("drain checkpoint failed", "drain_id", d.id, "err", err)
	}
	r.cfg.Log.Info("DRAIN_RUNNING", "drain_id", d.id, "selected", sel.Selected, "items", len(sel.Items), "resumed", resumed)

	limiter := r.cfg.limiterOf(d.req)
	workers := r.cfg.concurrencyOf(d.req)
	if len(d.req.Ramp) > 0 && limiter != nil {
		// The ramp ends with the drain, however it ends.
		rctx, rcancel := context.WithCancel(d.stopCtx)
		defer rcancel()
		go guard.Ramp(rctx, limiter, d.req.Ramp, guard.RampHold(d.req), r.cfg.finalRate(d.req))
	}
	// The canary's lanes (by their first index): whether their head was
	// resolved (the rest of the lane may go on).
	var canary map[int]bool
	if d.req.Canary > 0 && !d.snapshot().CanaryDone {
		var goOn bool
		if canary, goOn = r.runCanary(d, sel, sel.Canary(d.req.Canary), limiter, workers); !goOn {
			return nil
		}
	}
	lanes := make(chan laneWork)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range lanes {
				r.runLane(d, sel, w.items, limiter, w.held)
			}
		}()
	}
dispatch:
	for lo := 0; lo < len(sel.Items); {
		hi := sel.LaneEnd(lo)
		w := laneWork{items: sel.Items[lo:hi]}
		if ok, ran := canary[lo]; ran {
			// The canary replayed the lane's head.
			w.items, w.held = w.items[1:], !ok
		}
		lo = hi
		if len(w.items) == 0 {
			continue
		}
		select {
		case lanes <- w:
		case <-d.stopCtx.Done():
			break dispatch
		}
	}
	close(lanes)
	wg.Wait()
	return nil
}

// laneWork is a lane to run: its events, and whether they are held from
// the start (the canary's replay of the lane's head did not resolve it).
type laneWork struct {
	items []selection.Item
	held  bool
}

// resumeFromChains sets a resumed drain's counters from what the chains
// say it did: its last checkpoint may be behind (replays finished after it
// and before the crash are in the chains, not in the stored counters).
// The settled outcomes are taken from the chains; the rest (held,
// pending, skipped, errors) are counted again by this run, whose
// selection holds those events again. It returns the events settled.
func (d *drainRun) resumeFromChains(c selection.ResumeCounts) int {
	d.replayed.Store(int64(c.Replayed))
	d.committed.Store(int64(c.Committed))
	d.skippedDup.Store(int64(c.SkippedDup))
	d.replayFailed.Store(int64(c.ReplayFailed))
	d.poisoned.Store(int64(c.Poisoned))
	for _, n := range []*atomic.Int64{&d.held, &d.heldByEarlier, &d.heldByHold, &d.pending, &d.skipped, &d.errs} {
		n.Store(0)
	}
	d.mu.Lock()
	d.heldBy, d.underHold = nil, nil
	d.mu.Unlock()
	return c.Done()
}

// holdBy counts an event held by the unselected blocker b and names b
// (at most api.MaxHeldBy blockers are named).
func (d *drainRun) holdBy(b api.Blocker) {
	d.heldByEarlier.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.heldBy {
		if d.heldBy[i].DLQID == b.DLQID {
			d.heldBy[i].Holds++
			return
		}
	}
	if len(d.heldBy) < api.MaxHeldBy {
		b.Holds = 1
		d.heldBy = append(d.heldBy, b)
	}
}

// noteUnderHold names b, an event under a legal hold, in the drain's
// status (at most api.MaxHeldBy).
func (d *drainRun) noteUnderHold(b api.Blocker) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.underHold) < api.MaxHeldBy && !slices.ContainsFunc(d.underHold, func(u api.Blocker) bool { return u.DLQID == b.DLQID }) {
		d.underHold = append(d.underHold, b)
	}
}

// countHold counts one more event held by hold holdID (of case caseID)
// in the drain's status, copying the counts (a snapshot may hold them).
func (d *drainRun) countHold(holdID, caseID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	hc := slices.Clone(d.stored.Holds)
	if i := slices.IndexFunc(hc, func(h api.HoldCount) bool { return h.HoldID == holdID }); i >= 0 {
		hc[i].Records++
	} else {
		hc = append(hc, api.HoldCount{HoldID: holdID, CaseID: caseID, Records: 1})
	}
	d.stored.Holds = hc
}

// limiterOf returns the drain's token bucket (nil: no ceiling).
func (c Config) limiterOf(req api.DrainStartRequest) *rate.Limiter {
	r := float64(c.DefaultRatePerSecond)
	if req.RatePerSecond != nil {
		r = *req.RatePerSecond
	}
	if len(req.Ramp) > 0 {
		// The ramp's first step (or the drain's rate, when lower); ramp
		// raises it.
		return rate.NewLimiter(min(rate.Limit(req.Ramp[0]), c.finalRate(req)), max(1, req.Burst))
	}
	if r <= 0 || math.IsInf(r, 1) {
		return nil
	}
	return rate.NewLimiter(rate.Limit(r), max(1, req.Burst))
}

// concurrencyOf returns the drain's bound on replays in flight.
func (c Config) concurrencyOf(req api.DrainStartRequest) int {
	if req.MaxConcurrency > 0 {
		return req.MaxConcurrency
	}
	return c.DefaultConcurrency
}

// runLane replays one ordered lane: in event-time order, each replay waiting
// for the previous one's outcome. Once an event of the lane is unresolved
// (an unselected earlier event, one under a legal hold, a failed or pending
// replay), the rest of the lane is held (from the start when held is set).
func (r *Runner) runLane(d *drainRun, sel *selection.Selection, lane []selection.Item, limiter *rate.Limiter, held bool) {
	var blocker *api.Blocker // the event holding the lane, if named
	for _, it := range lane {
		if d.stopCtx.Err() != nil {
			return
		}
		if it.Blocker() {
			if !held {
				b := sel.BlockerOf(it)
				blocker = &b
			}
			held = true
			continue
		}
		if held {
			d.held.Add(1)
			if blocker != nil {
				d.holdBy(*blocker)
			}
			r.cfg.Metrics.Outcomes.WithLabelValues("held").Inc()
			continue
		}
		res, ok, done := r.replayItem(d, sel, it, limiter)
		if !done {
			return // interrupted: the event is selected again on resume
		}
		r.observeOutcome(d, res)
		if res.Code == api.ErrHeld {
			// A legal hold found at its turn: it holds the rest of the lane.
			_, id := sel.IDOf(it)
			b := api.Blocker{DLQID: id, Reason: api.ReasonLegalHold, HoldID: res.HoldID, CaseID: res.CaseID}
			d.noteUnderHold(b)
			d.countHold(res.HoldID, res.CaseID)
			blocker = &b
		}
		if !ok {
			held = true
		}
	}
}

// replayItem replays one selected event of drain d and counts its
// outcome: ok reports the event resolved (its lane may go on); done is
// false when the drain was stopped before the event had an outcome (it is
// selected again on resume, and not counted).
func (r *Runner) replayItem(d *drainRun, sel *selection.Selection, it selection.Item, limiter *rate.Limiter) (res replay.Result, ok, done bool) {
	dom, id := sel.IDOf(it)
	n := d.inFlight.Add(1)
	for {
		m := d.maxInFlight.Load()
		if n <= m || d.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	r.cfg.Metrics.InFlight.Inc()
	res = r.replayRetrying(d, dom, id, replay.Opts{
		DrainID: d.id, IncludeValidation: d.req.Filter.IncludeValidation, IgnoreOrder: d.req.IgnoreOrder,
		Actor: d.req.Actor, Reason: d.req.Reason, Limiter: limiter, LimiterCtx: d.stopCtx, Holds: d.holds.get,
		OnPublish: func() { d.replayed.Add(1); d.meter.add(time.Now()) },
	})
	r.cfg.Metrics.InFlight.Dec()
	d.inFlight.Add(-1)
	if d.stopCtx.Err() != nil && (res.Outcome == "" || res.Outcome == api.OutcomePending) {
		return res, false, false
	}
	ok = d.count(res)
	label := res.Outcome
	switch {
	case res.Code == api.ErrHeld:
		label = "held"
		r.cfg.Log.Info("held by a legal hold", "drain_id", d.id, "dlq_id", id, "hold_id", res.HoldID)
	case label == "":
		label = "error"
		r.cfg.Log.Warn("replay error", "drain_id", d.id, "dlq_id", id, "code", res.Code, "err", res.Err)
	}
	r.cfg.Metrics.Outcomes.WithLabelValues(label).Inc()
	return res, ok, true
}

// replayRetries bounds the retries of a replay that failed for a
// transient reason (a store or service unavailable or slow, a chain
// changing under concurrent writers); the waits double from
// replayRetryWait (package retry, randomised by ±50 %).
const replayRetries = 3

const replayRetryWait = time.Second

// replayRetrying replays one event of drain d, retrying a transient failure
// (api.ErrUnavailable, api.ErrConflict) a few times with back-off before it
// counts as an error that holds the lane. A retry is safe: replay reads the
// chain again, resumes a replay left redriving (same Nats-Msg-Id) and
// never re-publishes a committed key.
func (r *Runner) replayRetrying(d *drainRun, domain, id string, o replay.Opts) replay.Result {
	var res replay.Result
	// The waits (package retry) end when the drain stops; the replay
	// itself runs under the drain's context.
	_ = retry.Policy{Initial: replayRetryWait, Max: replayRetryWait << replayRetries}.Times(d.stopCtx, replayRetries+1,
		func(attempt int, _ error) {
			r.cfg.Metrics.Retries.Inc()
			r.cfg.Log.Warn("replay retry", "drain_id", d.id, "dlq_id", id, "code", res.Code, "attempt", attempt, "err", res.Err)
		},
		func(context.Context) error {
			res = r.cfg.Replayer.Replay(d.ctx, domain, id, o)
			if res.Outcome != "" || (res.Code != api.ErrUnavailable && res.Code != api.ErrConflict) {
				return nil
			}
			return errReplayTransient
		})
	return res
}

// errReplayTransient is a replay that failed for a transient reason
// (replayRetrying retries it).
var errReplayTransient = errors.New("redriver: replay failed for a transient reason")

// count adds a replay's replay.Result to the drain's counters and reports whether
// the lane may continue (the event is resolved).
func (d *drainRun) count(res replay.Result) bool {
	if res.Code == api.ErrHeld {
		d.held.Add(1)
		d.heldByHold.Add(1)
		return false
	}
	switch res.Outcome {
	case api.OutcomeReplayed:
		d.committed.Add(1)
		return true
	case api.OutcomeSkippedDuplicate:
		d.skippedDup.Add(1)
		return true
	case api.OutcomeResolvedElsewhere:
		d.skipped.Add(1)
		return true
	case api.OutcomeReplayFailed:
		d.replayFailed.Add(1)
	case api.OutcomePoisoned:
		d.poisoned.Add(1)
	case api.OutcomePending:
		d.pending.Add(1)
	case api.OutcomeNotRedrivable:
		if !res.Attempted {
			d.skipped.Add(1)
		}
	default:
		d.errs.Add(1)
	}
	return false
}

// rateMeter measures events per second over the last rateWindow: counts
// in rateBuckets buckets of rateBucket, divided by the time the window
// covers, which is shorter while the meter is younger than the window (a
// drain that started or resumed a second ago is not reported at a fifth of
// its pace).
type rateMeter struct {
	mu sync.Mutex
	// first is the time of the first event counted.
	first   time.Time
	buckets [rateBuckets]struct {
		slot int64
		n    int
	}
}

const (
	rateBucket  = 100 * time.Millisecond
	rateBuckets = 50 // rateWindow / rateBucket
	rateWindow  = rateBuckets * rateBucket
)

func (m *rateMeter) add(t time.Time) {
	slot := t.UnixNano() / int64(rateBucket)
	m.mu.Lock()
	if m.first.IsZero() {
		m.first = t
	}
	b := &m.buckets[slot%rateBuckets]
	if b.slot != slot {
		b.slot, b.n = slot, 0
	}
	b.n++
	m.mu.Unlock()
}

// rate returns the events per second over the last rateWindow (or since
// the first event, when later; at least a second).
func (m *rateMeter) rate(now time.Time) float64 {
	slot := now.UnixNano() / int64(rateBucket)
	lo := slot - rateBuckets + 1
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.first.IsZero() {
		return 0
	}
	n := 0
	for _, b := range m.buckets {
		if b.slot >= lo && b.slot <= slot {
			n += b.n
		}
	}
	start := time.Unix(0, lo*int64(rateBucket))
	if m.first.After(start) {
		start = m.first
	}
	span := max(now.Sub(start), time.Second)
	return float64(n) / span.Seconds()
}
