package rebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// HOLDS is rebuilt from AUDIT's hold actions: hold.Store writes the hold
// to HOLDS, then its placing (hold.AuditPlaced) and its lifting
// (hold.AuditLifted) to AUDIT with everything the entry holds (case,
// reason, target, who, role and when; a lift's approval and signer). A
// hold AUDIT records is therefore restored whole. The chains a hold
// holds keep their sealed hold_placed records whatever HOLDS says (the
// redriver refuses them, hold.Refuse), so a wiped HOLDS frees no chain;
// restoring it makes the hold listable and liftable again.

// holdObject is the AUDIT object kind of a hold's actions.
const holdObject = "hold"

// holdDetail is the detail of a hold's AUDIT action, as package hold
// writes it.
type holdDetail = hold.AuditDetail

type holdsIndex struct{}

// auditActions calls fn with every action AUDIT stores on
// subjects.AuditAction(object, id) (id "": every id), in order. No AUDIT
// reads empty.
func auditActions(ctx context.Context, js jetstream.JetStream, object, id string, fn func(api.AuditAction, *jetstream.RawStreamMsg)) error {
	filter := subjects.AuditAction(object, ">")
	if id != "" {
		if !validKey(id) {
			return nil // no action is stored on such a subject
		}
		filter = subjects.AuditAction(object, id)
	}
	err := scanAll(ctx, js, subjects.AuditStream,
		streams.DirectRequest{Seq: 1, NextFor: filter, Batch: scanBatch}, func(m *jetstream.RawStreamMsg) error {
			var a api.AuditAction
			if json.Unmarshal(m.Data, &a) != nil || a.Object != object || a.ObjectID == "" || (id != "" && a.ObjectID != id) {
				return nil // not this object's action: the audit trail's own check
			}
			fn(a, m)
			return nil
		})
	if errors.Is(err, nats.ErrNoResponders) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: read %s %s actions: %w", ErrUnavailable, subjects.AuditStream, object, err)
	}
	return nil
}

func (ix holdsIndex) each(ctx context.Context, r *Rebuilder, fn func(Entry)) error {
	m, err := ix.fold(ctx, r, "")
	return fromMap(m, err, fn)
}

func (ix holdsIndex) one(ctx context.Context, r *Rebuilder, old Entry) (Entry, bool, error) {
	m, err := ix.fold(ctx, r, old.Key)
	e, ok := m[old.Key]
	return e, ok, err
}

// fold folds AUDIT's hold actions (of hold id; "": all) into the holds
// they record.
func (holdsIndex) fold(ctx context.Context, r *Rebuilder, id string) (map[string]Entry, error) {
	out := map[string]Entry{}
	err := auditActions(ctx, r.js, holdObject, id, func(a api.AuditAction, _ *jetstream.RawStreamMsg) {
		if !api.ValidHoldID(a.ObjectID) {
			return
		}
		var d holdDetail
		_ = json.Unmarshal(a.Detail, &d)
		e, seen := out[a.ObjectID]
		switch a.Action {
		case hold.AuditPlaced:
			if seen {
				return // the first placing is the hold's
			}
			out[a.ObjectID] = Entry{Key: a.ObjectID, Value: api.Hold{ID: a.ObjectID, CaseID: d.CaseID, Reason: a.Reason, Target: d.Target,
				Status: api.HoldActive, PlacedBy: a.Actor, PlacedByRole: a.Role, PlacedAt: a.At}}
		case hold.AuditLifted:
			if !seen {
				return // a lift of a hold AUDIT never recorded placed: nothing to index
			}
			h := e.Value.(api.Hold)
			if h.Status == api.HoldLifted {
				return
			}
			at := a.At
			h.Status, h.LiftedBy, h.LiftedByRole, h.LiftedAt, h.LiftReason = api.HoldLifted, a.Actor, a.Role, &at, a.Reason
			h.LiftApprovalID, h.LiftApprovedBy, h.LiftSigned = d.ApprovalID, d.ApprovedBy, d.Signed
			e.Value = h
			out[a.ObjectID] = e
		}
	})
	return out, err
}

func (holdsIndex) decode(key string, b []byte) (any, error) {
	var h api.Hold
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	if h.ID != key {
		return nil, fmt.Errorf("rebuild: hold entry %s names another id", key)
	}
	return h, nil
}

func (holdsIndex) missing(r *Rebuilder, w Entry, _ stored) (verdict, string) {
	detail := fmt.Sprintf("AUDIT records hold %s placed", w.Key)
	if h := w.Value.(api.Hold); r.recent(h.PlacedAt) {
		return recheck, detail // HOLDS is written first: placed after it was read?
	}
	return lost, detail
}

func (holdsIndex) diff(r *Rebuilder, s any, w Entry) []string {
	h, want := s.(api.Hold), w.Value.(api.Hold)
	var d []string
	add := func(differs bool, field string) {
		if differs {
			d = append(d, field)
		}
	}
	ht, _ := json.Marshal(h.Target)
	wt, _ := json.Marshal(want.Target)
	add(h.CaseID != want.CaseID, "case_id")
	add(h.Reason != want.Reason, "reason")
	add(!bytes.Equal(ht, wt), "target")
	add(h.PlacedBy != want.PlacedBy || h.PlacedByRole != want.PlacedByRole, "placed_by")
	add(!h.PlacedAt.Equal(want.PlacedAt), "placed_at")
	if h.Status == api.HoldLifted && want.Status == api.HoldActive && h.LiftedAt != nil && r.recent(*h.LiftedAt) && len(d) == 0 {
		return nil // lifted in HOLDS, its AUDIT action about to be written
	}
	if h.Status == api.HoldActive && want.Status == api.HoldLifted && r.recent(*want.LiftedAt) && len(d) == 0 {
		return nil // lifted after HOLDS was read
	}
	add(h.Status != want.Status, "status")
	if h.Status == want.Status && want.Status == api.HoldLifted {
		add(h.LiftedBy != want.LiftedBy || h.LiftedByRole != want.LiftedByRole, "lifted_by")
		add(h.LiftedAt == nil || !h.LiftedAt.Equal(*want.LiftedAt), "lifted_at")
		add(h.LiftReason != want.LiftReason, "lift_reason")
		add(h.LiftApprovalID != want.LiftApprovalID || h.LiftApprovedBy != want.LiftApprovedBy, "lift_approval")
	}
	return d
}

func (holdsIndex) extra(r *Rebuilder, s any) bool {
	return !r.recent(s.(api.Hold).PlacedAt) // placed in HOLDS, its AUDIT action about to be written
}

func (holdsIndex) restore(_ *Rebuilder, w Entry, _ any) ([]byte, error) {
	h := w.Value.(api.Hold)
	h.Revision = 0
	return json.Marshal(h)
}
