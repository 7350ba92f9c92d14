package console

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
)

// planTokenRE finds a plan page's token.
var planTokenRE = regexp.MustCompile(`name="plan_token" value="([0-9a-f]*)"`)

// planTokenIn returns the plan token of a plan page.
func planTokenIn(t *testing.T, page string) string {
	t.Helper()
	m := planTokenRE.FindStringSubmatch(page)
	if m == nil || m[1] == "" {
		t.Fatalf("no plan token in the page:\n%s", page)
	}
	return m[1]
}

// TestCorrectionDiffNoSpuriousBrace: a correction typed in the browser
// (CRLF line ends, a final line break) diffs against the original by its
// changed lines only: no "- }" / "+ }".
func TestCorrectionDiffNoSpuriousBrace(t *testing.T) {
	orig := `{"name":"Müller & Söhne <Großhandel>","qty":10}`
	for _, tc := range []struct{ name, typed string }{
		{"CRLF and a final line break", "{\r\n  \"name\": \"Müller & Söhne <Großhandel>\",\r\n  \"qty\": 12\r\n}\r\n"},
		{"trailing spaces", `{"name":"Müller & Söhne <Großhandel>","qty":12}` + "  \n\n"},
		{"compact", `{"name":"Müller & Söhne <Großhandel>","qty":12}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, changed := lineDiff(showPayload([]byte(orig)), showPayload([]byte(tc.typed)))
			var ops []string
			for _, l := range lines {
				if l.Op != " " {
					ops = append(ops, l.Op+l.Text)
				}
			}
			if want := `-  "qty": 10|+  "qty": 12`; !changed || strings.Join(ops, "|") != want {
				t.Errorf("changed lines %q, want %q", strings.Join(ops, "|"), want)
			}
		})
	}
}

// TestFailedLoginKeepsUserName: a refused login shows the form again with
// the user name typed (escaped), never the password.
func TestFailedLoginKeepsUserName(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	cl := newClient(t, c, "127.0.0.90")
	w := cl.login(`amara.okafor"<b>`, "WRONG-password-123")
	body := w.Body.String()
	if w.Code != http.StatusUnauthorized || !strings.Contains(body, `value="amara.okafor&#34;&lt;b&gt;"`) {
		t.Errorf("%d: the user name is not kept (escaped):\n%s", w.Code, body)
	}
	if strings.Contains(body, "WRONG-password-123") {
		t.Error("the password is written back into the page")
	}
}

// TestExpiredSessionKeepsWork: a form posted after its session ended is
// kept: the person is sent to log in (not a bare 401), then shown the
// form again with what they typed (not the password, not the old CSRF
// token), to send again; only to the same person in the same browser,
// once. A POST of a browser without an ended session is still 401.
func TestExpiredSessionKeepsWork(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	op, viewer := access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleViewer)
	correction := "{\n  \"name\": \"Müller & Söhne <Großhandel>\",\n  \"qty\": 12\n}"
	expire := func(t *testing.T, cl *client) string {
		t.Helper()
		token := cl.mustLogin(op, e.password(op))
		c.sessions.mu.Lock()
		s := c.sessions.byID[cl.cookies[sessionCookie].Value]
		c.sessions.mu.Unlock()
		natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
			if s.idleSince(time.Now()) <= c.cfg.IdleTimeout {
				return errors.New("not idle yet")
			}
			return nil
		})
		return token
	}
	t.Run("kept and given back after the login", func(t *testing.T) {
		cl := newClient(t, c, "127.0.0.91")
		token := expire(t, cl)
		w := cl.do(http.MethodPost, "/records/pharmacy_abc/check", url.Values{"csrf": {token}, "domain": {"pharmacy"},
			"reveal_reason": {"fix the quantity"}, "payload": {correction}, "reason": {"the invoice says 12"}, "password": {"never-kept"}})
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login?next=%2Fdraft" {
			t.Fatalf("a POST after the session ended: %d %q\n%s", w.Code, w.Header().Get("Location"), w.Body)
		}
		page := cl.do(http.MethodGet, "/login?next=%2Fdraft", nil).Body.String()
		if !strings.Contains(page, "Your session ended") {
			t.Errorf("the login does not say the work is kept:\n%s", page)
		}
		w = cl.do(http.MethodPost, "/login", url.Values{"csrf": {csrfIn(t, page)}, "user": {op}, "password": {e.password(op)}, "next": {"/draft"}})
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/draft" {
			t.Fatalf("login: %d %q", w.Code, w.Header().Get("Location"))
		}
		w = cl.do(http.MethodGet, "/draft", nil)
		body := w.Body.String()
		for _, want := range []string{`action="/records/pharmacy_abc/check"`, "Müller &amp; Söhne &lt;Großhandel&gt;", `value="the invoice says 12"`, `value="fix the quantity"`, "nothing was done"} {
			if !strings.Contains(body, want) && !strings.Contains(body, strings.ReplaceAll(want, "&#34;", `"`)) {
				t.Errorf("the draft page lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "never-kept") || strings.Contains(body, token) {
			t.Error("the draft kept the password or the old CSRF token")
		}
		if w := cl.do(http.MethodGet, "/draft", nil); w.Code != http.StatusSeeOther {
			t.Errorf("a draft is shown twice: %d", w.Code)
		}
	})
	t.Run("another person does not get it", func(t *testing.T) {
		cl := newClient(t, c, "127.0.0.92")
		token := expire(t, cl)
		if w := cl.do(http.MethodPost, "/records/pharmacy_abc/redrive", url.Values{"csrf": {token}, "reason": {"operator's reason"}}); w.Code != http.StatusSeeOther {
			t.Fatalf("%d", w.Code)
		}
		cl.mustLogin(viewer, e.password(viewer))
		w := cl.do(http.MethodGet, "/draft", nil)
		if w.Code != http.StatusSeeOther || strings.Contains(w.Body.String(), "operator's reason") {
			t.Errorf("another person got the draft: %d", w.Code)
		}
	})
	t.Run("no ended session: 401", func(t *testing.T) {
		cl := newClient(t, c, "127.0.0.93")
		n := c.login.drafts.len()
		if w := cl.do(http.MethodPost, "/records/pharmacy_abc/redrive", url.Values{"reason": {"forged"}}); w.Code != http.StatusUnauthorized {
			t.Errorf("%d", w.Code)
		}
		if c.login.drafts.len() != n {
			t.Error("a draft was kept for a browser without an ended session")
		}
	})
}

// TestGetOfPostOpensItsPage: a GET of a POST-only URL (a result page in
// the history, a restored tab) opens its page, never 405.
func TestGetOfPostOpensItsPage(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	cl := newClient(t, c, "127.0.0.94")
	cl.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	for _, tc := range []struct{ path, want string }{
		{"/records/pharmacy_abc/redrive", "/records/pharmacy_abc"},
		{"/records/pharmacy_abc/reveal", "/records/pharmacy_abc"},
		{"/records/pharmacy_abc/check", "/records/pharmacy_abc"},
		{"/records/pharmacy_abc/correct", "/records/pharmacy_abc"},
		{"/records/pharmacy_abc/hold", "/records/pharmacy_abc"},
		{"/records/bulk", "/records"},
		{"/drains/start", "/drains"},
		{"/drains/drain-1/cancel", "/drains/drain-1"},
		{"/drains/drain-1/resume", "/drains/drain-1"},
		{"/audit/verify", "/audit"},
		{"/audit/reconcile", "/audit"},
		{"/audit/checkpoint", "/audit"},
		{"/audit/export", "/audit"},
		{"/approvals/apr-7/approve", "/approvals/apr-7"},
		{"/approvals/apr-7/reject", "/approvals/apr-7"},
		{"/holds/h-1/lift", "/holds"},
		{"/logout", "/"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			w := cl.do(http.MethodGet, tc.path, nil)
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != tc.want {
				t.Errorf("GET %s: %d %q, want 303 %q", tc.path, w.Code, w.Header().Get("Location"), tc.want)
			}
		})
	}
	if w := cl.do(http.MethodGet, "/audit", nil); w.Code != http.StatusOK {
		t.Errorf("still logged in after GET /logout? %d", w.Code)
	}
}

// TestActionsRedirect: an action's outcome is shown by a GET of its page
// (POST/redirect/GET), once.
func TestActionsRedirect(t *testing.T) {
	e := startEnv(t)
	f := startFakeRedriver(t, e)
	c := e.newConsole(t, nil)
	ap := newClient(t, c, "127.0.0.95")
	token := ap.mustLogin(access.DefaultPerson(access.RoleApprover), e.password(access.DefaultPerson(access.RoleApprover)))
	f.mu.Lock()
	f.approval.Status, f.approval.Decider, f.approval.Meaning, f.approval.Outcome = api.ApprovalPending, "", "", ""
	f.mu.Unlock()
	w := ap.do(http.MethodPost, "/approvals/apr-7/approve", url.Values{"csrf": {token}, "meaning": {"checked"}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/approvals/apr-7" {
		t.Fatalf("approve: %d %q", w.Code, w.Header().Get("Location"))
	}
	if body := ap.do(http.MethodGet, "/approvals/apr-7", nil).Body.String(); !strings.Contains(body, "Approved by approver (checked); executed: replayed.") {
		t.Errorf("the outcome is not shown after the redirect:\n%s", body)
	}
	if body := ap.do(http.MethodGet, "/approvals/apr-7", nil).Body.String(); strings.Contains(body, "Approved by approver (checked)") && strings.Contains(body, `class="notice"`) {
		t.Error("the outcome is shown twice")
	}
	if w := ap.do(http.MethodPost, "/audit/verify", url.Values{"csrf": {token}}); w.Code != http.StatusSeeOther {
		t.Errorf("verify: %d", w.Code)
	}
	if body := ap.do(http.MethodGet, "/audit", nil).Body.String(); !strings.Contains(body, `id="verify-result"`) {
		t.Error("the verification is not shown after the redirect")
	}
}

// TestStalePlanRefused: the plan page is a GET (Back and reloads plan
// again); its Start drain is accepted once, with a fresh token of the
// same filter; a stale, reused, forged or other filter's token starts
// nothing and shows a fresh plan.
func TestStalePlanRefused(t *testing.T) {
	e := startEnv(t)
	startFakeRedriver(t, e)
	c := e.newConsole(t, nil)
	op := newClient(t, c, "127.0.0.96")
	token := op.mustLogin(access.DefaultPerson(access.RoleOperator), e.password(access.DefaultPerson(access.RoleOperator)))
	page := op.do(http.MethodGet, "/drains/plan?exhausted=on&domain=pharmacy", nil).Body.String()
	plan := planTokenIn(t, page)
	if !strings.Contains(page, `id="plan-at"`) || !strings.Contains(page, `id="start-drain"`) {
		t.Fatalf("the plan page:\n%s", page)
	}
	start := func(tok, domain string) int {
		return op.do(http.MethodPost, "/drains/start", url.Values{"csrf": {token}, "exhausted": {"on"}, "domain": {domain}, "reason": {"r"}, "plan_token": {tok}}).Code
	}
	for _, tc := range []struct{ name, tok, domain string }{
		{"no token", "", "pharmacy"},
		{"forged token", strings.Repeat("ab", 32), "pharmacy"},
		{"another filter", plan, "fsma"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := start(tc.tok, tc.domain); code != http.StatusConflict {
				t.Errorf("%d, want 409", code)
			}
		})
	}
	// "another filter" used the token up: plan again.
	plan = planTokenIn(t, op.do(http.MethodGet, "/drains/plan?exhausted=on&domain=pharmacy", nil).Body.String())
	if code := start(plan, "pharmacy"); code != http.StatusSeeOther {
		t.Errorf("a fresh plan: %d", code)
	}
	w := op.do(http.MethodPost, "/drains/start", url.Values{"csrf": {token}, "exhausted": {"on"}, "domain": {"pharmacy"}, "reason": {"r"}, "plan_token": {plan}})
	if body := w.Body.String(); w.Code != http.StatusConflict || !strings.Contains(body, "stale") || !strings.Contains(body, `id="plan-selected"`) {
		t.Errorf("a used plan: %d\n%s", w.Code, body)
	}
	// An old plan.
	s := c.anySession()
	old := s.issuePlan(api.DrainFilter{Domain: "pharmacy", Classes: []string{"exhausted"}}, time.Now().Add(-planTTL-time.Second))
	if code := start(old, "pharmacy"); code != http.StatusConflict {
		t.Errorf("an old plan: %d", code)
	}
	// The controls' "dry run again" is a POST answered by the plan's URL.
	w = op.do(http.MethodPost, "/drains/plan", url.Values{"csrf": {token}, "exhausted": {"on"}, "domain": {"pharmacy"}, "rate": {"5"}})
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/drains/plan?") || strings.Contains(loc, "csrf") || !strings.Contains(loc, "rate=5") {
		t.Errorf("dry run again: %d %q", w.Code, loc)
	}
}

// TestConsoleCSSKeepsIdentifiersWhole: no rule breaks text anywhere (it
// split ids, GLNs and timestamps over lines); identifiers and times are
// kept whole.
func TestConsoleCSSKeepsIdentifiersWhole(t *testing.T) {
	css, err := os.ReadFile("static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(css), "\n") {
		if strings.Contains(line, "overflow-wrap: anywhere") && !strings.HasPrefix(line, "pre.payload") && !strings.HasPrefix(line, ".diff ") {
			t.Errorf("a rule breaks text anywhere: %s", line)
		}
	}
	if !regexp.MustCompile(`\.whole[^{]*\{[^}]*text-overflow: ellipsis`).Match(css) || !strings.Contains(string(css), "time.ts") {
		t.Error("no ellipsis rule for identifiers, or times not kept whole")
	}
}

// TestRequestKeepsPayloadBytes: a corrected payload reaches the redriver
// as typed: &, < and > are not rewritten to \u0026, \u003c, \u003e (the
// approver read the escapes where the operator typed the characters).
func TestRequestKeepsPayloadBytes(t *testing.T) {
	typed := `{"x_note":"Müller & Söhne <Großhandel> \"Nord\""}`
	b, err := encodeRequest(api.RedriveRequest{DLQID: "pharmacy_x", Payload: []byte(typed), Reason: "a & b"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), typed) || strings.Contains(string(b), `\u0026`) || strings.HasSuffix(string(b), "\n") {
		t.Errorf("%s", b)
	}
}

// TestLostSessionGoesToLogin: a POST of a browser whose session the
// console does not know (its end forgotten, a restart) is sent to log in
// and back to its page, told that the action was not done; nothing is
// kept.
func TestLostSessionGoesToLogin(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	cl := newClient(t, c, "127.0.0.98")
	cl.cookies[sessionCookie] = &http.Cookie{Name: sessionCookie, Value: strings.Repeat("0", 64)}
	n := c.login.drafts.len()
	w := cl.do(http.MethodPost, "/records/pharmacy_abc/redrive", url.Values{"reason": {"r"}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login?lost=1&next=%2Frecords%2Fpharmacy_abc" {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Location"))
	}
	if page := cl.do(http.MethodGet, w.Header().Get("Location"), nil).Body.String(); !strings.Contains(page, "it was not done") || !strings.Contains(page, `name="next" value="/records/pharmacy_abc"`) {
		t.Errorf("the login page:\n%s", page)
	}
	if c.login.drafts.len() != n {
		t.Error("a draft was kept for an unknown session")
	}
}
