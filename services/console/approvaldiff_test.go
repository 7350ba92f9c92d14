package console

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// reviewFixture is a quarantined pharmacy record and a pending correction
// approval of it in APPROVALS, served by a stand-in approval.get (the
// redriver's) that answers the stored approval, with over applied.
type reviewFixture struct {
	dlqID, approvalID string
	mu                sync.Mutex
	over              func(*api.Approval)
}

func startReview(t *testing.T, e *env) *reviewFixture {
	t.Helper()
	ctx := context.Background()
	suffix := time.Now().UTC().Format("150405.000000000")
	dlqID := "pharmacy_" + strings.NewReplacer(".", "").Replace(suffix) + strings.Repeat("c", 17)
	orig := []byte(`{"transaction_id":"INV-2025-0183","registrant_dea":"BW4829137","ndc":"55150-123-10","qty":50,` +
		`"supplier":{"name":"Müller & Söhne <Großhandel>","city":"Köln"},"lots":["L1","L2"]}`)
	corrected := []byte(`{"transaction_id":"INV-2025-0183","registrant_dea":"BW4829137","ndc":"55150-123-10","qty":500,` +
		`"supplier":{"name":"Müller & Söhne <Großhandel>","city":"Düsseldorf"},"lots":["L1"],"note":"Pharmacie Saint-Étienne"}`)
	at := time.Now().UTC()
	r := record.FromFailure(record.Failure{
		Class: record.ClassValidation, Code: codes.Code("SCHEMA_VIOLATION"), Detail: "qty exceeds the order & <limit>", Domain: "pharmacy",
		Subject: "events.pharmacy.transfer_out", Stream: subjects.EventsStream, Seq: 1, Deliveries: 1, Published: at, Payload: orig,
		Envelope: &envelope.Envelope{Domain: "pharmacy", EventType: "transfer_out", IdempotencyKey: dlqID, PartyID: "BW4829137"},
		FailedAt: at,
		Attempts: []record.Attempt{{At: at, Stage: "validate", Code: codes.Code("SCHEMA_VIOLATION"), Reason: "qty exceeds the order & <limit>", Delivery: 1}},
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
	nc := e.srv.ConnectAs(t, access.Redriver)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := approval.Open(ctx, js, approval.Config{Checker: approval.AuditRegistry{JS: js}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.RedriveRequest{DLQID: dlqID, Payload: corrected, Reason: "invoice says 500"})
	a, err := st.Create(ctx, approval.Request{Action: api.ActionCorrect, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 1, ChainHead: r.AuditHash,
		Body: body, Payload: corrected, Requester: access.Identity{User: "operator", Role: access.RoleOperator}, Reason: "invoice says 500"},
		approval.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	f := &reviewFixture{dlqID: dlqID, approvalID: a.ID}
	svc, err := micro.AddService(nc, micro.Config{Name: "redriver", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := svc.AddEndpoint("approval_get", micro.HandlerFunc(func(req micro.Request) {
		a, err := st.Get(ctx, f.approvalID)
		if err != nil {
			_ = req.Error(api.ErrInternal, err.Error(), nil)
			return
		}
		f.mu.Lock()
		if f.over != nil {
			f.over(&a)
		}
		f.mu.Unlock()
		_ = req.RespondJSON(api.ApprovalReply{Approval: a})
	}), micro.WithEndpointSubject(api.ApprovalGet)); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestApprovalShowsOriginalDiffAndFailure: the approver's page of a
// correction shows the original and the corrected payload side by side,
// the field-level diff (paths, kinds, escaped values, no bracket rows),
// the record's failure context; reading the original is a payload read
// recorded in the access audit naming the approval; the sign button is
// marked for the busy state. An executed approval says what it did.
func TestApprovalShowsOriginalDiffAndFailure(t *testing.T) {
	e := startEnv(t)
	f := startReview(t, e)
	c, _ := e.loggedConsole(t)
	approver := access.DefaultPerson(access.RoleApprover)
	ap := newClient(t, c, "127.0.0.80")
	ap.mustLogin(approver, e.password(approver))

	w := ap.do(http.MethodGet, "/approvals/"+f.approvalID, nil)
	page := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("%d\n%s", w.Code, page)
	}
	esc := html.EscapeString
	for _, want := range []string{
		`id="approval-original"`, `id="approval-payload"`, `id="payload-diff"`,
		`&#34;qty&#34;: 50,`, `&#34;qty&#34;: 500,`,
		`<code>$.qty</code></td><td>changed</td><td><del>50</del></td><td><ins>500</ins></td>`,
		`<code>$.supplier.city</code></td><td>changed</td><td><del>&#34;Köln&#34;</del></td><td><ins>&#34;Düsseldorf&#34;</ins>`,
		`<code>$.lots[1]</code></td><td>removed</td><td><del>&#34;L2&#34;</del></td><td>(none)</td>`,
		`<code>$.note</code></td><td>added</td><td>(none)</td><td><ins>&#34;Pharmacie Saint-Étienne&#34;</ins>`,
		`Müller &amp; Söhne &lt;Großhandel&gt;`,
		`id="failure-code">SCHEMA_VIOLATION<`, `id="failure-class">validation<`, esc("qty exceeds the order & <limit>"), `id="failure-attempts"`, `<td>validate</td>`,
		"What it would do", `data-busy-label="Signing…"`, `data-busy`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the approval page lacks %s", want)
		}
	}
	for _, bad := range []string{"<td><del>}</del>", "<ins>}</ins>", "Müller & Söhne <Großhandel>", "<code>$.transaction_id</code>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the approval page holds %q", bad)
		}
	}

	insp := access.DefaultPerson(access.RoleInspector)
	in := newClient(t, c, "127.0.0.81")
	in.mustLogin(insp, e.password(insp))
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		audit := in.do(http.MethodGet, "/audit?access_user="+approver, nil).Body.String()
		if !strings.Contains(audit, "approval "+f.approvalID+": review of the correction before signing") || !strings.Contains(audit, "<td>"+api.AccessGet+"</td>") {
			return errors.New("the access audit has no payload read naming the approval yet")
		}
		return nil
	})

	// A viewer reads neither payload: no original, no audit entry asked.
	viewer := access.DefaultPerson(access.RoleViewer)
	vw := newClient(t, c, "127.0.0.82")
	vw.mustLogin(viewer, e.password(viewer))
	if vp := vw.do(http.MethodGet, "/approvals/"+f.approvalID, nil).Body.String(); strings.Contains(vp, `id="approval-original"`) || strings.Contains(vp, "Köln") {
		t.Error("the viewer is shown the original payload")
	}

	executed := time.Now().UTC()
	f.mu.Lock()
	f.over = func(a *api.Approval) {
		a.Status, a.Decider, a.Meaning, a.Outcome, a.ExecutedAt = api.ApprovalExecuted, "approver", "reviewed", api.OutcomeReplayed, &executed
	}
	f.mu.Unlock()
	done := ap.do(http.MethodGet, "/approvals/"+f.approvalID, nil).Body.String()
	for _, want := range []string{"What it did", `id="approval-outcome">Executed: ` + api.OutcomeReplayed} {
		if !strings.Contains(done, want) {
			t.Errorf("the executed approval's page lacks %s", want)
		}
	}
	if strings.Contains(done, "What it would do") || strings.Contains(done, `id="approve"`) {
		t.Error("the executed approval's page still offers it or says what it would do")
	}
}

// TestApprovalPayloadReadRefused: audit.get's payload read for an
// approval is refused unless the approval is a correction of that very
// record and the role is an approver or a payload reader; a refused read
// shows nothing and records nothing.
func TestApprovalPayloadReadRefused(t *testing.T) {
	e := startEnv(t)
	f := startReview(t, e)
	other := startReview(t, e)
	for _, tc := range []struct {
		name, user, approvalID, dlqID, code string
	}{
		{"viewer", access.DefaultPerson(access.RoleViewer), f.approvalID, f.dlqID, api.ErrForbidden},
		{"policy role", access.DefaultPerson(access.RolePolicy), f.approvalID, f.dlqID, api.ErrForbidden},
		{"approval of another record", access.DefaultPerson(access.RoleApprover), other.approvalID, f.dlqID, api.ErrForbidden},
		{"unknown approval", access.DefaultPerson(access.RoleApprover), "apr-unknown-0", f.dlqID, api.ErrNotFound},
		{"approval id with a subject token", access.DefaultPerson(access.RoleApprover), "apr.>", f.dlqID, api.ErrBadRequest},
		{"approver of this record", access.DefaultPerson(access.RoleApprover), f.approvalID, f.dlqID, ""},
		{"operator of this record", access.DefaultPerson(access.RoleOperator), f.approvalID, f.dlqID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := e.srv.ConnectAs(t, tc.user)
			rep, err := endpoint.Call[api.GetRequest, api.GetReply](context.Background(), nc, api.AuditGet,
				api.GetRequest{DLQID: tc.dlqID, IncludePayload: true, Reason: "review", ApprovalID: tc.approvalID})
			if got := api.CodeOf(err); got != tc.code {
				t.Fatalf("code %q (%v), want %q", got, err, tc.code)
			}
			if tc.code != "" && rep.State.Payload != nil {
				t.Error("a refused read carries the payload")
			}
			if tc.code == "" && rep.State.Payload == nil {
				t.Error("an allowed read has no payload")
			}
		})
	}
}
