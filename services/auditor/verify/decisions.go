package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// A person's decision is valid only with the person's signature (issue
// #38): every decision record of QUARANTINE (approved, released,
// dismissed) and every decision action of AUDIT (an approval approved or
// rejected, a hold lifted) carries its api.SignedDecision ("signed", in
// the record's signature or body, in the action's detail), and verify
// checks it with decision.Registry.Check as of the time it was stored:
// the signature, the key registered to the person then and not revoked,
// the person enabled and holding the role. A signature that does not hold
// is always a problem. A decision without one is a problem once the store
// has people's keys: recorded after the store's first registry record
// (every start writes the registry before any service decides); before
// it, executors of an earlier version wrote it, and it is counted as
// legacy, not a problem.

// The problems of the decision check (VerifyProblem.Kind).
const (
	// ProblemDecisionUnsigned: a decision without its person's signature
	// (recorded after people signed).
	ProblemDecisionUnsigned = "decision_unsigned"
	// ProblemDecisionForged: a signature that does not hold: it does not
	// verify, is made with a key that was not the person's (unknown,
	// another person's, revoked), signs another decision than the one
	// recorded, or the person was disabled or lacked the role.
	ProblemDecisionForged = "decision_forged"
	// InfoDecisionUnsignedLegacy: a decision recorded, unsigned, before
	// the store's first registry record (logged and counted, not a
	// problem).
	InfoDecisionUnsignedLegacy = "decision_unsigned_legacy"
)

// decisionKinds are the QUARANTINE record kinds that record a person's
// decision, and the decision each records.
var decisionKinds = map[record.Kind]string{
	record.KindApproved:  api.DecisionApprove,
	record.KindReleased:  api.DecisionRelease,
	record.KindDismissed: api.DecisionDismiss,
}

// decisionRecord is what the check reads of a decision record.
type decisionRecord struct {
	Kind      record.Kind `json:"kind"`
	DLQID     string      `json:"dlq_id"`
	Index     int         `json:"index"`
	Actor     string      `json:"actor"`
	Signature *struct {
		ApprovalID string              `json:"approval_id"`
		Approver   string              `json:"approver"`
		Signed     *api.SignedDecision `json:"signed"`
	} `json:"signature"`
	Signed *api.SignedDecision `json:"signed"`
}

// kindMarks find a decision record's kind in its bytes before decoding it.
var kindMarks = func() [][]byte {
	var out [][]byte
	for k := range decisionKinds {
		out = append(out, []byte(`"kind":"`+string(k)+`"`))
	}
	return out
}()

// readDecision returns the decision record raw is, or nil.
func readDecision(raw []byte) *decisionRecord {
	found := false
	for _, m := range kindMarks {
		found = found || bytes.Contains(raw, m)
	}
	if !found {
		return nil
	}
	var d decisionRecord
	if json.Unmarshal(raw, &d) != nil {
		return nil // unparseable: the chain check reports it
	}
	if _, ok := decisionKinds[d.Kind]; !ok {
		return nil
	}
	return &d
}

// decisions is the state of the decision check of one verification.
type decisions struct {
	reg *decision.Registry
	// first is the time of the store's first registry record (zero:
	// none, every unsigned decision is legacy).
	first time.Time
	// audit are AUDIT's decision actions, checked after QUARANTINE.
	audit   []auditDecision
	checked int
	legacy  int
}

// auditDecision is one decision action of AUDIT.
type auditDecision struct {
	seq     uint64
	subject string
	action  string
	signed  *api.SignedDecision
	at      time.Time
}

// startDecisions reads the people's registry records and AUDIT's
// decision actions once.
func (p *Verifier) startDecisions(ctx context.Context) (*decisions, error) {
	d := &decisions{reg: decision.NewRegistry(p.cfg.JS)}
	e, ok, err := d.reg.First(ctx)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return d, nil // no AUDIT: the checkpoint check reports the store missing
	case err != nil:
		return nil, fmt.Errorf("auditor: %w", err)
	case ok:
		d.first = e.Stored
	}
	if err := p.readAuditDecisions(ctx, d); err != nil {
		return nil, err
	}
	return d, nil
}

// check checks one signed decision as of when it was stored and reports
// what is wrong with it.
func (v *verifier) checkDecision(ctx context.Context, where api.VerifyProblem, action string, sd *api.SignedDecision, at time.Time) {
	d := v.decisions
	if d == nil {
		return
	}
	d.checked++
	if sd == nil {
		if d.first.IsZero() || at.Before(d.first) {
			d.legacy++
			return
		}
		where.Kind, where.Detail = ProblemDecisionUnsigned, fmt.Sprintf("decision %q recorded without its person's signature", action)
		v.problem(where)
		return
	}
	err := d.reg.Check(ctx, *sd, at)
	if err == nil && sd.Decision.Action != action {
		err = fmt.Errorf("%w: signs a %s, records a %s", decision.ErrMismatch, sd.Decision.Action, action)
	}
	if err == nil {
		return
	}
	where.Kind = ProblemDecisionForged
	if decision.Code(err) == decision.CodeUnsigned {
		where.Kind = ProblemDecisionUnsigned
	}
	// Ids, roles, times and key ids only: the check's errors name no
	// request value.
	where.Detail = fmt.Sprintf("%s by %s: %v", action, sd.Decision.Person, err)
	v.problem(where)
}

// checkRecordDecision checks the decision of a QUARANTINE record.
func (v *verifier) checkRecordDecision(ctx context.Context, m *stored) {
	r := m.decision
	sd := r.Signed
	if sd == nil && r.Signature != nil {
		sd = r.Signature.Signed
	}
	if sd != nil && sd.Decision.Target != r.DLQID && (r.Signature == nil || sd.Decision.Target != r.Signature.ApprovalID) {
		v.problem(api.VerifyProblem{Seq: m.seq, Subject: m.subject, DLQID: r.DLQID, Index: r.Index, Kind: ProblemDecisionForged,
			Detail: fmt.Sprintf("the signed decision is about %s, not this record's", sd.Decision.Target)})
		return
	}
	v.checkDecision(ctx, api.VerifyProblem{Seq: m.seq, Subject: m.subject, DLQID: r.DLQID, Index: r.Index}, decisionKinds[r.Kind], sd, m.time)
}

// auditDecisions are the AUDIT actions that record a person's decision:
// object, action → the decision.
var auditDecisions = map[[2]string]string{
	{"approval", "approved"}: api.DecisionApprove,
	{"approval", "rejected"}: api.DecisionReject,
	{"hold", "lifted"}:       api.DecisionLift,
}

// readAuditDecisions reads every decision action of AUDIT into d.
func (p *Verifier) readAuditDecisions(ctx context.Context, d *decisions) error {
	for _, obj := range []string{"approval", "hold"} {
		err := streams.ReadSubject(ctx, p.cfg.JS, subjects.AuditStream, subjects.AuditAction(obj, ">"), func(m *jetstream.RawStreamMsg) error {
			var a api.AuditAction
			if json.Unmarshal(m.Data, &a) != nil {
				return nil // not an action: the audit trail's own check
			}
			action, ok := auditDecisions[[2]string{a.Object, a.Action}]
			if !ok {
				return nil
			}
			var body struct {
				Signed *api.SignedDecision `json:"signed"`
			}
			_ = json.Unmarshal(a.Detail, &body)
			d.audit = append(d.audit, auditDecision{seq: m.Sequence, subject: m.Subject, action: action, signed: body.Signed, at: m.Time})
			return nil
		})
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return nil
		case err != nil:
			return fmt.Errorf("auditor: read %s decisions: %w", subjects.AuditStream, err)
		}
	}
	return nil
}

// auditDecisions checks every decision action of AUDIT (read by
// startDecisions).
func (p *Verifier) auditDecisions(ctx context.Context, v *verifier) error {
	if v.decisions == nil {
		return nil
	}
	for _, a := range v.decisions.audit {
		v.checkDecision(ctx, api.VerifyProblem{Seq: a.seq, Subject: a.subject}, a.action, a.signed, a.at)
	}
	return nil
}
