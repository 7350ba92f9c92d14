package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestRecordShowsPendingCorrectionAndKeyIdentifiers (issue #40 O2, O8): a
// record with a pending correction (stored in APPROVALS) shows it on its
// page (who, when, the fields it changes, a link to the approval), and the
// domain's key identifiers (transaction, event, NDC, lot) without the
// payload being revealed; the approvals list shows whole ids with a copy
// button and the status in words; the policy page says what each setting
// means for a DEA registrant.
func TestRecordShowsPendingCorrectionAndKeyIdentifiers(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	suffix := strings.NewReplacer(".", "").Replace(time.Now().UTC().Format("150405.000000000"))
	dlqID := "pharmacy_" + suffix + strings.Repeat("d", 32-len(suffix))
	orig := []byte(`{"transaction_id":"INV-2025-0181","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917","quantity_delta":"-30","unit":"EA",` +
		`"event_type":"dispense","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-SECRET-0412","x_note":"Müller & Söhne <Apotheke>"}`)
	corrected := []byte(strings.Replace(string(orig), `"-30"`, `"-28"`, 1))
	at := time.Now().UTC()
	r := record.FromFailure(record.Failure{
		Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Detail: "the downstream & <ERP> did not answer", Domain: "pharmacy",
		Subject: "events.pharmacy.dispense", Stream: subjects.EventsStream, Seq: 7, Deliveries: 5, Published: at, Payload: orig,
		Envelope: &envelope.Envelope{Domain: "pharmacy", EventType: "dispense", IdempotencyKey: dlqID, PartyID: "BW4829137",
			OrderingKey: "BW4829137.00406051201.L24A0917", Identifiers: map[string]string{"transaction_id": "INV-2025-0181", "registrant_dea": "BW4829137"}},
		FailedAt: at,
	}, at)
	r.DLQID = dlqID
	if err := record.Seal(&r); err != nil {
		t.Fatal(err)
	}
	b, err := record.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := jetstream.New(e.srv.ConnectAs(t, access.Admin))
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subjects.Quarantine("pharmacy", dlqID))
	m.Data = b
	if _, err := admin.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The pending correction, as the redriver stores it, and the
	// redriver's approval.list and policy.get over APPROVALS and AUDIT.
	nc := e.srv.ConnectAs(t, access.Redriver)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := approval.Open(ctx, js, approval.Config{Checker: approval.AuditRegistry{JS: js}})
	if err != nil {
		t.Fatal(err)
	}
	pol := approval.DefaultPolicy()
	dec, err := approval.Needs(pol, approval.Action{Kind: api.ActionCorrect, Domain: "pharmacy", SubjectEventType: "dispense", Original: orig, Corrected: corrected})
	if err != nil || !dec.Needed {
		t.Fatalf("Needs = %+v, %v: a Schedule II quantity change needs a second person", dec, err)
	}
	const requester = "陈伟"
	a, err := st.Create(ctx, approval.Request{Action: api.ActionCorrect, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 1, ChainHead: r.AuditHash,
		Body: []byte(`{"dlq_id":"` + dlqID + `","reason":"counted 28"}`), Payload: corrected,
		Requester: access.Identity{User: requester, Role: access.RoleOperator}, Reason: "counted 28", Decision: dec}, pol)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := micro.AddService(nc, micro.Config{Name: "redriver", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := svc.AddEndpoint("approval_list", micro.HandlerFunc(func(req micro.Request) {
		rep, err := st.List(ctx, api.ApprovalPending, 0)
		if err != nil {
			_ = req.Error(api.ErrUnavailable, err.Error(), nil)
			return
		}
		for i := range rep.Approvals {
			rep.Approvals[i].Request, rep.Approvals[i].Payload, rep.Approvals[i].Diff = nil, nil, nil
		}
		_ = req.RespondJSON(rep)
	}), micro.WithEndpointSubject(api.ApprovalList)); err != nil {
		t.Fatal(err)
	}
	policies := approval.NewPolicyStore(js, nil)
	if err := svc.AddEndpoint("policy_get", micro.HandlerFunc(func(req micro.Request) {
		rep, err := policies.Get(ctx)
		if err != nil {
			_ = req.Error(api.ErrUnavailable, err.Error(), nil)
			return
		}
		_ = req.RespondJSON(rep)
	}), micro.WithEndpointSubject(api.PolicyGet)); err != nil {
		t.Fatal(err)
	}

	c, _ := e.loggedConsole(t)
	op := newClient(t, c, "127.0.0.90")
	op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	page := op.do(http.MethodGet, "/records/"+dlqID, nil).Body.String()
	for _, want := range []string{`id="pending-correction"`, `href="/approvals/` + a.ID + `"`, requester, "quantity_delta",
		`id="key-identifiers"`, "INV-2025-0181", "00406051201", "L24A0917", "dispense"} {
		if !strings.Contains(page, want) {
			t.Errorf("the record page lacks %q", want)
		}
	}
	for _, leak := range []string{"RPH-SECRET-0412", "-28", "Apotheke"} {
		if strings.Contains(page, leak) {
			t.Errorf("the record page shows the payload value %q without a reveal", leak)
		}
	}

	tests := []struct {
		name, path string
		want       []string
	}{
		{"approvals list", "/approvals", []string{`<a class="wrapid" href="/approvals/` + a.ID + `">` + a.ID + `</a>`, `data-copy="` + a.ID + `"`,
			`data-copy="` + dlqID + `"`, "waiting for a second person", `href="/policy"`}},
		{"policy page", "/policy", []string{`id="policy-source"`, "No one has set a policy", `id="policy-corrections"`,
			"<code>" + approval.CorrectionsControlled + "</code>", "DEA schedule", "quantity, the NDC, the lot or the registrant", "For a DEA registrant"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := op.do(http.MethodGet, tc.path, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s: %d", tc.path, w.Code)
			}
			for _, want := range tc.want {
				if !strings.Contains(w.Body.String(), want) {
					t.Errorf("%s lacks %q", tc.path, want)
				}
			}
		})
	}
}

// TestApprovalStatusWords: each status, and what came of it, in words.
func TestApprovalStatusWords(t *testing.T) {
	tests := []struct {
		name string
		a    api.Approval
		want string
	}{
		{"pending", api.Approval{Status: api.ApprovalPending}, "waiting for a second person"},
		{"executed, replayed", api.Approval{Status: api.ApprovalExecuted, Outcome: api.OutcomeReplayed}, "executed: replayed and committed"},
		{"executed, a duplicate", api.Approval{Status: api.ApprovalExecuted, Outcome: api.OutcomeSkippedDuplicate}, "executed: already committed (a duplicate): nothing committed twice"},
		{"executed, a drain", api.Approval{Status: api.ApprovalExecuted, Outcome: "drain-20260301T120000-ab"}, "executed: drain drain-20260301T120000-ab started"},
		{"executed, a failure", api.Approval{Status: api.ApprovalExecuted, Outcome: api.ErrHeld}, "executed: failed: " + api.ErrHeld},
		{"stale", api.Approval{Status: api.ApprovalRefused, Outcome: approval.StaleOutcome}, "refused as stale: the record moved on since the request; never executed"},
		{"forged", api.Approval{Status: api.ApprovalRefused}, "refused: no valid signed decision; never executed"},
		{"rejected", api.Approval{Status: api.ApprovalRejected}, "rejected: never executed"},
		{"expired", api.Approval{Status: api.ApprovalExpired}, "expired undecided: never executed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := approvalStatusWords(tt.a); got != tt.want {
				t.Fatalf("approvalStatusWords = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDraftNamesItsRecord: a kept form of a record's page names the
// record and action, and its domain is sent again as it was, not offered
// for editing; a form of another page keeps its domain editable.
func TestDraftNamesItsRecord(t *testing.T) {
	const id = "pharmacy_6f1e0c2a9b8d7e6f5a4b3c2d1e0f9a8b"
	tests := []struct {
		name, path, record, action string
	}{
		{"correction", "/records/" + id + "/correct", id, "A correction"},
		{"check of a correction", "/records/" + id + "/check", id, "A correction"},
		{"release", "/records/" + id + "/release", id, "A release"},
		{"bulk", "/records/bulk", "", ""},
		{"drain", "/drains/start", "", ""},
		{"approval", "/approvals/appr-20260301T120000-ab/approve", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, action := draftTarget(tt.path)
			if rec != tt.record || action != tt.action {
				t.Fatalf("draftTarget(%q) = %q, %q; want %q, %q", tt.path, rec, action, tt.record, tt.action)
			}
		})
	}
}
