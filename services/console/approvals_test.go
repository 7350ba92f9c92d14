package console

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// loggedConsole is a console on the env's server whose log (debug level,
// JSON) is returned.
func (e *env) loggedConsole(t *testing.T) (*Console, *lockedBuffer) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NATSURL = e.srv.ClientURL()
	buf := &lockedBuffer{}
	c, err := New(cfg, slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.sessions.closeAll)
	return c, buf
}

// TestApprovalsInboxAndDecisions: the inbox lists the pending approval and
// the Overview links its count there; the approval's page shows the
// identity diff and the corrected payload; only the approver is offered
// approve and reject; a viewer's or operator's forged approve is refused
// by the server; a POST without the CSRF token is refused; a wrong
// password is REAUTH_FAILED and executes nothing; the right one signs it.
// The password never appears in a response or the log.
func TestApprovalsInboxAndDecisions(t *testing.T) {
	e := startEnv(t)
	f := startFakeRedriver(t, e)
	c, logs := e.loggedConsole(t)
	approver := access.DefaultPerson(access.RoleApprover)
	pw := e.password(approver)

	ap := newClient(t, c, "127.0.0.70")
	token := ap.mustLogin(approver, pw)
	if page := ap.do(http.MethodGet, "/", nil).Body.String(); !strings.Contains(page, `<a href="/approvals" id="pending-approvals">1</a>`) || !strings.Contains(page, `href="/approvals/apr-7"`) {
		t.Errorf("the overview does not link its pending approval:\n%s", page)
	}
	inbox := ap.do(http.MethodGet, "/approvals", nil).Body.String()
	for _, want := range []string{`id="approvals-table"`, `href="/approvals/apr-7"`, "identity change", "idempotency_key", "operator"} {
		if !strings.Contains(inbox, want) {
			t.Errorf("the inbox lacks %s", want)
		}
	}
	if strings.Contains(inbox, "KEY-AFTER") {
		t.Error("the inbox shows a diff value (approval.list has none; only approval.get shows them)")
	}
	page := ap.do(http.MethodGet, "/approvals/apr-7", nil).Body.String()
	for _, want := range []string{`id="identity-diff"`, "KEY-BEFORE", "KEY-AFTER", `id="approval-payload"`, `&#34;qty&#34;: 500`, `id="approve"`, `id="reject"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the approval page lacks %s", want)
		}
	}

	op := newClient(t, c, "127.0.0.71")
	optoken := op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	if page := op.do(http.MethodGet, "/approvals/apr-7", nil).Body.String(); strings.Contains(page, `id="approve"`) || strings.Contains(page, `id="reject"`) {
		t.Error("the operator is offered approve or reject")
	}
	viewer := newClient(t, c, "127.0.0.72")
	vtoken := viewer.mustLogin(access.DefaultPerson(access.RoleViewer), e.password(access.DefaultPerson(access.RoleViewer)))

	for _, tc := range []struct {
		name     string
		cl       *client
		path     string
		form     url.Values
		status   int
		code     string
		executed bool
	}{
		{"viewer's forged approve", viewer, "/approvals/apr-7/approve", url.Values{"csrf": {vtoken}, "meaning": {"forged"}, "password": {pw}}, http.StatusForbidden, api.ErrForbidden, false},
		{"operator's forged approve", op, "/approvals/apr-7/approve", url.Values{"csrf": {optoken}, "meaning": {"forged"}, "password": {pw}}, http.StatusForbidden, api.ErrForbidden, false},
		{"viewer's forged reject", viewer, "/approvals/apr-7/reject", url.Values{"csrf": {vtoken}, "meaning": {"forged"}}, http.StatusForbidden, api.ErrForbidden, false},
		{"approve without the CSRF token", ap, "/approvals/apr-7/approve", url.Values{"meaning": {"m"}, "password": {pw}}, http.StatusForbidden, "", false},
		{"reject without the CSRF token", ap, "/approvals/apr-7/reject", url.Values{"meaning": {"m"}}, http.StatusForbidden, "", false},
		{"approve without a meaning", ap, "/approvals/apr-7/approve", url.Values{"csrf": {token}, "password": {pw}}, http.StatusBadRequest, api.ErrBadRequest, false},
		{"reject without a meaning", ap, "/approvals/apr-7/reject", url.Values{"csrf": {token}}, http.StatusBadRequest, api.ErrBadRequest, false},
		{"approve with the password", ap, "/approvals/apr-7/approve", url.Values{"csrf": {token}, "meaning": {"reviewed against the invoice"}, "password": {pw}}, http.StatusOK, "", true},
		{"approve again", ap, "/approvals/apr-7/approve", url.Values{"csrf": {token}, "meaning": {"again"}, "password": {pw}}, http.StatusConflict, api.ErrAlreadyDecided, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.cl.doFollow(http.MethodPost, tc.path, tc.form)
			body := w.Body.String()
			if w.Code != tc.status || tc.code != "" && !strings.Contains(body, "<strong>"+tc.code+"</strong>") {
				t.Errorf("%d, want %d %s\n%s", w.Code, tc.status, tc.code, body)
			}
			if strings.Contains(body, pw) {
				t.Error("the password is echoed into the response")
			}
			f.mu.Lock()
			executed := f.approval.Status == api.ApprovalExecuted
			f.mu.Unlock()
			if executed != tc.executed {
				t.Errorf("executed %v, want %v", executed, tc.executed)
			}
			if tc.executed && tc.code == "" && (!strings.Contains(body, "Approved by approver (reviewed against the invoice); executed: replayed.") || strings.Contains(body, `id="approve"`)) {
				t.Errorf("the signed approval page:\n%s", body)
			}
		})
	}
	t.Run("reject with a meaning", func(t *testing.T) {
		f.mu.Lock()
		f.approval.Status, f.approval.Decider, f.approval.Meaning, f.approval.Outcome = api.ApprovalPending, "", "", ""
		f.mu.Unlock()
		w := ap.doFollow(http.MethodPost, "/approvals/apr-7/reject", url.Values{"csrf": {token}, "meaning": {"wrong invoice"}})
		if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "Rejected: it will not run.") || !strings.Contains(body, "approver, ") && !strings.Contains(body, "wrong invoice") {
			t.Errorf("%d\n%s", w.Code, body)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.decisions = f.decisions[:len(f.decisions)-1]
		if f.approval.Status != api.ApprovalRejected {
			t.Errorf("status %s", f.approval.Status)
		}
	})
	f.mu.Lock()
	if got := strings.Join(f.decisions, "|"); got != "reviewed against the invoice|again" {
		t.Errorf("the decisions that reached the redriver: %q", got)
	}
	f.mu.Unlock()
	if l := logs.String(); strings.Contains(l, pw) || !strings.Contains(l, "approval approve") {
		t.Errorf("the log holds the password (%v) or no approve line", strings.Contains(l, pw))
	}
}

// TestHolds: against the real auditor, an operator places a party hold
// from the Holds page and it is listed; refused forms say which field; the
// viewer is offered no hold form and a forged place is refused by the
// server; a POST without the CSRF token is refused; a lift is done or sent
// for approval.
func TestHolds(t *testing.T) {
	e := startEnv(t)
	startFakeRedriver(t, e) // the approval owner: a lift waits for approval
	c := e.newConsole(t, nil)
	op := newClient(t, c, "127.0.0.73")
	token := op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	if page := op.do(http.MethodGet, "/holds", nil).Body.String(); !strings.Contains(page, `id="place-party-hold"`) {
		t.Fatal("the operator is offered no party hold")
	}
	party := "PARTY-HOLD-TEST"
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		field  string
	}{
		{"no case id", url.Values{"csrf": {token}, "party": {party}, "reason": {"r"}}, http.StatusBadRequest, "case_id"},
		{"no reason", url.Values{"csrf": {token}, "party": {party}, "case_id": {"CASE-1"}}, http.StatusBadRequest, "reason"},
		{"no party", url.Values{"csrf": {token}, "case_id": {"CASE-1"}, "reason": {"r"}}, http.StatusBadRequest, "target"},
		{"no CSRF token", url.Values{"party": {party}, "case_id": {"CASE-1"}, "reason": {"r"}}, http.StatusForbidden, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := op.do(http.MethodPost, "/holds", tc.form)
			if w.Code != tc.status || tc.field != "" && !strings.Contains(w.Body.String(), api.ErrBadRequest+"</strong> ("+tc.field) {
				t.Errorf("%d\n%s", w.Code, w.Body)
			}
		})
	}
	// A party with no record stored: refused, and the form asks to
	// confirm (keeping what was typed); confirmed, the hold is placed.
	place := url.Values{"csrf": {token}, "party": {party}, "case_id": {"CASE-1"}, "reason": {"litigation"}}
	w := op.do(http.MethodPost, "/holds", place)
	if body := w.Body.String(); w.Code == http.StatusSeeOther || !strings.Contains(body, api.ErrHoldMatchesNothing) ||
		!strings.Contains(body, `id="hold-confirm"`) || !strings.Contains(body, `value="litigation"`) {
		t.Fatalf("a hold matching nothing, unconfirmed: %d\n%s", w.Code, body)
	}
	place.Set("confirm", "on")
	w = op.do(http.MethodPost, "/holds", place)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("place: %d\n%s", w.Code, w.Body)
	}
	page := op.do(http.MethodGet, "/holds", nil).Body.String()
	if !strings.Contains(page, "party "+party) || !strings.Contains(page, "CASE-1") || !strings.Contains(page, "litigation") {
		t.Fatalf("the hold is not listed:\n%s", page)
	}
	m := regexp.MustCompile(`action="/holds/([A-Za-z0-9_-]+)/lift"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no lift form")
	}

	viewer := newClient(t, c, "127.0.0.74")
	vtoken := viewer.mustLogin(access.DefaultPerson(access.RoleViewer), e.password(access.DefaultPerson(access.RoleViewer)))
	vpage := viewer.do(http.MethodGet, "/holds", nil).Body.String()
	if strings.Contains(vpage, `id="place-party-hold"`) || strings.Contains(vpage, `class="lift-hold"`) || !strings.Contains(vpage, "CASE-1") {
		t.Error("the viewer is offered hold controls, or does not see the hold")
	}
	for _, path := range []string{"/holds", "/holds/" + m[1] + "/lift", "/records/pharmacy_x/hold"} {
		w := viewer.do(http.MethodPost, path, url.Values{"csrf": {vtoken}, "party": {"P"}, "case_id": {"CASE-1"}, "reason": {"forged"}})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), api.ErrForbidden) {
			t.Errorf("forged POST %s as viewer: %d", path, w.Code)
		}
	}
	if w := op.do(http.MethodPost, "/holds/"+m[1]+"/lift", url.Values{"csrf": {token}, "case_id": {"CASE-1"}}); w.Code != http.StatusBadRequest {
		t.Errorf("lift without a reason: %d", w.Code)
	}
	// A lift is a decision signed with the person's passkey: sent
	// unsigned (a browser without JavaScript), the auditor refuses it.
	w = op.doFollow(http.MethodPost, "/holds/"+m[1]+"/lift", url.Values{"csrf": {token}, "case_id": {"CASE-1"}, "reason": {"case closed"}})
	if body := w.Body.String(); w.Code != http.StatusForbidden || !strings.Contains(body, api.ErrDecisionUnsigned) {
		t.Errorf("unsigned lift: %d\n%s", w.Code, body)
	}
}

// TestHeldRefusalShown: a redrive or release of a held record shows the
// service's HELD refusal as a conflict (not a gateway error), and a
// correction sent for approval links its approval.
func TestHeldRefusalShown(t *testing.T) {
	e := startEnv(t)
	startFakeRedriver(t, e)
	c := e.newConsole(t, nil)
	op := newClient(t, c, "127.0.0.75")
	token := op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	for _, tc := range []struct{ name, path string }{
		{"redrive", "/records/" + heldID + "/redrive"},
		{"release", "/records/" + heldID + "/release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := op.do(http.MethodPost, tc.path, url.Values{"csrf": {token}, "reason": {"r"}})
			if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "<strong>"+api.ErrHeld+"</strong>: the event is under legal hold") {
				t.Errorf("%d\n%s", w.Code, w.Body)
			}
		})
	}
	w := op.doFollow(http.MethodPost, "/records/abc/correct", url.Values{"csrf": {token}, "payload": {`{"a":1}`}, "reason": {"fix the key"}})
	if !strings.Contains(w.Body.String(), `<a href="/approvals/apr-7" id="notice-approval">`) {
		t.Errorf("the notice does not link its approval:\n%s", w.Body)
	}
}
