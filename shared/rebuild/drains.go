package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// DRAINS is checked against two write-once sources: AUDIT's drain
// actions (every pause, resume and cancel, the n-th of a drain with the
// message id "drain-<id>-<n>", written from the drain's outbox) and the
// records a drain seals into QUARANTINE (each replay's redrive_requested
// names the drain and the person who started it; the chain's next outcome
// record is the replay's outcome). Neither holds a drain's filter and
// controls, nor when a drain that replayed nothing started: so
//
//   - a drain the sources name that DRAINS lacks is missing; one whose
//     recorded events differ from AUDIT's (an event marked recorded that
//     AUDIT lacks, one AUDIT holds that the entry lacks or says
//     otherwise), whose cancellation AUDIT records and the entry does not
//     say, or whose starter differs from its records' is altered;
//   - an entry the sources do not name is not reported extra: a drain
//     that replayed nothing and never paused leaves no source;
//   - Restore writes a missing drain as failed (or cancelled, when AUDIT
//     says so), never resumable: its events, starter and counts from the
//     sources, its filter unknown. An altered one gets AUDIT's events,
//     cancellation and starter over what it holds.

// drainObject is the AUDIT object kind of a drain's actions.
const drainObject = "drain"

// drainLost is the error a restored drain carries.
const drainLost = "DRAINS lost this drain; rebuilt from AUDIT and QUARANTINE, which do not hold its filter: it is not resumed"

// drainWant is a drain as its sources record it.
type drainWant struct {
	api.DrainState
	// recorded are AUDIT's events by their number (from 1).
	recorded map[int]api.DrainEvent
	// last is when the sources last said anything of it.
	last time.Time
}

// drainDetail is the detail of a drain's AUDIT action (outbox.Record).
type drainDetail struct {
	Codes  map[string]int     `json:"codes,omitempty"`
	Window *api.WindowFigures `json:"window,omitempty"`
}

// drainRecord is what a quarantine record tells of a drain.
type drainRecord struct {
	DLQID         string      `json:"dlq_id"`
	Kind          record.Kind `json:"kind"`
	DrainID       string      `json:"drain_id"`
	Actor         string      `json:"actor"`
	QuarantinedAt time.Time   `json:"quarantined_at"`
}

type drainsIndex struct{}

func (ix drainsIndex) each(ctx context.Context, r *Rebuilder, fn func(Entry)) error {
	m, err := ix.fold(ctx, r, "")
	return fromMap(m, err, fn)
}

// one reads the drain's AUDIT actions again; its replays are old's (a
// scan of QUARANTINE per key would cost the whole stream, and a drain's
// replays only grow, which Restore never writes over: see restore).
func (ix drainsIndex) one(ctx context.Context, r *Rebuilder, old Entry) (Entry, bool, error) {
	m, err := ix.fold(ctx, r, old.Key)
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := m[old.Key]
	if !ok {
		return old, true, nil
	}
	w, prev := e.meta.(*drainWant), old.meta.(*drainWant)
	w.Replayed, w.Committed, w.SkippedDuplicate, w.ReplayFailed, w.Poisoned = prev.Replayed, prev.Committed, prev.SkippedDuplicate, prev.ReplayFailed, prev.Poisoned
	w.Pending = max(0, w.Replayed-w.Committed-w.SkippedDuplicate-w.ReplayFailed-w.Poisoned)
	w.StartedBy, w.StartedAt = prev.StartedBy, prev.StartedAt
	if prev.last.After(w.last) {
		w.last = prev.last
	}
	e.Value = w.DrainState
	return e, true, nil
}

// fold folds AUDIT's drain actions and QUARANTINE's drain records into
// the drains they record (of drain id alone, from AUDIT alone, when id
// is set).
func (drainsIndex) fold(ctx context.Context, r *Rebuilder, id string) (map[string]Entry, error) {
	wants := map[string]*drainWant{}
	get := func(id string) *drainWant {
		w := wants[id]
		if w == nil {
			w = &drainWant{DrainState: api.DrainState{DrainID: id}, recorded: map[int]api.DrainEvent{}}
			wants[id] = w
		}
		return w
	}
	err := auditActions(ctx, r.js, drainObject, id, func(a api.AuditAction, m *jetstream.RawStreamMsg) {
		n, ok := drainEventNumber(a.ObjectID, m.Header.Get(envelope.MsgID))
		if !ok {
			return
		}
		var d drainDetail
		_ = json.Unmarshal(a.Detail, &d)
		w := get(a.ObjectID)
		if _, seen := w.recorded[n]; !seen {
			w.recorded[n] = api.DrainEvent{Action: a.Action, Actor: a.Actor, Role: a.Role, At: a.At, Reason: a.Reason, Codes: d.Codes, Window: d.Window}
		}
		if a.At.After(w.last) {
			w.last = a.At
		}
	})
	if err != nil {
		return nil, err
	}
	// The replays: each drain's redrive_requested records, and the
	// outcome that follows each in its chain.
	if id == "" { // one drain: AUDIT only (see one)
		err = r.replays(ctx, get)
	}
	if err != nil && !errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("%w: read %s: %w", ErrUnavailable, subjects.QuarantineStream, err)
	}
	out := make(map[string]Entry, len(wants))
	for id, w := range wants {
		for n := 1; ; n++ {
			ev, ok := w.recorded[n]
			if !ok {
				break
			}
			w.Events = append(w.Events, ev)
			switch ev.Action {
			case api.ActionCancelled:
				w.Status, w.CancelledBy = api.DrainCancelled, ev.Actor
			case api.ActionPaused:
				w.Status = api.DrainPaused
			case api.ActionResumed:
				w.Status = api.DrainRunning
			}
		}
		w.Pending = max(0, w.Replayed-w.Committed-w.SkippedDuplicate-w.ReplayFailed-w.Poisoned)
		out[id] = Entry{Key: id, Value: w.DrainState, Lacks: "filter, controls, selection counts", meta: w}
	}
	return out, nil
}

// replays reads QUARANTINE for the drains' redrive_requested records and
// the outcome that follows each in its chain, counting them in the
// drain get returns.
func (r *Rebuilder) replays(ctx context.Context, get func(string) *drainWant) error {
	replaying := map[string]string{} // dlq id → the drain whose replay awaits its outcome
	return scanAll(ctx, r.js, subjects.QuarantineStream, streams.DirectRequest{Seq: 1, Batch: scanBatch},
		func(m *jetstream.RawStreamMsg) error {
			var rec drainRecord
			if json.Unmarshal(m.Data, &rec) != nil || rec.DLQID == "" {
				return nil
			}
			if rec.Kind == record.KindRedriveRequested {
				delete(replaying, rec.DLQID)
				if rec.DrainID == "" || !validKey(rec.DrainID) {
					return nil
				}
				w := get(rec.DrainID)
				w.Replayed++
				if w.StartedBy == "" {
					w.StartedBy, w.StartedAt = rec.Actor, rec.QuarantinedAt
				}
				if rec.QuarantinedAt.After(w.last) {
					w.last = rec.QuarantinedAt
				}
				replaying[rec.DLQID] = rec.DrainID
				return nil
			}
			id, ok := replaying[rec.DLQID]
			if !ok {
				return nil
			}
			w := get(id)
			switch rec.Kind {
			case record.KindReplayed:
				w.Committed++
			case record.KindSkippedDuplicate:
				w.SkippedDuplicate++
			case record.KindReplayFailed:
				w.ReplayFailed++
			case record.KindPoisoned:
				w.Poisoned++
			default:
				return nil // a hold's record, an approval: the outcome is still to come
			}
			delete(replaying, rec.DLQID)
			return nil
		})
}

// drainEventNumber reads n from a drain event's AUDIT message id
// ("drain-<id>-<n>", outbox.MsgID).
func drainEventNumber(id, msgID string) (int, bool) {
	rest, ok := strings.CutPrefix(msgID, "drain-"+id+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 1
}

// validKey reports whether s can be a key of a bucket (a subject token
// of letters, digits, '-', '_', '=' and '.', at most 256 bytes).
func validKey(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '=':
		default:
			return false
		}
	}
	return true
}

func (drainsIndex) decode(key string, b []byte) (any, error) {
	var st api.DrainState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	if st.DrainID != key {
		return nil, fmt.Errorf("rebuild: drain entry %s names another id", key)
	}
	return st, nil
}

func (drainsIndex) missing(r *Rebuilder, e Entry, _ stored) (verdict, string) {
	w := e.meta.(*drainWant)
	detail := fmt.Sprintf("AUDIT and QUARANTINE record drain %s (%d events, %d replays)", e.Key, len(w.Events), w.Replayed)
	if r.recent(w.last) {
		return recheck, detail // DRAINS is written first: started after it was read?
	}
	return lost, detail
}

func (drainsIndex) diff(r *Rebuilder, s any, e Entry) []string {
	st, w := s.(api.DrainState), e.meta.(*drainWant)
	var d []string
	events := false
	for n, ev := range w.recorded {
		if n > len(st.Events) && r.recent(ev.At) {
			continue // recorded after DRAINS was read
		}
		if n > len(st.Events) || !sameDrainEvent(st.Events[n-1], ev) {
			events = true
		}
	}
	for i, ev := range st.Events {
		if _, ok := w.recorded[i+1]; !ok && !ev.Unrecorded && !r.recent(ev.At) {
			events = true // marked recorded, and AUDIT does not hold it
		}
	}
	if events {
		d = append(d, "events")
	}
	if w.Status == api.DrainCancelled && st.Status != api.DrainCancelled {
		d = append(d, "status ("+safeDrainStatus(st.Status)+", AUDIT: cancelled)")
	}
	if w.StartedBy != "" && st.StartedBy != w.StartedBy {
		d = append(d, "started_by")
	}
	return d
}

// sameDrainEvent reports whether a stored event is the one AUDIT holds.
func sameDrainEvent(a, b api.DrainEvent) bool {
	return a.Action == b.Action && a.Actor == b.Actor && a.Role == b.Role && a.At.Equal(b.At) && a.Reason == b.Reason
}

// safeDrainStatus names a stored status for a detail (a forged value is
// never echoed).
func safeDrainStatus(s string) string {
	switch s {
	case api.DrainSelecting, api.DrainRunning, api.DrainCompleted, api.DrainCancelled, api.DrainFailed, api.DrainPaused:
		return s
	}
	return "unknown"
}

func (drainsIndex) extra(*Rebuilder, any) bool { return false }

func (drainsIndex) restore(r *Rebuilder, e Entry, s any) ([]byte, error) {
	w := e.meta.(*drainWant)
	if s == nil {
		st := w.DrainState
		if st.Status != api.DrainCancelled {
			st.Status = api.DrainFailed
		}
		now := r.now().UTC()
		st.Selected, st.Error, st.FinishedAt, st.Heartbeat = st.Replayed, drainLost, &now, now
		return json.Marshal(st.WithOutcome())
	}
	st := s.(api.DrainState)
	for n := 1; n <= len(w.Events); n++ {
		if n <= len(st.Events) {
			st.Events[n-1] = w.Events[n-1]
		} else {
			st.Events = append(st.Events, w.Events[n-1])
		}
	}
	// Past AUDIT's events only those still in the outbox (unrecorded)
	// stay: one marked recorded that AUDIT never took was not written by
	// the outbox (the bucket's history keeps it).
	kept := st.Events[:len(w.Events)]
	for _, ev := range st.Events[len(w.Events):] {
		if ev.Unrecorded {
			kept = append(kept, ev)
		}
	}
	st.Events = kept
	if w.Status == api.DrainCancelled && st.Status != api.DrainCancelled {
		now := r.now().UTC()
		st.Status, st.CancelledBy = api.DrainCancelled, w.CancelledBy
		if st.FinishedAt == nil {
			st.FinishedAt = &now
		}
	}
	if w.StartedBy != "" {
		st.StartedBy = w.StartedBy
	}
	return json.Marshal(st)
}
