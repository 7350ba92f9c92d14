package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// fakeRedriver answers the redriver's endpoints on the env's real server
// as the redriver's service user: a drain paused by its canary, a resume
// that records its reason, and a correction answered APPROVAL_REQUIRED
// with the pending approval in the error's body (the redriver's two-person
// approval).
type fakeRedriver struct {
	mu      sync.Mutex
	state   api.DrainState
	resumes []api.DrainResumeRequest
	// approval is the one pending approval (apr-7) and decisions the
	// approve and reject requests that reached the fake.
	approval  api.Approval
	decisions []string
	// signed are the signed decisions of those requests (nil: unsigned).
	signed []*api.SignedDecision
	// approverPassword is the password approve accepts.
	approverPassword string
}

// heldID is the record the fake redriver refuses as held (HELD).
const heldID = "pharmacy_held"

func startFakeRedriver(t *testing.T, e *env) *fakeRedriver {
	t.Helper()
	f := &fakeRedriver{state: api.DrainState{
		DrainID: "drain-1", Status: api.DrainPaused, StartedBy: "operator",
		Request:     api.DrainStartRequest{Canary: 5},
		DrainCounts: api.DrainCounts{Selected: 20, Replayed: 5, ReplayFailed: 5},
		Remaining:   15,
		Events: []api.DrainEvent{{Action: api.ActionPaused, Actor: "redriver", At: time.Now(), Reason: api.PauseCanary,
			Codes:  map[string]int{"DOWNSTREAM_UNAVAILABLE": 5},
			Window: &api.WindowFigures{Outcomes: 5, Failures: 5, Rate: 1, MaxRate: 0.1, Size: 100}}},
	}}
	nc := e.srv.ConnectAs(t, access.Redriver)
	svc, err := micro.AddService(nc, micro.Config{Name: "redriver", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	add := func(subject string, h micro.HandlerFunc) {
		if err := svc.AddEndpoint(strings.ReplaceAll(subject, ".", "_"), h, micro.WithEndpointSubject(subject)); err != nil {
			t.Fatal(err)
		}
	}
	add(api.DrainStatus, func(r micro.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		_ = r.RespondJSON(f.state)
	})
	add(api.DrainResume, func(r micro.Request) {
		var req api.DrainResumeRequest
		_ = json.Unmarshal(r.Data(), &req)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.resumes = append(f.resumes, req)
		f.state.Status = api.DrainRunning
		_ = r.RespondJSON(f.state)
	})
	add(api.DrainStart, func(r micro.Request) {
		var req api.DrainStartRequest
		if _ = json.Unmarshal(r.Data(), &req); req.DryRun {
			_ = r.RespondJSON(api.DrainStartReply{Plan: &api.DrainPlan{Selected: 20, Keys: 20}})
			return
		}
		body, _ := json.Marshal(map[string]any{"code": api.ErrApprovalRequired, "message": "a big drain needs approval",
			"approval": api.Approval{ID: "apr-9", Action: api.ActionDrain, Status: api.ApprovalPending, Reasons: []string{"drain_max_selected"}}})
		_ = r.Error(api.ErrApprovalRequired, "a big drain needs approval", body)
	})
	// The auditor asks the redriver, the approval owner, to store a hold
	// lift's pending approval.
	add(api.ApprovalHoldLift, func(r micro.Request) {
		var req api.ApprovalHoldLiftRequest
		_ = json.Unmarshal(r.Data(), &req)
		body, _ := json.Marshal(map[string]any{"code": api.ErrApprovalRequired, "message": "lifting a hold needs approval",
			"approval": api.Approval{ID: "apr-10", Action: api.ActionHoldLift, HoldID: req.HoldID, Status: api.ApprovalPending, Reasons: []string{"hold_lift"}}})
		_ = r.Error(api.ErrApprovalRequired, "lifting a hold needs approval", body)
	})
	add(api.Release, func(r micro.Request) {
		_ = r.Error(api.ErrHeld, "the event is under legal hold [h-1]: it may not be drained, redriven, released or resolved until lifted", nil)
	})
	add(api.Redrive, func(r micro.Request) {
		var req api.RedriveRequest
		if _ = json.Unmarshal(r.Data(), &req); req.DLQID == heldID {
			_ = r.Error(api.ErrHeld, "the event is under legal hold [h-1]: it may not be drained, redriven, released or resolved until lifted", nil)
			return
		}
		body, _ := json.Marshal(map[string]any{"code": api.ErrApprovalRequired, "message": "an identity-changing correction needs approval",
			"approval": api.Approval{ID: "apr-7", Action: api.ActionCorrect, Status: api.ApprovalPending, Reasons: []string{"identity change"}}})
		_ = r.Error(api.ErrApprovalRequired, "an identity-changing correction needs approval", body)
	})
	f.approval = api.Approval{ID: "apr-7", Action: api.ActionCorrect, DLQID: "pharmacy_abc", Status: api.ApprovalPending,
		Reasons: []string{"identity change"}, DiffFields: []string{"idempotency_key"}, Requester: "operator", RequesterRole: "operator",
		RequestedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Reason: "the invoice says 500",
		Diff:    []api.IdentityChange{{Field: "idempotency_key", Before: "KEY-BEFORE", After: "KEY-AFTER"}},
		Payload: []byte(`{"qty":500}`)}
	f.approverPassword = e.password(access.DefaultPerson(access.RoleApprover))
	add(api.ApprovalList, func(r micro.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		a := f.approval
		a.Diff, a.Payload = nil, nil
		_ = r.RespondJSON(api.ApprovalListReply{Approvals: []api.Approval{a}})
	})
	add(api.ApprovalGet, func(r micro.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		_ = r.RespondJSON(api.ApprovalReply{Approval: f.approval})
	})
	decide := func(approve bool) micro.HandlerFunc {
		return func(r micro.Request) {
			var req api.ApprovalDecisionRequest
			_ = json.Unmarshal(r.Data(), &req)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.decisions = append(f.decisions, req.Meaning)
			f.signed = append(f.signed, req.Signed)
			switch {
			case f.approval.Status != api.ApprovalPending:
				_ = r.Error(api.ErrAlreadyDecided, "already decided", nil)
			case approve:
				now := time.Now()
				f.approval.Status, f.approval.Decider, f.approval.Meaning, f.approval.DecidedAt = api.ApprovalExecuted, "approver", req.Meaning, &now
				f.approval.Outcome, f.approval.ExecutedAt = api.OutcomeReplayed, &now
				_ = r.RespondJSON(api.ApprovalReply{Approval: f.approval})
			default:
				f.approval.Status, f.approval.Decider, f.approval.Meaning = api.ApprovalRejected, "approver", req.Meaning
				_ = r.RespondJSON(api.ApprovalReply{Approval: f.approval})
			}
		}
	}
	add(api.ApprovalApprove, decide(true))
	add(api.ApprovalReject, decide(false))
	// The endpoints' subscriptions reach the server before the test's
	// first request (without it a request can find no responder).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDrainPausedAndResume: a paused drain shows its reason and failing
// codes, a chart and, for an operator, Resume with a reason; a resume
// without a reason is refused by the console, one with a reason reaches
// the redriver; a viewer sees no Resume and a forged one is refused by
// the server.
func TestDrainPausedAndResume(t *testing.T) {
	e := startEnv(t)
	f := startFakeRedriver(t, e)
	c := e.newConsole(t, nil)
	op := newClient(t, c, "127.0.0.60")
	token := op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))

	w := op.do(http.MethodGet, "/drains/drain-1", nil)
	page := w.Body.String()
	for _, want := range []string{`id="drain-paused"`, "DOWNSTREAM_UNAVAILABLE", "the canary", `id="resume-drain"`, `id="cancel-drain"`, `<svg class="chart"`, `id="chart-table"`} {
		if !strings.Contains(page, want) {
			t.Errorf("paused drain page lacks %s", want)
		}
	}
	if w := op.do(http.MethodPost, "/drains/drain-1/resume", url.Values{"csrf": {token}}); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), api.ErrBadRequest) {
		t.Errorf("resume without a reason: %d", w.Code)
	}
	if w := op.do(http.MethodPost, "/drains/drain-1/resume", url.Values{"csrf": {token}, "reason": {"downstream fixed"}}); w.Code != http.StatusSeeOther {
		t.Errorf("resume: %d\n%s", w.Code, w.Body)
	}
	f.mu.Lock()
	if len(f.resumes) != 1 || f.resumes[0].Reason != "downstream fixed" {
		t.Errorf("resumes %+v", f.resumes)
	}
	f.state.Status = api.DrainPaused
	f.mu.Unlock()

	viewer := newClient(t, c, "127.0.0.61")
	vtoken := viewer.mustLogin(access.DefaultPerson(access.RoleViewer), e.password(access.DefaultPerson(access.RoleViewer)))
	if page := viewer.do(http.MethodGet, "/drains/drain-1", nil).Body.String(); strings.Contains(page, `id="resume-drain"`) || !strings.Contains(page, `id="drain-paused"`) {
		t.Error("the viewer is offered Resume, or does not see the pause")
	}
	if w := viewer.do(http.MethodPost, "/drains/drain-1/resume", url.Values{"csrf": {vtoken}, "reason": {"forged"}}); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), api.ErrForbidden) {
		t.Errorf("forged resume as viewer: %d", w.Code)
	}
	f.mu.Lock()
	if len(f.resumes) != 1 {
		t.Errorf("the forged resume reached the redriver: %+v", f.resumes)
	}
	f.mu.Unlock()
}

// TestDrainEventsSendControlsOnChange: the event stream sends the
// controls only when they differ from the page's (a reason being typed is
// not wiped each second).
func TestDrainEventsSendControlsOnChange(t *testing.T) {
	e := startEnv(t)
	startFakeRedriver(t, e)
	c := e.newConsole(t, nil)
	c.drains.sseEvery = 50 * time.Millisecond
	op := newClient(t, c, "127.0.0.62")
	op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	for _, tc := range []struct {
		name, key    string
		wantControls bool
	}{
		{"page shows the paused controls", api.DrainPaused + "/true/true", false},
		{"page shows the running controls", api.DrainRunning + "/true/false", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/drains/drain-1/events?controls="+url.QueryEscape(tc.key), nil)
			r.RemoteAddr = op.addr + ":40000"
			for _, ck := range op.cookies {
				r.AddCookie(ck)
			}
			w := httptest.NewRecorder()
			c.Handler().ServeHTTP(w, r) // returns when ctx ends
			body := w.Body.String()
			if n := strings.Count(body, "event: progress"); n < 2 {
				t.Errorf("%d progress events", n)
			}
			if got := strings.Count(body, "event: controls"); (got > 0) != tc.wantControls || got > 1 {
				t.Errorf("%d controls events, want them %v (once)", got, tc.wantControls)
			}
		})
	}
}

// TestCorrectionSentForApproval: a correction (and a drain) the redriver
// answers APPROVAL_REQUIRED shows as sent for approval with the
// approval's id.
func TestCorrectionSentForApproval(t *testing.T) {
	e := startEnv(t)
	startFakeRedriver(t, e)
	c := e.newConsole(t, nil)
	op := newClient(t, c, "127.0.0.63")
	token := op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	w := op.doFollow(http.MethodPost, "/records/abc/correct", url.Values{"csrf": {token}, "payload": {`{"a":1}`}, "reason": {"fix the key"}})
	if body := w.Body.String(); !strings.Contains(body, "Sent for approval apr-7") || strings.Contains(body, `class="alert"`) && strings.Contains(body, api.ErrApprovalRequired) {
		t.Errorf("correction answered APPROVAL_REQUIRED: %d\n%s", w.Code, body)
	}
	plan := op.do(http.MethodGet, "/drains/plan?exhausted=on&canary=3", nil).Body.String()
	w = op.doFollow(http.MethodPost, "/drains/start", url.Values{"csrf": {token}, "exhausted": {"on"}, "canary": {"3"}, "reason": {"big"}, "plan_token": {planTokenIn(t, plan)}})
	// (The fake answers no drain.list: the Drains page shows that too.)
	if !strings.Contains(w.Body.String(), "Sent for approval apr-9 (drain_max_selected)") {
		t.Errorf("drain answered APPROVAL_REQUIRED: %d\n%s", w.Code, w.Body)
	}
	for _, tc := range []struct{ name, payload, reason, field string }{
		{"not JSON", `{"a":`, "x", "payload"},
		{"no reason", `{"a":1}`, "", "reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := op.do(http.MethodPost, "/records/abc/correct", url.Values{"csrf": {token}, "payload": {tc.payload}, "reason": {tc.reason}})
			if !strings.Contains(w.Body.String(), api.ErrBadRequest+"</strong> ("+tc.field+")") {
				t.Errorf("%d\n%s", w.Code, w.Body)
			}
		})
	}
}

// TestGovernanceRefusals: the viewer is offered no export and its forged
// corrections, checks, resumes and exports are refused by the server; a
// POST of any new action without the CSRF token is refused by the console.
func TestGovernanceRefusals(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, func(c *Config) { c.CallTimeout = 5 * time.Second })
	viewer := newClient(t, c, "127.0.0.64")
	token := viewer.mustLogin(access.DefaultPerson(access.RoleViewer), e.password(access.DefaultPerson(access.RoleViewer)))
	if page := viewer.do(http.MethodGet, "/audit", nil).Body.String(); strings.Contains(page, `id="export"`) || !strings.Contains(page, `id="h-access"`) {
		t.Error("the viewer is offered the export, or not shown the access audit")
	}
	for _, tc := range []struct {
		name, path string
		form       url.Values
	}{
		{"correct", "/records/abc/correct", url.Values{"payload": {`{"a":1}`}, "reason": {"forged"}}},
		{"check", "/records/abc/check", url.Values{"payload": {`{"a":1}`}, "reveal_reason": {"forged"}}},
		{"resume", "/drains/abc/resume", url.Values{"reason": {"forged"}}},
		{"export", "/audit/export", url.Values{"format": {"csv"}, "reason": {"forged"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", token)
			w := viewer.do(http.MethodPost, tc.path, tc.form)
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), api.ErrForbidden) {
				t.Errorf("forged POST %s as viewer: %d\n%s", tc.path, w.Code, w.Body)
			}
			if cd := w.Header().Get("Content-Disposition"); cd != "" {
				t.Errorf("a refused export was sent as a download (%s)", cd)
			}
		})
	}
	op := newClient(t, c, "127.0.0.65")
	op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	for _, path := range []string{"/records/abc/correct", "/records/abc/check", "/drains/abc/resume", "/audit/export"} {
		if w := op.do(http.MethodPost, path, url.Values{"reason": {"x"}, "format": {"csv"}}); w.Code != http.StatusForbidden {
			t.Errorf("POST %s without a CSRF token: %d", path, w.Code)
		}
	}
}

// TestExportDownloadAndAccessAudit: an inspector's CSV export is a
// download with the export's header row, refused without a reason, and
// the read is listed in the access audit on the Audit page.
func TestExportDownloadAndAccessAudit(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	insp := access.DefaultPerson(access.RoleInspector)
	cl := newClient(t, c, "127.0.0.66")
	token := cl.mustLogin(insp, e.password(insp))
	if page := cl.do(http.MethodGet, "/audit", nil).Body.String(); !strings.Contains(page, `id="export"`) || !strings.Contains(page, `hx-boost="false"`) {
		t.Fatal("the inspector is not offered the export form (unboosted)")
	}
	if w := cl.do(http.MethodPost, "/audit/export", url.Values{"csrf": {token}, "format": {"csv"}}); w.Code != http.StatusBadRequest || w.Header().Get("Content-Disposition") != "" {
		t.Errorf("export without a reason: %d %q", w.Code, w.Header().Get("Content-Disposition"))
	}
	reason := "handler test " + time.Now().Format(time.RFC3339Nano)
	for _, tc := range []struct{ format, ctype, prefix string }{
		{"csv", "text/csv", "dlq_id,domain,record_index"},
		{"jsonl", "application/jsonl", `{"header":{"format":"` + api.ExportFormat},
		{"xlsx", "spreadsheetml", "PK"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			w := cl.do(http.MethodPost, "/audit/export", url.Values{"csrf": {token}, "format": {tc.format}, "reason": {reason}})
			if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Type"), tc.ctype) ||
				!strings.Contains(w.Header().Get("Content-Disposition"), `attachment; filename="deadletter-export-`) {
				t.Fatalf("export: %d %v\n%.300s", w.Code, w.Header(), w.Body)
			}
			if !strings.HasPrefix(w.Body.String(), tc.prefix) {
				t.Errorf("export begins %.80q", w.Body.String())
			}
		})
	}
	page := cl.do(http.MethodGet, "/audit?access_user="+insp, nil).Body.String()
	if !strings.Contains(page, `id="access-table"`) || !strings.Contains(page, reason) || !strings.Contains(page, "<td>"+api.AccessExport+"</td>") {
		t.Errorf("the export is not in the access audit:\n%s", page)
	}
}
