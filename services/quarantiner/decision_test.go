package quarantiner

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
)

// TestForgedDecisionRecordsRefused (issue #38, E6): whoever holds the
// quarantiner's credential asks it to seal a dismissal (or an approval)
// nobody made: without the named person's own signed decision of that
// very record, on the chain as it stands, it is refused
// (DECISION_UNSIGNED, counted), and the chain is unchanged. The person's
// real signed dismissal is sealed, whole.
func TestForgedDecisionRecordsRefused(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	q := e.start(t, cfg, nil)
	quarantine := func(subject string) string {
		data := []byte(`{"note":"Müller & Söhne <Großhandel> \"Lieferschein\" 陈伟"}` + strings.Repeat(" ", 3))
		seq := e.publishEvent(t, subject, data, nil)
		f := structural(subject, seq, data, codes.SchemaValidation)
		e.reportFailure(t, f)
		return record.DLQIDFor(f)
	}
	victim := quarantine("events.dscsa.shipping")
	other := quarantine("events.dscsa.receiving")
	e.waitRecords(t, 2)
	chen := approvaltest.Register(t, e.js, "chen.wei", access.RoleOperator)
	viewer := approvaltest.Register(t, e.js, "priya.raman", access.RoleViewer)
	disabled := approvaltest.Register(t, e.js, "dorothea.müller", access.RoleOperator)
	disabled.Disable(t, e.js, time.Now().Add(-time.Minute))
	amara := approvaltest.Register(t, e.js, "amara.okafor", access.RoleOperator, access.RoleApprover)
	head, otherHead := approvaltest.ChainHead(t, e.js, victim), approvaltest.ChainHead(t, e.js, other)
	now := time.Now()
	const reason = "duplicate of a committed shipment: 陈伟 & Müller <checked>"
	dismiss := func(p *approvaltest.Person, dlqID, chainHead string, role access.Role) *api.SignedDecision {
		return p.Record(api.DecisionDismiss, dlqID, api.DismissRequest{DLQID: dlqID, Reason: reason}, chainHead, role, now)
	}
	dismissed := func(actor string, sd *api.SignedDecision) api.AppendRequest {
		return api.AppendRequest{DLQID: victim, Domain: "dscsa", Kind: record.KindDismissed, Actor: actor, Reason: reason, Signed: sd}
	}
	// amara's second login signs an approval of her own request.
	at := now.UTC().Truncate(time.Second)
	selfSig := &record.Signature{ApprovalID: "appr-1", Action: api.ActionCorrect, Requester: "amara.okafor", RequestedAt: at.Add(-time.Minute),
		Approver: access.RoleLogin("amara.okafor", access.RoleApprover), ApproverRole: "approver", SignedAt: at, Meaning: reason}
	selfSig.Signed = approval.Raw(amara.Sign(api.Decision{Action: api.DecisionApprove, Target: "appr-1", Request: strings.Repeat("0", 64),
		Chain: head, Meaning: reason, Person: "amara.okafor", Role: "approver", At: at}))
	tests := []struct {
		name string
		req  api.AppendRequest
	}{
		{"a dismissal naming chen.wei, unsigned", dismissed("chen.wei", nil)},
		{"signed by a key chen.wei never registered (the quarantiner's own)", dismissed("chen.wei",
			dismiss(approvaltest.NewPerson(t, "chen.wei", access.RoleOperator), victim, head, access.RoleOperator))},
		{"chen.wei's real dismissal of another chain", dismissed("chen.wei", dismiss(chen, other, otherHead, access.RoleOperator))},
		{"chen.wei's real dismissal of an earlier state of the chain", dismissed("chen.wei", dismiss(chen, victim, strings.Repeat("f", 64), access.RoleOperator))},
		{"chen.wei's signature under another actor's name", dismissed("lucia.fernandez", dismiss(chen, victim, head, access.RoleOperator))},
		{"a viewer's signature", dismissed("priya.raman", dismiss(viewer, victim, head, access.RoleViewer))},
		{"a disabled person's signature", dismissed("dorothea.müller", dismiss(disabled, victim, head, access.RoleOperator))},
		{"an approval by the requester's second login", api.AppendRequest{DLQID: victim, Domain: "dscsa", Kind: record.KindApproved,
			Actor: selfSig.Approver, Reason: reason, Signature: selfSig}},
	}
	refused := 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := appendReq(t, q.nc, tc.req)
			refused++
			if err == nil || !strings.HasPrefix(err.Error(), api.ErrDecisionUnsigned+":") {
				t.Fatalf("append = %v, want %s", err, api.ErrDecisionUnsigned)
			}
			if n := len(e.chainOf(t, "dscsa", victim)); n != 1 {
				t.Fatalf("the chain has %d records after a refused decision, want 1", n)
			}
		})
	}
	if got := testutil.ToFloat64(q.metrics.decisionsRefused); got != float64(refused) {
		t.Errorf("deadletter_quarantine_decisions_refused_total = %v, want %d", got, refused)
	}
	// chen.wei's own signed dismissal of the other chain, as it stands.
	rep, err := appendReq(t, q.nc, api.AppendRequest{DLQID: other, Domain: "dscsa", Kind: record.KindDismissed, Actor: "chen.wei", Reason: reason,
		Signed: dismiss(chen, other, otherHead, access.RoleOperator)})
	if err != nil || rep.Status != record.StatusResolved {
		t.Fatalf("the signed dismissal: %+v, %v", rep, err)
	}
	recs := e.chainOf(t, "dscsa", other)
	var last record.Record
	if err := json.Unmarshal(recs[len(recs)-1], &last); err != nil {
		t.Fatal(err)
	}
	sd, err := approval.FromRaw(last.Decision)
	if err != nil || sd == nil || sd.Decision.Person != "chen.wei" || sd.Decision.Chain != otherHead || sd.Signature.KeyID != chen.KeyID {
		t.Fatalf("the dismissed record carries %+v, %v; want chen.wei's signed decision whole", sd, err)
	}
}
