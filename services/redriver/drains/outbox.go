package drains

import (
	"context"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/services/redriver/outbox"
	"github.com/deadletter/deadletter/shared/api"
)

// The audit trail of drains is never best effort: see package outbox.
// The Runner keeps what needs its running drains: writing an event at
// once, clearing its mark in a running drain, the pass over DRAINS.

// auditDrain writes a drain's event (n, its place in DrainState.Events,
// from 1) to AUDIT as an api.AuditAction on subjects.AuditAction("drain",
// id), and clears its Unrecorded mark. A refusal leaves the event to the
// outbox, woken at once. It reports whether the event is in AUDIT.
func (r *Runner) auditDrain(id string, ev api.DrainEvent, n int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), outbox.AuditTimeout)
	defer cancel()
	if err := outbox.Record(ctx, r.cfg.JS, id, ev, n, false); err != nil {
		r.cfg.Log.Warn("DRAIN_ACTION_UNRECORDED: kept in the drain's outbox, retried until written", "drain_id", id,
			"action", ev.Action, "event", n, "err", err)
		r.outbox.Kick()
		return false
	}
	r.markRecorded(ctx, id, ev, n)
	return true
}

// markRecorded clears the Unrecorded mark of the drain's n-th event: in
// its run when it runs here (saved at once), else in DRAINS by a
// compare-and-set. A mark left set (a lost race, DRAINS unreachable) is
// found by the outbox, which finds the event in AUDIT and clears it then.
func (r *Runner) markRecorded(ctx context.Context, id string, ev api.DrainEvent, n int) {
	r.mu.Lock()
	d, local := r.running[id]
	r.mu.Unlock()
	if local {
		select {
		case <-d.done:
			local = false
		default:
		}
	}
	var err error
	if local {
		cleared := false
		d.setStatus(func(st *api.DrainState) { cleared = outbox.ClearMark(st, ev, n) })
		if cleared {
			err = r.save(d)
		}
	} else {
		err = outbox.ClearStored(ctx, r.kv, id, ev, n)
	}
	if err != nil {
		r.cfg.Log.Warn("drain event recorded; its mark not cleared yet", "drain_id", id, "event", n, "err", err)
		r.outbox.Kick()
	}
}

// RunOutbox passes over DRAINS at start, when woken, every outbox.Retry
// while an event waits and every DrainLease otherwise, until ctx ends.
func (r *Runner) RunOutbox(ctx context.Context) { r.outbox.Run(ctx, r.cfg.DrainLease, r.FlushOutbox) }

// FlushOutbox writes every drain event marked Unrecorded to AUDIT (once)
// and clears its mark; it returns how many are still unrecorded (also the
// metric).
func (r *Runner) FlushOutbox(ctx context.Context) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	drains, err := listDrains(lctx, r.cfg.JS)
	cancel()
	if err != nil {
		return 0, err
	}
	left := 0
	for _, d := range drains {
		if d.err != nil {
			continue
		}
		for i, ev := range d.state.Events {
			if !ev.Unrecorded {
				continue
			}
			ectx, cancel := context.WithTimeout(ctx, outbox.AuditTimeout)
			if err := outbox.Record(ectx, r.cfg.JS, d.key, ev, i+1, true); err != nil {
				cancel()
				left++
				r.cfg.Log.Warn("DRAIN_ACTION_UNRECORDED", "drain_id", d.key, "action", ev.Action, "event", i+1, "err", err)
				continue
			}
			r.markRecorded(ectx, d.key, ev, i+1)
			cancel()
			r.cfg.Log.Info("drain action recorded from the outbox", "drain_id", d.key, "action", ev.Action, "event", i+1)
		}
	}
	r.cfg.Metrics.Unrecorded.Set(float64(left))
	if left > 0 {
		return left, fmt.Errorf("redriver: %d drain events not in AUDIT", left)
	}
	return 0, nil
}
