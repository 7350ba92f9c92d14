package redriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/trail"
)

// The audit trail of drains is never best effort (issue #28, I9). A
// drain's governance event (a pause, a canary's verdict, a resume, a
// cancel) is stored in the drain's state in DRAINS first, marked
// Unrecorded: that state is the outbox. It is then written to AUDIT; once
// AUDIT acknowledged it, the mark is cleared. An event AUDIT refused stays
// marked (drain.status shows it, deadletter_redrive_audit_unrecorded
// counts it), and the outbox loop writes it again until AUDIT takes it,
// after a restart too (it starts with a pass over DRAINS). Exactly once:
// each event's message id is the drain and the event's number, and before
// writing it again the loop looks for that id among the drain's AUDIT
// actions, so neither a lost acknowledgement nor a restart past AUDIT's
// de-duplication window stores it twice.

// outboxRetry is the interval of the outbox's passes while an event waits.
const outboxRetry = 2 * time.Second

// auditTimeout bounds one AUDIT write of a drain event.
const auditTimeout = 5 * time.Second

// drainMsgID is the AUDIT message id of a drain's n-th event (from 1).
func drainMsgID(id string, n int) string { return "drain-" + id + "-" + strconv.Itoa(n) }

// auditDrain writes a drain's event (n, its place in DrainState.Events,
// from 1) to AUDIT as an api.AuditAction on subjects.AuditAction("drain",
// id), and clears its Unrecorded mark. A refusal leaves the event to the
// outbox, woken at once. It reports whether the event is in AUDIT.
func (s *Service) auditDrain(id string, ev api.DrainEvent, n int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	if err := s.recordDrainEvent(ctx, id, ev, n, false); err != nil {
		s.log.Warn("DRAIN_ACTION_UNRECORDED: kept in the drain's outbox, retried until written", "drain_id", id,
			"action", ev.Action, "event", n, "err", err)
		s.kickOutbox()
		return false
	}
	s.markRecorded(ctx, id, ev, n)
	return true
}

// recordDrainEvent stores the drain's n-th event in AUDIT (de-duplicated
// by drainMsgID). With check it first looks for the message id among the
// drain's AUDIT actions and writes nothing when it is there.
func (s *Service) recordDrainEvent(ctx context.Context, id string, ev api.DrainEvent, n int, check bool) error {
	msgID := drainMsgID(id, n)
	if check {
		found := false
		err := streams.ReadSubject(ctx, s.js, subjects.AuditStream, subjects.AuditAction("drain", id), func(m *jetstream.RawStreamMsg) error {
			found = found || m.Header.Get(envelope.MsgID) == msgID
			return nil
		})
		if err != nil {
			return err
		}
		if found {
			return nil
		}
	}
	detail, _ := json.Marshal(struct {
		DrainID string             `json:"drain_id"`
		Codes   map[string]int     `json:"codes,omitempty"`
		Window  *api.WindowFigures `json:"window,omitempty"`
	}{id, ev.Codes, ev.Window})
	act := api.AuditAction{Action: ev.Action, Object: "drain", ObjectID: id, Actor: ev.Actor, Role: ev.Role,
		At: ev.At, Reason: ev.Reason, Detail: detail}
	_, err := trail.Publish(ctx, s.js, act, msgID)
	return err
}

// sameEvent reports whether a is event b (stored and in hand).
func sameEvent(a, b api.DrainEvent) bool {
	return a.Action == b.Action && a.Actor == b.Actor && a.At.Equal(b.At)
}

// clearMark clears the Unrecorded mark of st's n-th event if it is ev; it
// reports whether it did.
func clearMark(st *api.DrainState, ev api.DrainEvent, n int) bool {
	if n < 1 || n > len(st.Events) || !st.Events[n-1].Unrecorded || !sameEvent(st.Events[n-1], ev) {
		return false
	}
	st.Events[n-1].Unrecorded = false
	return true
}

// errMarkMoved: the drain's state kept changing while its mark was being
// cleared.
var errMarkMoved = errors.New("redriver: the drain's state kept changing")

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
		d.setStatus(func(st *api.DrainState) { cleared = clearMark(st, ev, n) })
		if cleared {
			err = s.save(d)
		}
	} else {
		err = s.clearStored(ctx, id, ev, n)
	}
	if err != nil {
		s.log.Warn("drain event recorded; its mark not cleared yet", "drain_id", id, "event", n, "err", err)
		s.kickOutbox()
	}
}

// clearStored clears the mark in the drain's stored state (compare-and-set
// on its revision, a few tries).
func (s *Service) clearStored(ctx context.Context, id string, ev api.DrainEvent, n int) error {
	for range 3 {
		e, err := s.drains.Get(ctx, id)
		if err != nil {
			return err
		}
		var st api.DrainState
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return err
		}
		rev := e.Revision()
		if !clearMark(&st, ev, n) {
			return nil
		}
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if _, err := s.drains.Update(ctx, id, b, rev); err == nil {
			return nil
		}
	}
	return errMarkMoved
}

// kickOutbox wakes the outbox loop (never blocks).
func (s *Service) kickOutbox() {
	select {
	case s.outboxKick <- struct{}{}:
	default:
	}
}

// runOutbox passes over DRAINS at start, when woken, every outboxRetry
// while an event waits and every DrainLease otherwise, until ctx ends.
func (s *Service) runOutbox(ctx context.Context) {
	for {
		wait := s.cfg.DrainLease
		if n, err := s.flushOutbox(ctx); err != nil || n > 0 {
			wait = min(wait, outboxRetry)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.outboxKick:
		case <-t.C:
		}
		t.Stop()
	}
}

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
			ectx, cancel := context.WithTimeout(ctx, auditTimeout)
			if err := s.recordDrainEvent(ectx, d.key, ev, i+1, true); err != nil {
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
