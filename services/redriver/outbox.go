package redriver

import (
	"context"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/services/redriver/outbox"
	"github.com/deadletter/deadletter/shared/api"
)

// The audit trail of drains is never best effort: see package outbox.
// The Service keeps what needs its running drains: writing an event at
// once, clearing its mark in a running drain, the pass over DRAINS.

// auditDrain writes a drain's event (n, its place in DrainState.Events,
// from 1) to AUDIT as an api.AuditAction on subjects.AuditAction("drain",
// id), and clears its Unrecorded mark. A refusal leaves the event to the
// outbox, woken at once. It reports whether the event is in AUDIT.
func (s *Service) auditDrain(id string, ev api.DrainEvent, n int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), outbox.AuditTimeout)
	defer cancel()
	if err := outbox.Record(ctx, s.js, id, ev, n, false); err != nil {
		s.log.Warn("DRAIN_ACTION_UNRECORDED: kept in the drain's outbox, retried until written", "drain_id", id,
			"action", ev.Action, "event", n, "err", err)
		s.kickOutbox()
		return false
	}
	s.markRecorded(ctx, id, ev, n)
	return true
}

// markRecorded clears the Unrecorded mark of the drain's n-th event: in
// its run when it runs here (saved at once), else in DRAINS by a
// compare-and-set. A mark left set (a lost race, DRAINS unreachable) is
// found by the outbox, which finds the event in AUDIT and clears it then.
func (s *Service) markRecorded(ctx context.Context, id string, ev api.DrainEvent, n int) {
	s.mu.Lock()
	d, local := s.running[id]
	s.mu.Unlock()
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
			err = s.save(d)
		}
	} else {
		err = outbox.ClearStored(ctx, s.drains, id, ev, n)
	}
	if err != nil {
		s.log.Warn("drain event recorded; its mark not cleared yet", "drain_id", id, "event", n, "err", err)
		s.kickOutbox()
	}
}

// kickOutbox wakes the outbox loop (never blocks).
func (s *Service) kickOutbox() { s.outbox.Kick() }

// runOutbox passes over DRAINS at start, when woken, every outbox.Retry
// while an event waits and every DrainLease otherwise, until ctx ends.
func (s *Service) runOutbox(ctx context.Context) { s.outbox.Run(ctx, s.cfg.DrainLease, s.flushOutbox) }

// flushOutbox writes every drain event marked Unrecorded to AUDIT (once)
// and clears its mark; it returns how many are still unrecorded (also the
// metric).
func (s *Service) flushOutbox(ctx context.Context) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	drains, err := s.listDrains(lctx)
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
			if err := outbox.Record(ectx, s.js, d.key, ev, i+1, true); err != nil {
				cancel()
				left++
				s.log.Warn("DRAIN_ACTION_UNRECORDED", "drain_id", d.key, "action", ev.Action, "event", i+1, "err", err)
				continue
			}
			s.markRecorded(ectx, d.key, ev, i+1)
			cancel()
			s.log.Info("drain action recorded from the outbox", "drain_id", d.key, "action", ev.Action, "event", i+1)
		}
	}
	s.metrics.unrecorded.Set(float64(left))
	if left > 0 {
		return left, fmt.Errorf("redriver: %d drain events not in AUDIT", left)
	}
	return 0, nil
}
