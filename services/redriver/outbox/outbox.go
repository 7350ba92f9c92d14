// Package outbox writes a drain's governance events to AUDIT exactly once
// (issue #28, I9). A drain's event (a pause, a canary's verdict, a
// resume, a cancel) is stored in the drain's state in DRAINS first,
// marked Unrecorded: that state is the outbox. It is then written to
// AUDIT; once AUDIT acknowledged it, the mark is cleared. An event AUDIT
// refused stays marked, and the outbox loop writes it again until AUDIT
// takes it, after a restart too. Exactly once: each event's message id is
// the drain and the event's number, and before writing it again the loop
// looks for that id among the drain's AUDIT actions, so neither a lost
// acknowledgement nor a restart past AUDIT's de-duplication window stores
// it twice.
//
// The package holds no service state: it needs a JetStream handle (AUDIT),
// the DRAINS bucket (to clear a stored mark) and, for its loop, the
// redriver's pass over DRAINS.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/trail"
)

// Retry is the interval of the outbox's passes while an event waits.
const Retry = 2 * time.Second

// AuditTimeout bounds one AUDIT write of a drain event.
const AuditTimeout = 5 * time.Second

// ErrMarkMoved: the drain's state kept changing while its mark was being
// cleared.
var ErrMarkMoved = errors.New("redriver: the drain's state kept changing")

// MsgID is the AUDIT message id of a drain's n-th event (from 1).
func MsgID(id string, n int) string { return "drain-" + id + "-" + strconv.Itoa(n) }

// Record stores the drain's n-th event in AUDIT as an api.AuditAction on
// subjects.AuditAction("drain", id), de-duplicated by MsgID. With check
// it first looks for the message id among the drain's AUDIT actions and
// writes nothing when it is there.
func Record(ctx context.Context, js jetstream.JetStream, id string, ev api.DrainEvent, n int, check bool) error {
	msgID := MsgID(id, n)
	if check {
		found := false
		err := streams.ReadSubject(ctx, js, subjects.AuditStream, subjects.AuditAction("drain", id), func(m *jetstream.RawStreamMsg) error {
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
	_, err := trail.Publish(ctx, js, act, msgID)
	return err
}

// sameEvent reports whether a is event b (stored and in hand).
func sameEvent(a, b api.DrainEvent) bool {
	return a.Action == b.Action && a.Actor == b.Actor && a.At.Equal(b.At)
}

// ClearMark clears the Unrecorded mark of st's n-th event if it is ev; it
// reports whether it did.
func ClearMark(st *api.DrainState, ev api.DrainEvent, n int) bool {
	if n < 1 || n > len(st.Events) || !st.Events[n-1].Unrecorded || !sameEvent(st.Events[n-1], ev) {
		return false
	}
	st.Events[n-1].Unrecorded = false
	return true
}

// ClearStored clears the mark in the drain's stored state in DRAINS
// (compare-and-set on its revision, a few tries; ErrMarkMoved when they
// all lost).
func ClearStored(ctx context.Context, drains jetstream.KeyValue, id string, ev api.DrainEvent, n int) error {
	for range 3 {
		e, err := drains.Get(ctx, id)
		if err != nil {
			return err
		}
		var st api.DrainState
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			return err
		}
		rev := e.Revision()
		if !ClearMark(&st, ev, n) {
			return nil
		}
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if _, err := drains.Update(ctx, id, b, rev); err == nil {
			return nil
		}
	}
	return ErrMarkMoved
}

// Loop runs the outbox's passes: at start, when kicked, every Retry while
// an event waits and every lease otherwise.
type Loop struct {
	kick chan struct{}
}

// NewLoop returns a loop, not running.
func NewLoop() *Loop { return &Loop{kick: make(chan struct{}, 1)} }

// Kick wakes the loop (never blocks).
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Run calls flush (a pass over DRAINS that returns how many events are
// still unrecorded) until ctx ends.
func (l *Loop) Run(ctx context.Context, lease time.Duration, flush func(context.Context) (int, error)) {
	for {
		wait := lease
		if n, err := flush(ctx); err != nil || n > 0 {
			wait = min(wait, Retry)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.kick:
		case <-t.C:
		}
		t.Stop()
	}
}
