package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// DRAINS is checked against three write-once sources: REQUESTS (ADR
// 0024: a drain's start, its first entry with its filter, controls,
// starter and owner, written before the entry; and its end, its final
// status and counts, written before DRAINS says it), AUDIT's drain
// actions (every pause, resume and cancel, the n-th of a drain with the
// message id "drain-<id>-<n>", written from the drain's outbox) and the
// records a drain seals into QUARANTINE (each replay's redrive_requested
// names the drain and the person who started it; the chain's next
// outcome record is the replay's outcome). So:
//
//   - a drain the sources name that DRAINS lacks is missing; one whose
//     recorded events differ from AUDIT's (an event marked recorded that
//     AUDIT lacks, one AUDIT holds that the entry lacks or says
//     otherwise), whose starter differs, or, with a start in REQUESTS,
//     whose filter, start, status (beyond a change in flight) or
//     finished counts differ is altered;
//   - an entry the sources do not name is not reported extra: a drain of
//     a store before REQUESTS that replayed nothing and never paused
//     leaves no source;
//   - Restore writes a drain with a start back with its filter and the
//     status its sources say (cancelled, its end's, paused, else running:
//     a running one with no heartbeat, taken up again by its owner or
//     resumed by another instance from its chains). A drain of a store
//     before REQUESTS is written failed (or cancelled, when AUDIT says
//     so), never resumable: its events, starter and counts from the
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
	// start and end are the drain's start and end as REQUESTS holds them
	// (nil: none; a drain of a store before REQUESTS has neither).
	start, end *api.DrainState
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
	if w.start == nil {
		w.StartedBy, w.StartedAt = prev.StartedBy, prev.StartedAt
	}
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
	if err := r.drainRequests(ctx, id, get); err != nil {
		return nil, err
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
		e := Entry{Key: id, Value: w.DrainState, Lacks: "filter, controls, selection counts", meta: w}
		if w.start != nil {
			w.Request, w.StartedBy, w.StartedAt, w.Owner = w.start.Request, w.start.StartedBy, w.start.StartedAt, w.start.Owner
			w.Status = w.status()
			e.Value, e.Lacks = w.DrainState, ""
			if w.end == nil {
				e.Lacks = "selection counts of a drain not finished (its replays are counted from QUARANTINE)"
			}
		}
		out[id] = e
	}
	return out, nil
}

// drainRequests reads the drains' starts and ends from REQUESTS (of drain
// id alone when set) into the drains get returns. A start or end that
// does not decode, or names another drain, is not the drain's.
func (r *Rebuilder) drainRequests(ctx context.Context, id string, get func(string) *drainWant) error {
	take := func(m *jetstream.RawStreamMsg) {
		rest, ok := strings.CutPrefix(m.Subject, "requests.drain.")
		if !ok {
			return
		}
		key, which, ok := strings.Cut(rest, ".")
		if !ok || !validKey(key) || (which != "start" && which != "end") {
			return
		}
		var st api.DrainState
		if json.Unmarshal(m.Data, &st) != nil || st.DrainID != key {
			return
		}
		w := get(key)
		at := st.StartedAt
		if which == "start" {
			w.start = &st
		} else {
			w.end = &st
			if st.FinishedAt != nil {
				at = *st.FinishedAt
			}
		}
		if at.After(w.last) {
			w.last = at
		}
	}
	if id == "" {
		return requests(ctx, r.js, streams.DrainRequestsAll, "", take)
	}
	if !validKey(id) {
		return nil
	}
	for _, subj := range []string{streams.DrainStartSubject(id), streams.DrainEndSubject(id)} {
		if err := requests(ctx, r.js, "", subj, take); err != nil {
			return err
		}
	}
	return nil
}

// status is the drain's status as its sources say it, once REQUESTS
// holds its start: cancelled when AUDIT says so, else its end's, else
// paused when AUDIT's last event is a pause, else running.
func (w *drainWant) status() string {
	switch {
	case w.Status == api.DrainCancelled:
		return api.DrainCancelled
	case w.end != nil:
		return w.end.Status
	case w.Status == api.DrainPaused:
		return api.DrainPaused
	}
	return api.DrainRunning
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
	if w.start != nil {
		detail = fmt.Sprintf("REQUESTS records drain %s started (%s), AUDIT %d events, QUARANTINE %d replays", e.Key, w.Status, len(w.Events), w.Replayed)
		if w.end == nil && len(w.Events) == 0 && w.Replayed == 0 && r.recent(w.StartedAt) {
			return inFlight, "" // REQUESTS is written before DRAINS: a start in flight
		}
	}
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
	if w.start != nil {
		return append(d, w.diffStarted(r, st)...)
	}
	if w.Status == api.DrainCancelled && st.Status != api.DrainCancelled {
		d = append(d, "status ("+safeDrainStatus(st.Status)+", AUDIT: cancelled)")
	}
	if w.StartedBy != "" && st.StartedBy != w.StartedBy {
		d = append(d, "started_by")
	}
	return d
}

// diffStarted names what entry st says other than the drain's start and
// end in REQUESTS and its AUDIT events: its filter and controls, who
// started it and when, its status (unless a change is in flight: an
// event not in AUDIT yet, a status set within the grace), and a finished
// drain's counts.
func (w *drainWant) diffStarted(r *Rebuilder, st api.DrainState) []string {
	var d []string
	if !sameJSON(st.Request, w.Request) {
		d = append(d, "filter")
	}
	if st.StartedBy != w.StartedBy || !st.StartedAt.Equal(w.StartedAt) {
		d = append(d, "started_by")
	}
	have := st.Status
	if have == api.DrainSelecting {
		have = api.DrainRunning
	}
	inFlight := r.recent(w.last) || (st.FinishedAt != nil && r.recent(*st.FinishedAt))
	for _, ev := range st.Events {
		inFlight = inFlight || ev.Unrecorded
	}
	if have != w.Status && !inFlight {
		d = append(d, "status ("+safeDrainStatus(st.Status)+", sources: "+w.Status+")")
	}
	if w.end != nil && have == w.Status && !sameJSON(st.DrainCounts, w.end.DrainCounts) {
		d = append(d, "counts")
	}
	return d
}

// sameJSON reports whether a and b encode the same.
func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
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

// extra: never. A drain of an earlier store that replayed nothing and
// never paused leaves no source. An entry no source names is never run
// all the same: a redriver resumes only a drain whose start REQUESTS
// holds as the entry says it (drains.recordedStart).
func (drainsIndex) extra(*Rebuilder, any) bool { return false }

func (drainsIndex) restore(r *Rebuilder, e Entry, s any) ([]byte, error) {
	w := e.meta.(*drainWant)
	if w.start != nil {
		return w.restoreStarted(r, s)
	}
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

// restoreStarted returns drain w as its sources say it, over stored (nil
// when missing): its start's filter, controls, starter and owner, AUDIT's
// events, the status its sources say, and a finished drain's end (its
// counts and finish) or, for a drain not finished, its replays from
// QUARANTINE. A running drain is written with no heartbeat: its owner's
// next checkpoint finds it (the same owner), or an instance takes it
// over and resumes it from its chains (drains.TakeOver).
func (w *drainWant) restoreStarted(r *Rebuilder, s any) ([]byte, error) {
	var st api.DrainState
	switch {
	case w.end != nil:
		st = *w.end
	case s != nil:
		st = s.(api.DrainState)
	default:
		st = *w.start
		st.DrainCounts = api.DrainCounts{Selected: w.Replayed, Replayed: w.Replayed, Committed: w.Committed,
			SkippedDuplicate: w.SkippedDuplicate, ReplayFailed: w.ReplayFailed, Poisoned: w.Poisoned, Pending: w.Pending}
	}
	st.DrainID, st.Request, st.StartedBy, st.StartedAt = w.DrainID, w.Request, w.StartedBy, w.StartedAt
	// AUDIT's events; past them only those still in the outbox.
	events := slices.Clone(w.Events)
	if s != nil {
		cur := s.(api.DrainState)
		for _, ev := range cur.Events[min(len(w.Events), len(cur.Events)):] {
			if ev.Unrecorded {
				events = append(events, ev)
			}
		}
	}
	st.Events = events
	have := st.Status
	if have == api.DrainSelecting {
		have = api.DrainRunning
	}
	if have != w.Status {
		st.Status = w.Status
		switch w.Status {
		case api.DrainCancelled:
			st.CancelledBy = w.CancelledBy
			if st.FinishedAt == nil {
				now := r.now().UTC()
				st.FinishedAt = &now
			}
		case api.DrainRunning, api.DrainPaused:
			st.FinishedAt, st.Error, st.Outcome, st.OutcomeReason = nil, "", "", ""
			st.Owner, st.Heartbeat = w.start.Owner, time.Time{}
		}
	}
	if w.end == nil && w.Status == api.DrainRunning && s == nil {
		st.Owner, st.Heartbeat = w.start.Owner, time.Time{}
	}
	if w.Status == api.DrainCompleted || w.Status == api.DrainFailed || w.Status == api.DrainCancelled {
		st = st.WithOutcome()
	}
	return json.Marshal(st)
}
