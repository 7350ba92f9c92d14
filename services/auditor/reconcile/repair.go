package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// maxRepairs bounds the unaccounted events one reconciliation repairs (and
// keeps in memory, with their bytes); the next run repairs the rest.
const maxRepairs = 10_000

// Actor is who asked for a repair: a person (an operator's
// audit.reconcile with repair) or the auditor's periodic run.
type Actor struct {
	User string
	Role string
}

// ErrRepairNotRecorded is returned when a repair's AUDIT action could not
// be stored: nothing was repaired (fail closed; the next run tries again).
var ErrRepairNotRecorded = errors.New("reconcile: the repair could not be recorded in AUDIT")

// repairAction is the Detail of a repair's AUDIT action.
type repairAction struct {
	Seq           uint64 `json:"seq"`
	DocumentIndex *int   `json:"document_index,omitempty"`
	Subject       string `json:"subject"`
	DLQID         string `json:"dlq_id"`
}

// repair gives each unaccounted event of evs an outcome: the quarantiner
// seals its record (quarantiner.repair: class exhausted, the original read
// from EVENTS by the quarantiner itself, one record per chain whoever
// reported it first). Only an event the validator's consumer has settled
// (streams.Settled) is repaired: the server will never deliver it again, so
// no later commit can sit beside the record (the quarantiner checks it
// too). Each repair is recorded in AUDIT
// (subjects.AuditAction("reconcile", …)) before it is asked for, and
// counted.
func (p *Reconciler) repair(ctx context.Context, rep *api.ReconcileReply, evs []event, by Actor, maxIDs int) error {
	if len(evs) == 0 {
		return nil
	}
	c, err := p.cfg.JS.Consumer(ctx, subjects.EventsStream, subjects.ValidatorConsumer)
	if err != nil {
		return fmt.Errorf("auditor: the validator's consumer: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("auditor: the validator's consumer: %w", err)
	}
	for i := range evs {
		e := &evs[i]
		if !streams.Settled(info, e.Seq) {
			rep.RepairDeferred++
			continue
		}
		if err := p.recordRepair(ctx, e, by); err != nil {
			return err
		}
		got, err := endpoint.Call[api.RepairRequest, api.RepairReply](ctx, p.cfg.NC, api.QuarantinerRepair,
			api.RepairRequest{Stream: subjects.EventsStream, Seq: e.Seq, DocumentIndex: e.DocumentIndex, By: by.User})
		if err != nil {
			var ae *api.Error
			if errors.As(err, &ae) && ae.Code == api.ErrConflict {
				rep.RepairDeferred++ // the quarantiner saw it unsettled
				continue
			}
			return fmt.Errorf("auditor: repair of %s %d: %w", subjects.EventsStream, e.Seq, err)
		}
		if !got.Written {
			// Sealed meanwhile by the usual path (a report or an
			// advisory the quarantiner had not reached yet).
			rep.RepairFound++
			continue
		}
		p.cfg.Log.Warn("AUDIT_REPAIRED_EVENT", "seq", e.Seq, "subject", e.Subject, "dlq_id", got.DLQID, "by", by.User)
		if p.cfg.Repaired != nil {
			p.cfg.Repaired.Inc()
		}
		if len(rep.Repaired) < maxIDs {
			r := e.ReconcileEvent
			r.DLQID = got.DLQID
			rep.Repaired = append(rep.Repaired, r)
		}
	}
	return nil
}

// repairID names a repair in AUDIT: the event's sequence, and its position
// in its document.
func repairID(e *event) string {
	id := strconv.FormatUint(e.Seq, 10)
	if e.DocumentIndex != nil {
		id += "-" + strconv.Itoa(*e.DocumentIndex)
	}
	return id
}

// recordRepair stores the repair's AUDIT action (de-duplicated by the
// repair's id within AUDIT's window) and waits for its acknowledgement:
// nothing is repaired that AUDIT does not name.
func (p *Reconciler) recordRepair(ctx context.Context, e *event, by Actor) error {
	detail, err := json.Marshal(repairAction{Seq: e.Seq, DocumentIndex: e.DocumentIndex, Subject: e.Subject, DLQID: e.DLQID})
	if err != nil {
		return err
	}
	id := repairID(e)
	b, err := json.Marshal(api.AuditAction{Action: "repair_requested", Object: "event", ObjectID: id, Actor: by.User, Role: by.Role,
		At: p.cfg.Now().UTC(), Reason: "no outcome after the grace period: the quarantiner seals its record, or finds it sealed by the usual path",
		Detail: detail})
	if err != nil {
		return err
	}
	if _, err := p.cfg.JS.Publish(ctx, subjects.AuditAction("reconcile", id), b, jetstream.WithMsgID("repair-"+id),
		jetstream.WithExpectStream(subjects.AuditStream)); err != nil {
		return fmt.Errorf("%w: %w", ErrRepairNotRecorded, err)
	}
	return nil
}
