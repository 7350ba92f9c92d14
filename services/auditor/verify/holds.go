package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// HOLDS (a KV bucket, package hold) is an index: a hold's placing and its
// lifting are written, after the bucket, to AUDIT (hold.Store.Audit,
// write-once), which is its source. A bucket can be rolled up no more
// (streams.EnsureBucket), but a writer of its keys (the auditor's
// credential) can still overwrite or delete-mark an entry: verify compares
// the bucket with AUDIT's hold actions, and a hold AUDIT records that
// HOLDS lacks, one whose case, target, placer, status or lifter differs,
// or one HOLDS has that AUDIT never recorded, is a problem of its kind.
// Only ids are named (a case id is a person's text).

// The problems of the HOLDS check (VerifyProblem.Kind).
const (
	// ProblemHoldMissing: AUDIT records a hold placed that HOLDS lacks
	// (wiped, delete-marked, or not decodable).
	ProblemHoldMissing = "hold_missing"
	// ProblemHoldAltered: HOLDS says of a hold other than AUDIT does
	// (case, target, who placed it, its status, who lifted it).
	ProblemHoldAltered = "hold_altered"
	// ProblemHoldExtra: HOLDS has a hold AUDIT never recorded placed.
	ProblemHoldExtra = "hold_extra"
)

// holdGrace is how long after a hold's placing or lifting a difference is
// not yet a problem: the bucket is written first and AUDIT right after.
const holdGrace = time.Minute

// holdActions are what AUDIT records of one hold.
type holdActions struct {
	placed, lifted *api.AuditAction
}

// holdDetail is the part of a hold action's detail the check compares
// (hold.Store.Audit writes it).
type holdDetail struct {
	CaseID string         `json:"case_id"`
	Target api.HoldTarget `json:"target"`
}

// holds compares HOLDS with AUDIT's hold actions and reports each
// difference. A store not provisioned is nothing to compare.
func (p *Verifier) holds(ctx context.Context, v *verifier) error {
	actions := map[string]*holdActions{}
	err := streams.ReadSubject(ctx, p.cfg.JS, subjects.AuditStream, subjects.AuditAction("hold", ">"), func(m *jetstream.RawStreamMsg) error {
		var a api.AuditAction
		if json.Unmarshal(m.Data, &a) != nil || a.Object != "hold" || !api.ValidHoldID(a.ObjectID) {
			return nil // not a hold action: the audit trail's own check
		}
		h := actions[a.ObjectID]
		if h == nil {
			h = &holdActions{}
			actions[a.ObjectID] = h
		}
		switch a.Action {
		case hold.AuditPlaced:
			if h.placed == nil {
				h.placed = &a
			}
		case hold.AuditLifted:
			if h.lifted == nil {
				h.lifted = &a
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil // no AUDIT: the checkpoint check reports the store missing
	case err != nil:
		return fmt.Errorf("auditor: read %s hold actions: %w", subjects.AuditStream, err)
	}
	all, err := hold.NewStore(p.cfg.JS, nil).All(ctx)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		all = nil // no HOLDS: every hold AUDIT records is missing
	case errors.Is(err, hold.ErrTooMany):
		p.cfg.Log.Warn("HOLDS not compared with AUDIT: more holds than one read returns", "holds_audited", len(actions))
		return nil
	case err != nil:
		return fmt.Errorf("auditor: %w", err)
	}
	now := p.cfg.Now()
	recent := func(t time.Time) bool { return now.Sub(t) < holdGrace }
	kept := map[string]api.Hold{}
	for _, h := range all {
		kept[h.ID] = h
		a := actions[h.ID]
		if a == nil || a.placed == nil {
			if !recent(h.PlacedAt) {
				v.problem(api.VerifyProblem{Kind: ProblemHoldExtra, Subject: subjects.BucketKey(subjects.HoldsBucket, h.ID),
					Detail: fmt.Sprintf("HOLDS has hold %s, which AUDIT never recorded placed", h.ID)})
			}
			continue
		}
		diff := holdDiff(h, a)
		if len(diff) == 1 && diff[0] == liftNotAudited && h.LiftedAt != nil && recent(*h.LiftedAt) {
			continue // lifted in HOLDS, its AUDIT action about to be written
		}
		if len(diff) > 0 {
			v.problem(api.VerifyProblem{Kind: ProblemHoldAltered, Subject: subjects.BucketKey(subjects.HoldsBucket, h.ID),
				Detail: fmt.Sprintf("HOLDS says of hold %s other than AUDIT does: %v", h.ID, diff)})
		}
	}
	ids := make([]string, 0, len(actions))
	for id := range actions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if _, ok := kept[id]; !ok && actions[id].placed != nil {
			v.problem(api.VerifyProblem{Kind: ProblemHoldMissing, Subject: subjects.BucketKey(subjects.HoldsBucket, id),
				Detail: fmt.Sprintf("AUDIT records hold %s placed; HOLDS has no entry of it", id)})
		}
	}
	return nil
}

// liftNotAudited is the difference of a hold lifted in HOLDS whose
// lifting AUDIT does not record.
const liftNotAudited = "status (lifted, AUDIT: active)"

// holdDiff names the fields in which HOLDS' hold h differs from what
// AUDIT recorded of it.
func holdDiff(h api.Hold, a *holdActions) []string {
	var d []string
	var det holdDetail
	_ = json.Unmarshal(a.placed.Detail, &det)
	if h.CaseID != det.CaseID {
		d = append(d, "case")
	}
	ht, _ := json.Marshal(h.Target)
	at, _ := json.Marshal(det.Target)
	if !bytes.Equal(ht, at) {
		d = append(d, "target")
	}
	if h.PlacedBy != a.placed.Actor || !h.PlacedAt.Equal(a.placed.At) {
		d = append(d, "placed")
	}
	switch {
	case a.lifted == nil && h.Status != api.HoldActive:
		d = append(d, liftNotAudited)
	case a.lifted != nil && h.Status != api.HoldLifted:
		d = append(d, "status (active, AUDIT: lifted)")
	case a.lifted != nil && (h.LiftedBy != a.lifted.Actor || h.LiftedAt == nil || !h.LiftedAt.Equal(a.lifted.At)):
		d = append(d, "lifted")
	}
	return d
}
