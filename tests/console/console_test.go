// Package console tests the web triage console (services/console) end to
// end in a real headless Chromium (Debian's chromium, driven by chromedp)
// against a real embedded stack: the services and the console on one
// secured server, people logging in with their own NATS users. One stack
// and one browser serve every subtest; each person browses in a browser
// context of their own (their own cookies). Screenshots of the main
// pages go to tests/console/screenshots/ (git-ignored).
//
// The two-person story: the operator's identity-changing correction is
// sent for approval; he logs out, the approver logs in, finds it from the
// Overview, is refused with a wrong password (REAUTH_FAILED, the chain
// unchanged), signs with the right one and a meaning, and the record's
// timeline shows the signature, the operator's correction and the replay.
// Holds are placed from the Record and Holds pages; the HELD subtest
// skips, saying so, while the redriver does not refuse held records.
package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// chromiumPath is Debian's chromium (installed by make chromium, which
// make test runs first).
const chromiumPath = "/usr/bin/chromium"

// downstream is the stack's system of record: it answers 503 while down,
// else 200.
type downstream struct {
	*httptest.Server
	down atomic.Bool
}

func newDownstream(t *testing.T) *downstream {
	d := &downstream{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if d.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(d.Close)
	return d
}

// startStack runs every service and the console on a free port with a
// temporary store until the test ends; the validator posts committed
// events to down and gives up on a failing downstream fast (2 deliveries,
// 10 ms back-off).
func startStack(t *testing.T, down *downstream) *stack.Stack {
	t.Helper()
	cfg := stack.DefaultConfig()
	cfg.Validator.DownstreamURL = down.URL
	cfg.Validator.MaxDeliver = 2
	cfg.Validator.BackoffBase, cfg.Validator.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	cfg.Validator.DownstreamTimeout = time.Second
	dir := t.TempDir()
	cfg.DataDir, cfg.AnchorDir = filepath.Join(dir, "data"), filepath.Join(dir, "anchors")
	cfg.Port, cfg.SyncAlways, cfg.MetricsAddr = -1, false, ""
	cfg.PasswordCost = access.MinBcryptCost // the server checks passwords under the race detector
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	cfg.ConsoleAddr = "127.0.0.1:0"
	st, err := stack.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stack: %v", err)
		}
	})
	select {
	case <-st.Ready():
	case err := <-done:
		t.Fatalf("stack exited: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("stack not ready after 60 s")
	}
	return st
}

// startBrowser starts one headless Chromium for the test, with the flags
// of this closed network and a fresh profile.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium: %v (run make chromium, which installs Debian's chromium package)", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 768),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// person is one person's tab in a browser context of their own.
type person struct {
	t    *testing.T
	ctx  context.Context
	base string
	// authenticator is the tab's virtual authenticator, once added
	// (virtualAuthenticator).
	authenticator webauthn.AuthenticatorID
}

// newPerson opens a tab in a fresh browser context (own cookies); with
// noScript its pages run without JavaScript.
func newPerson(t *testing.T, bctx context.Context, base string, noScript bool) *person {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	if noScript {
		if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			t.Fatal(err)
		}
	}
	return &person{t: t, ctx: ctx, base: strings.TrimSuffix(base, "/")}
}

// do runs actions with a bound.
func (p *person) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) into T.
func eval[T any](p *person, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %.60q: %v", expr, err)
	}
	return v
}

// text is the text of the first node matching css, read in one script
// (a node id of a query can go stale while htmx swaps the page).
func (p *person) text(css string) string {
	p.t.Helper()
	q, _ := json.Marshal(css)
	v := eval[*string](p, fmt.Sprintf(`(n => n ? n.innerText : null)(document.querySelector(%s))`, q))
	if v == nil {
		p.t.Fatalf("no %s on the page", css)
	}
	return *v
}

// submit clicks css and waits for a fresh waitFor: any waitFor already on
// the page is removed first, so the wait cannot end on the old page.
func (p *person) submit(css, waitFor string) {
	p.t.Helper()
	q, _ := json.Marshal(waitFor)
	p.do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelectorAll(%s).forEach(n => n.remove())`, q)),
		chromedp.Click(chromedp.CSS(css)), chromedp.WaitVisible(chromedp.CSS(waitFor)))
}

// html is the page's markup.
func (p *person) html() string {
	return eval[string](p, `document.documentElement.outerHTML`)
}

// open navigates to path and waits for its heading.
func (p *person) open(path string) {
	p.t.Helper()
	p.do(chromedp.Navigate(p.base+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
}

// login logs in through the form.
func (p *person) login(user, password string) {
	p.t.Helper()
	p.open("/login")
	p.do(
		chromedp.SendKeys(chromedp.CSS("#user"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS(`form.login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.role`)),
	)
	// The header names the person (their own user), then their role.
	if got := p.text(".user"); got != user {
		p.t.Fatalf("logged in as %q, want %s", got, user)
	}
}

// post sends a POST from the page (fetch, with the session's cookie) and
// returns its status and body.
func (p *person) post(path, body string, header map[string]string) (int, string) {
	p.t.Helper()
	h, _ := json.Marshal(header)
	b, _ := json.Marshal(body)
	type resp struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	r := eval[resp](p, fmt.Sprintf(`(async () => {
		const h = Object.assign({"Content-Type": "application/x-www-form-urlencoded"}, %s);
		const r = await fetch(%q, {method: "POST", headers: h, body: %s, redirect: "manual"});
		return {status: r.status, body: await r.text()};
	})()`, h, path, b))
	return r.Status, r.Body
}

// csrf is the page's CSRF token (the logout form's).
func (p *person) csrf() string {
	return eval[string](p, `document.querySelector('input[name=csrf]').value`)
}

// screenshot saves the page under tests/console/screenshots/.
func (p *person) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join(tools.Root(p.t), "tests", "console", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// axeViolation is one serious or critical finding of axe-core.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axe injects axe-core into the page and returns its serious and
// critical violations.
func (p *person) axe(src string) []axeViolation {
	p.t.Helper()
	if !eval[bool](p, `typeof window.axe !== "undefined"`) {
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](src)); err != nil {
			p.t.Fatalf("inject axe-core: %v", err)
		}
	}
	return eval[[]axeViolation](p, `axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v =>
			({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))})))`)
}

// publishInvalid publishes an event that fails validation, with a marker
// value that must never reach a page unrevealed, and returns the marker.
func publishInvalid(t *testing.T, st *stack.Stack) string {
	t.Helper()
	nc, err := st.ConnectAs(string(access.RolePublisher))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	marker := fmt.Sprintf("SECRET-PHI-%d", time.Now().UnixNano())
	if _, err := nc.Request("events.pharmacy.dispense", []byte(`{"patient_marker":"`+marker+`","note":"<b>bold</b>"}`), 30*time.Second); err != nil {
		t.Fatalf("publish: %v", err)
	}
	return marker
}

// chainLength is the number of records of a chain, read as the viewer.
func chainLength(t *testing.T, nc *nats.Conn, id string) int {
	t.Helper()
	rep, err := endpoint.Call[api.GetRequest, api.GetReply](context.Background(), nc, api.AuditGet, api.GetRequest{DLQID: id})
	if err != nil {
		t.Fatalf("audit.get: %v", err)
	}
	return len(rep.Records)
}

// verifyProblems lists what audit.verify reports (for a failure's
// message).
func verifyProblems(nc *nats.Conn) string {
	rep, err := endpoint.Call[api.VerifyRequest, api.VerifyReply](context.Background(), nc, api.AuditVerify, api.VerifyRequest{})
	if err != nil {
		return fmt.Sprintf(" (audit.verify: %v)", err)
	}
	var b strings.Builder
	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "\n  %s %s %s: %s", p.Kind, p.Subject, p.DLQID, p.Detail)
	}
	return b.String()
}

// checkState checks the page as it is (a state reached by a POST, which
// the page loop below cannot open): axe-core finds no serious or critical
// violation, and neither width scrolls sideways; then a screenshot.
func (p *person) checkState(name string, axeSrc []byte) {
	p.t.Helper()
	if v := p.axe(string(axeSrc)); len(v) > 0 {
		p.t.Errorf("%s: %+v", name, v)
	}
	for _, vp := range []struct{ w, h int64 }{{768, 1024}, {1366, 768}} {
		p.do(chromedp.EmulateViewport(vp.w, vp.h))
		if over := eval[int](p, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
			p.t.Errorf("%s at %dx%d: %d px of horizontal scroll", name, vp.w, vp.h, over)
		}
	}
	p.screenshot(name)
}

// newRecord waits until audit.list (as nc) lists an open record of domain
// and class that is not in seen, and returns its id.
func newRecord(t *testing.T, nc *nats.Conn, domain, class string, seen map[string]bool) string {
	t.Helper()
	var id string
	deadline := time.Now().Add(30 * time.Second)
	for id == "" {
		rep, err := endpoint.Call[api.ListRequest, api.ListReply](context.Background(), nc, api.AuditList,
			api.ListRequest{Domain: domain, Class: class, Status: "open", Limit: api.MaxLimit})
		if err != nil {
			t.Fatalf("audit.list: %v", err)
		}
		for _, it := range rep.Items {
			if !seen[it.DLQID] {
				id = it.DLQID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new %s/%s record after 30 s", domain, class)
		}
		time.Sleep(50 * time.Millisecond) // polling the auditor's index
	}
	return id
}

// openIDs are the open records of domain and class now.
func openIDs(t *testing.T, nc *nats.Conn, domain, class string) map[string]bool {
	t.Helper()
	rep, err := endpoint.Call[api.ListRequest, api.ListReply](context.Background(), nc, api.AuditList,
		api.ListRequest{Domain: domain, Class: class, Limit: api.MaxLimit})
	if err != nil {
		t.Fatalf("audit.list: %v", err)
	}
	ids := map[string]bool{}
	for _, it := range rep.Items {
		ids[it.DLQID] = true
	}
	return ids
}

// validDispense is a valid pharmacy dispense event (from the schemas'
// examples), made unique by i.
func validDispense(t *testing.T, i int) sample.Event {
	t.Helper()
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	for j := range 1000 {
		ev, err := set.ValidFor("pharmacy", i*1000+j)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Subject == "events.pharmacy.dispense" {
			return ev
		}
	}
	t.Fatal("no valid pharmacy dispense example")
	return sample.Event{}
}

// TestConsole is the browser suite: one stack, one browser.
func TestConsole(t *testing.T) {
	natstest.Long(t, "Chromium")
	axeSrc, err := os.ReadFile(tools.Axe(t))
	if err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t)
	down := newDownstream(t)
	st := startStack(t, down)
	// At a name: passkeys take no IP address as their relying party.
	base := atName(st)
	pw := func(user string) string { return st.Secrets().Users[user].Password }
	opName, viewerName := access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleViewer)
	viewerNC, err := st.ConnectAs(viewerName)
	if err != nil {
		t.Fatal(err)
	}
	defer viewerNC.Close()

	op := newPerson(t, browserCtx, base, false)
	op.login(opName, pw(opName))

	var recordPath, dlqID, drainPath string
	t.Run("a fresh failure appears in Groups and opens redacted", func(t *testing.T) {
		op.t = t
		marker := publishInvalid(t, st)
		deadline := time.Now().Add(30 * time.Second)
		for {
			op.open("/groups")
			if strings.Contains(op.html(), `href="/records/`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no group after 30 s:\n%s", op.html())
			}
			time.Sleep(200 * time.Millisecond) // a page reload, polled
		}
		if got := eval[string](op, `(n => n ? n.textContent : "")(document.querySelector("tr.group td.trend .sr-only"))`); !strings.Contains(got, "in the last 24 h") ||
			!eval[bool](op, `document.querySelector("tr.group td.trend svg.spark polyline") !== null`) {
			t.Errorf("no trend sparkline with its text (%q)", got)
		}
		op.screenshot("groups")
		op.do(chromedp.Click(chromedp.CSS(`td a[href^="/records/"]`)), chromedp.WaitVisible(chromedp.CSS(`#h-chain`)))
		dlqID = op.text(".facts dd.id code")
		recordPath = "/records/" + dlqID
		page := op.html()
		if !strings.Contains(page, "Payload redacted") || strings.Contains(page, marker) {
			t.Fatalf("the record page is not redacted (marker shown: %v)", strings.Contains(page, marker))
		}
		if !strings.Contains(op.text(".timeline"), "quarantined") || !strings.Contains(op.text(".timeline"), "sealed") {
			t.Errorf("timeline: %q", op.text(".timeline"))
		}
		if !strings.Contains(page, `id="redrive"`) || !strings.Contains(page, `id="reveal"`) {
			t.Error("the operator is offered no redrive or reveal")
		}
		op.screenshot("record")
		op.do(chromedp.SendKeys(chromedp.CSS("#reveal-reason"), "browser test: inspection"),
			chromedp.Click(chromedp.CSS("#reveal")), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
		if got := op.text("pre.payload"); !strings.Contains(got, marker) || !strings.Contains(got, `"note": "<b>bold</b>"`) {
			t.Errorf("revealed payload %q lacks the marker or its markup as written", got)
		}
		if eval[bool](op, `document.querySelector("pre.payload b") !== null`) {
			t.Error("the payload's markup was rendered, not shown")
		}
	})
	if dlqID == "" {
		t.FailNow()
	}

	t.Run("the reveal is in the access audit", func(t *testing.T) {
		op.t = t
		op.open("/audit")
		op.do(chromedp.SendKeys(chromedp.CSS("#access-user"), opName))
		op.submit("#access-filter", "#access-table")
		table := op.text("#access-table")
		if !strings.Contains(table, "browser test: inspection") || !strings.Contains(table, dlqID[:12]) || !strings.Contains(table, api.AccessGet) {
			t.Errorf("the reveal is not in the access audit:\n%s", table)
		}
		op.screenshot("access-audit")
	})

	t.Run("records list, sort and CSV", func(t *testing.T) {
		op.t = t
		op.open("/records?sort=dlq_id&dir=asc")
		if !strings.Contains(op.html(), dlqID[:12]) {
			t.Fatal("the record is not listed")
		}
		if got := eval[string](op, `document.querySelector('th[aria-sort=ascending] a').textContent`); got != "Record" {
			t.Errorf("sorted column %q", got)
		}
		csv := eval[string](op, `fetch(document.querySelector('a[href^="/records.csv"]').href).then(r => r.text())`)
		if !strings.HasPrefix(csv, "dlq_id,domain,") || !strings.Contains(csv, dlqID) {
			t.Errorf("CSV:\n%s", csv)
		}
		op.screenshot("records")
	})

	t.Run("drain wizard dry run, start, live progress", func(t *testing.T) {
		op.t = t
		op.open("/drains")
		op.do(
			chromedp.Click(chromedp.CSS("#d-exhausted")), // off
			chromedp.Click(chromedp.CSS("#d-validation")),
			chromedp.Click(chromedp.CSS("#d-incval")),
			chromedp.Click(chromedp.CSS("#dry-run")),
			chromedp.WaitVisible(chromedp.CSS("#plan-selected")),
		)
		if got := op.text("#plan-selected"); got == "0" {
			t.Fatalf("the dry run selects nothing:\n%s", op.text("main"))
		}
		op.screenshot("drain-plan")
		op.do(chromedp.SendKeys(chromedp.CSS("#d-rate"), "50"), chromedp.SendKeys(chromedp.CSS("#d-reason"), "browser test"),
			chromedp.Click(chromedp.CSS("#start-drain")), chromedp.WaitVisible(chromedp.CSS("#drain-status")))
		drainPath, _, _ = strings.Cut(eval[string](op, `document.querySelector("[data-sse]").dataset.sse`), "/events")
		// The progress comes by server-sent events (console.js counts
		// them on the element), without a reload.
		op.do(chromedp.Evaluate[chromedp.Void](`window.__noReload = true`),
			chromedp.WaitVisible(chromedp.CSS(`#progress[data-sse-events]`)))
		// Read in one script: the events replace the node under a query.
		status := func() string {
			return eval[string](op, `(document.querySelector("#drain-status") || {}).textContent || ""`)
		}
		// The selection replays validation failures unchanged, so the
		// default guard (a canary of 10, at most 10 % failing) may pause
		// the drain before it completes: either ends it.
		deadline := time.Now().Add(60 * time.Second)
		for st := status(); st != api.DrainCompleted && st != api.DrainPaused; st = status() {
			if time.Now().After(deadline) {
				t.Fatalf("drain status %q after 60 s", st)
			}
			time.Sleep(100 * time.Millisecond) // polling the page's DOM
		}
		if !eval[bool](op, `window.__noReload === true`) {
			t.Error("the page reloaded: the progress did not come by server-sent events")
		}
		op.screenshot("drain")
	})

	t.Run("operator redrives the record", func(t *testing.T) {
		op.t = t
		before := chainLength(t, viewerNC, dlqID)
		op.open(recordPath)
		op.do(chromedp.Click(chromedp.CSS("#include-validation")), chromedp.SendKeys(chromedp.CSS("#redrive-reason"), "browser test"))
		op.submit("#redrive", ".notice")
		// The replay fails validation again; a loaded machine may answer
		// before the outcome is observed (pending).
		if got := op.text(".notice"); !strings.HasPrefix(got, "Redrive: "+api.OutcomeReplayFailed) && !strings.HasPrefix(got, "Redrive: "+api.OutcomePending) {
			t.Errorf("notice %q", got)
		}
		if after := chainLength(t, viewerNC, dlqID); after <= before {
			t.Errorf("the chain has %d records, had %d", after, before)
		}
		if !strings.Contains(op.text(".timeline"), "by "+opName) {
			t.Errorf("the timeline does not name the operator: %q", op.text(".timeline"))
		}
	})

	var correctedPath string
	t.Run("correct a validation failure: the validation result, the diff, submit", func(t *testing.T) {
		op.t = t
		seen := openIDs(t, viewerNC, "pharmacy", "validation")
		publishInvalid(t, st)
		id := newRecord(t, viewerNC, "pharmacy", "validation", seen)
		correctedPath = "/records/" + id
		op.open(correctedPath)
		// The editor is on the page before any reveal; its check asks
		// the reason of the original's read.
		if !strings.Contains(op.html(), `id="correction"`) || !strings.Contains(op.html(), `id="check-reveal-reason"`) {
			t.Error("the editor is hidden until a reveal")
		}
		op.do(chromedp.SendKeys(chromedp.CSS("#reveal-reason"), "browser test: correction"),
			chromedp.Click(chromedp.CSS("#reveal")), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
		// The original as it is fails validation.
		op.do(chromedp.SendKeys(chromedp.CSS("#correct-reason"), "browser test: fix the event"))
		op.submit("#check-correction", "#check-result")
		if got := op.text("#check-result"); !strings.Contains(got, "Invalid") {
			t.Errorf("the original checks %q", got)
		}
		if strings.Contains(op.html(), `id="submit-correction"`) {
			t.Error("an invalid correction can be submitted")
		}
		valid := validDispense(t, int(time.Now().UnixNano()%1000))
		js, _ := json.Marshal(string(valid.Data))
		op.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#correction").value = ` + string(js)))
		op.submit("#check-correction", "#check-result")
		if got := op.text("#check-result"); !strings.Contains(got, "Valid") || strings.Contains(got, "Invalid") {
			t.Fatalf("the valid correction checks %q", got)
		}
		if n := eval[int](op, `document.querySelectorAll("#diff ins").length`); n == 0 {
			t.Error("the diff shows no added line")
		}
		if n := eval[int](op, `document.querySelectorAll("#diff del").length`); n == 0 {
			t.Error("the diff shows no removed line")
		}
		op.checkState("record-correction", axeSrc)
		before := chainLength(t, viewerNC, id)
		op.submit("#submit-correction", ".notice")
		if got := op.text(".notice"); !strings.HasPrefix(got, "Corrected and redriven: ") && !strings.HasPrefix(got, "Sent for approval ") {
			t.Errorf("notice %q", got)
		}
		if got := op.text(".notice"); strings.HasPrefix(got, "Corrected and redriven: ") {
			if after := chainLength(t, viewerNC, id); after <= before {
				t.Errorf("the chain has %d records, had %d", after, before)
			}
		}
	})

	var approvalPath string
	t.Run("two-person correction: sent for approval, a wrong password refused, approved, committed", func(t *testing.T) {
		op.t = t
		// The default policy: the correction gives the event its keys
		// (a malformed event has none), an identity change, which needs a
		// second person.
		seen := openIDs(t, viewerNC, "pharmacy", "validation")
		publishInvalid(t, st)
		id := newRecord(t, viewerNC, "pharmacy", "validation", seen)
		op.open("/records/" + id)
		op.do(chromedp.SendKeys(chromedp.CSS("#reveal-reason"), "browser test: two-person correction"),
			chromedp.Click(chromedp.CSS("#reveal")), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
		valid := validDispense(t, int(time.Now().UnixNano()%1000)+3)
		js, _ := json.Marshal(string(valid.Data))
		op.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#correction").value = `+string(js)),
			chromedp.SendKeys(chromedp.CSS("#correct-reason"), "browser test: the invoice"))
		op.submit("#check-correction", "#check-result")
		if got := op.text("#check-result"); !strings.HasPrefix(got, "Valid") {
			t.Fatalf("the correction checks %q", got)
		}
		before := chainLength(t, viewerNC, id)
		op.submit("#submit-correction", ".notice")
		m := regexp.MustCompile(`^Sent for approval (\S+)`).FindStringSubmatch(op.text(".notice"))
		if m == nil {
			t.Fatalf("notice %q, want sent for approval", op.text(".notice"))
		}
		approvalID := m[1]
		approvalPath = "/approvals/" + approvalID
		if got := eval[string](op, `(n => n ? n.getAttribute("href") : "")(document.querySelector("#notice-approval"))`); got != approvalPath {
			t.Errorf("the notice links %q, want %s", got, approvalPath)
		}
		op.checkState("record-sent-for-approval", axeSrc)
		if after := chainLength(t, viewerNC, id); after != before {
			t.Errorf("the request changed the chain: %d records, had %d", after, before)
		}

		// The operator logs out; the approver logs in in the same tab.
		op.do(chromedp.Click(chromedp.CSS("form.who button")), chromedp.WaitVisible(chromedp.CSS("#user")))
		approverName := access.DefaultPerson(access.RoleApprover)
		op.login(approverName, pw(approverName))
		// The approver signs with a passkey of the tab's authenticator,
		// registered by the administrator.
		op.virtualAuthenticator()
		key, _ := op.makePasskey("approver's laptop")
		registerPasskey(t, st, approverName, access.RoleApprover, key)
		op.open("/")
		if n := op.text("#pending-approvals"); n == "0" {
			t.Errorf("the overview counts %s pending approvals", n)
		}
		op.do(chromedp.Click(chromedp.CSS("#pending-approvals")), chromedp.WaitVisible(chromedp.CSS("#approvals-table")))
		if !strings.Contains(op.text("#approvals-table"), approvalID) {
			t.Fatalf("the inbox lacks %s:\n%s", approvalID, op.text("#approvals-table"))
		}
		op.screenshot("approvals")
		op.do(chromedp.Click(chromedp.CSS(`a[href="`+approvalPath+`"]`)), chromedp.WaitVisible(chromedp.CSS("#approval-facts")))
		if got := op.text("#approval-requester"); !strings.HasPrefix(got, opName) {
			t.Errorf("requester %q", got)
		}
		if got := op.text("#approval-payload"); !strings.Contains(got, `"event_type": "dispense"`) {
			t.Errorf("the corrected payload is not shown: %q", got)
		}
		if got := op.text("#identity-diff"); !strings.Contains(got, "idempotency_key") {
			t.Errorf("the identity diff %q", got)
		}
		op.checkState("approval", axeSrc)

		// The approver signs with a passkey (no password again: the
		// passkey's user verification is the re-authentication).
		const meaning = "browser test: reviewed against the invoice"
		op.do(chromedp.SendKeys(chromedp.CSS("#approve-meaning"), meaning))
		op.submit("#approve", ".notice")
		if got := op.text(".notice"); !strings.HasPrefix(got, "Approved by "+approverName+" ("+meaning+")") {
			t.Errorf("notice %q", got)
		}
		if strings.Contains(op.html(), pw(approverName)) {
			t.Error("the password is echoed back into the page")
		}
		op.checkState("approval-approved", axeSrc)

		// Committed: the timeline shows the signature, then the
		// operator's correction, then the replay's outcome.
		deadline := time.Now().Add(60 * time.Second)
		for {
			op.open("/records/" + id)
			items := eval[[]string](op, `[...document.querySelectorAll(".timeline li")].map(li => li.innerText)`)
			ai, ci, oi := -1, -1, -1
			for i, it := range items {
				switch {
				case strings.HasPrefix(it, "approved") && strings.Contains(it, "approved by "+approverName) && strings.Contains(it, meaning) && strings.Contains(it, "requested by "+opName):
					ai = i
				case ai >= 0 && ci < 0 && strings.HasPrefix(it, "corrected") && strings.Contains(it, "by "+opName):
					ci = i
				case ci >= 0 && (strings.HasPrefix(it, "replayed") || strings.HasPrefix(it, "replay_failed") || strings.HasPrefix(it, "skipped_duplicate")):
					oi = i
				}
			}
			if ai >= 0 && ci > ai && oi > ci {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the timeline after 60 s (approved %d, corrected %d, outcome %d):\n%s", ai, ci, oi, strings.Join(items, "\n"))
			}
			time.Sleep(200 * time.Millisecond) // a page reload, polled
		}
		op.screenshot("record-approved")
		op.do(chromedp.Click(chromedp.CSS("form.who button")), chromedp.WaitVisible(chromedp.CSS("#user")))
		op.login(opName, pw(opName))
		// The operator's own passkey (her decisions: a hold's lift).
		opKey, _ := op.makePasskey("operator's laptop")
		registerPasskey(t, st, opName, access.RoleOperator, opKey)
	})

	var heldPath string
	t.Run("a hold placed from the Record page is listed on Holds", func(t *testing.T) {
		op.t = t
		seen := openIDs(t, viewerNC, "pharmacy", "validation")
		publishInvalid(t, st)
		id := newRecord(t, viewerNC, "pharmacy", "validation", seen)
		heldPath = "/records/" + id
		op.open(heldPath)
		op.do(chromedp.SendKeys(chromedp.CSS("#hold-case"), "CASE-BROWSER-1"), chromedp.SendKeys(chromedp.CSS("#hold-reason"), "browser test: litigation"))
		op.submit("#place-hold", "#record-holds")
		if got := op.text("#record-holds"); !strings.Contains(got, "CASE-BROWSER-1") || !strings.Contains(got, "placed by "+opName) {
			t.Errorf("the record's holds %q", got)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(op.text(".timeline"), "hold_placed") {
			if time.Now().After(deadline) {
				t.Fatalf("no hold_placed record after 30 s: %q", op.text(".timeline"))
			}
			time.Sleep(200 * time.Millisecond) // a page reload, polled
			op.open(heldPath)
		}
		if !strings.Contains(op.text(".timeline"), "case CASE-BROWSER-1") {
			t.Errorf("the hold_placed record lacks its case: %q", op.text(".timeline"))
		}
		op.checkState("record-held", axeSrc)
		op.open("/holds")
		if got := op.text("#holds-table"); !strings.Contains(got, "CASE-BROWSER-1") || !strings.Contains(got, id[:12]) {
			t.Errorf("the Holds page %q", got)
		}
		op.do(chromedp.SendKeys(chromedp.CSS("#hold-party"), "PARTY-BROWSER"), chromedp.SendKeys(chromedp.CSS("#hold-case"), "CASE-BROWSER-2"),
			chromedp.SendKeys(chromedp.CSS("#hold-reason"), "browser test: a party's records"))
		op.submit("#place-party-hold", "#holds-table")
		// No record of PARTY-BROWSER is stored: the form asks to confirm.
		op.do(chromedp.WaitVisible(chromedp.CSS("#hold-confirm")), chromedp.Click(chromedp.CSS("#hold-confirm")))
		op.submit("#place-party-hold", "#holds-table")
		if got := op.text("#holds-table"); !strings.Contains(got, "party PARTY-BROWSER") || !strings.Contains(got, "CASE-BROWSER-2") {
			t.Errorf("the party hold is not listed: %q", got)
		}
		op.checkState("holds", axeSrc)
	})

	t.Run("HELD: a redrive of a held record is refused with the service's code", func(t *testing.T) {
		op.t = t
		if heldPath == "" {
			t.Fatal("no held record (placing the hold failed above)")
		}
		before := chainLength(t, viewerNC, strings.TrimPrefix(heldPath, "/records/"))
		op.open(heldPath)
		op.do(chromedp.Click(chromedp.CSS("#include-validation")), chromedp.SendKeys(chromedp.CSS("#redrive-reason"), "browser test: held"))
		op.submit("#redrive", "main .alert, main .notice")
		if eval[bool](op, `document.querySelector("main .alert") === null`) {
			t.Fatalf("a redrive of a held record was not refused: %q", op.text("main .notice"))
		}
		if got := op.text("main .alert"); !strings.HasPrefix(got, api.ErrHeld) {
			t.Errorf("a redrive of a held record: %q", got)
		}
		if after := chainLength(t, viewerNC, strings.TrimPrefix(heldPath, "/records/")); after != before {
			t.Errorf("a refused redrive changed the chain: %d records, had %d", after, before)
		}
		op.checkState("record-held-refused", axeSrc)
	})

	t.Run("lift the hold from the Record page (lifted, or sent for approval)", func(t *testing.T) {
		op.t = t
		if heldPath == "" {
			t.Fatal("no held record (placing the hold failed above)")
		}
		op.open(heldPath)
		op.do(chromedp.SendKeys(chromedp.CSS(`#record-holds input[name=reason]`), "browser test: case closed"))
		op.submit("#record-holds button.lift-hold", "main .notice, main .alert")
		if eval[bool](op, `document.querySelector("main .alert") !== null`) {
			t.Fatalf("lift refused: %q", op.text("main .alert"))
		}
		got := op.text("main .notice")
		switch {
		case strings.HasPrefix(got, "Sent for approval "):
			t.Logf("the lift was sent for approval: %q", got)
		case strings.Contains(got, " lifted."):
			if strings.Contains(op.html(), `id="record-holds"`) {
				t.Error("a lifted hold is still listed on the record")
			}
		default:
			t.Errorf("notice %q", got)
		}
		op.checkState("record-hold-lift", axeSrc)
	})

	var canaryPath string
	t.Run("drain with a canary against a failing downstream pauses itself; resumed, it completes", func(t *testing.T) {
		op.t = t
		down.down.Store(true)
		seen := openIDs(t, viewerNC, "pharmacy", "exhausted")
		pub, err := st.ConnectAs(string(access.RolePublisher))
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		const n = 6
		base := int(time.Now().UnixNano() % 100000)
		for i := range n {
			ev := validDispense(t, base+i)
			if _, err := pub.Request(ev.Subject, ev.Data, 30*time.Second); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			fresh := 0
			for id := range openIDs(t, viewerNC, "pharmacy", "exhausted") {
				if !seen[id] {
					fresh++
				}
			}
			if fresh >= n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d events exhausted after 60 s", fresh, n)
			}
			time.Sleep(100 * time.Millisecond) // polling the auditor's index
		}
		op.open("/drains")
		op.do(chromedp.SendKeys(chromedp.CSS("#d-domain"), "pharmacy"),
			chromedp.SendKeys(chromedp.CSS("#d-codes"), "DOWNSTREAM_UNAVAILABLE"),
			chromedp.SendKeys(chromedp.CSS("#d-canary1"), "3"))
		op.submit("#dry-run", "#canary-picks")
		if got := eval[int](op, `document.querySelectorAll("#canary-picks li").length`); got != 3 {
			t.Errorf("the plan names %d canary picks, want 3", got)
		}
		op.checkState("drain-plan-canary", axeSrc)
		op.do(chromedp.SendKeys(chromedp.CSS("#d-maxfail"), "0.5"), chromedp.SendKeys(chromedp.CSS("#d-rate"), "0"),
			chromedp.SendKeys(chromedp.CSS("#d-reason"), "browser test: canary"))
		op.submit("#start-drain", "#drain-status")
		canaryPath, _, _ = strings.Cut(eval[string](op, `document.querySelector("[data-sse]").dataset.sse`), "/events")
		// The pause arrives by server-sent events, with its reason and
		// codes, and the Resume control with it.
		op.do(chromedp.WaitVisible(chromedp.CSS("#drain-paused")))
		if got := op.text("#drain-paused"); !strings.Contains(got, "canary") || !strings.Contains(got, "DOWNSTREAM_UNAVAILABLE") {
			t.Errorf("pause %q", got)
		}
		op.do(chromedp.WaitVisible(chromedp.CSS("#resume-reason")))
		if !eval[bool](op, `document.querySelector("svg.chart polyline.failed") !== null`) {
			t.Error("no chart of the outcomes")
		}
		op.checkState("drain-paused", axeSrc)
		down.down.Store(false)
		op.do(chromedp.SendKeys(chromedp.CSS("#resume-reason"), "browser test: downstream recovered"))
		op.submit("#resume-drain", "#drain-status")
		status := func() string {
			return eval[string](op, `(document.querySelector("#drain-status") || {}).textContent || ""`)
		}
		deadline = time.Now().Add(60 * time.Second)
		for status() != api.DrainCompleted {
			if time.Now().After(deadline) {
				t.Fatalf("drain status %q after 60 s", status())
			}
			time.Sleep(100 * time.Millisecond) // polling the page's DOM
		}
		if got := op.text("#drain-events"); !strings.Contains(got, "browser test: downstream recovered") || !strings.Contains(got, api.ActionResumed) {
			t.Errorf("events %q", got)
		}
		op.checkState("drain-resumed", axeSrc)
	})

	t.Run("audit verify and reconcile", func(t *testing.T) {
		op.t = t
		op.open("/audit")
		op.submit("#verify", "#verify-result")
		if got := op.text("#verify-result"); got != "OK" {
			t.Errorf("verify: %q%s", got, verifyProblems(viewerNC))
		}
		op.submit("#reconcile", "#reconcile-result")
		op.submit("#checkpoint", "#h-checkpoint")
		op.open("/audit")
		op.submit("#verify", "#verify-result")
		if got := op.text("#verify-result"); got != "OK" {
			t.Errorf("verify after the checkpoint: %q%s", got, verifyProblems(viewerNC))
		}
		op.screenshot("audit")
	})

	t.Run("export a CSV from the Audit page", func(t *testing.T) {
		op.t = t
		dir := t.TempDir()
		if _, err := chromedp.CallBrowser(op.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, BrowserContextID: chromedp.FromContext(op.ctx).BrowserContextID, DownloadPath: dir,
		}); err != nil {
			t.Fatal(err)
		}
		op.open("/audit")
		op.do(chromedp.SendKeys(chromedp.CSS("#x-domain"), "pharmacy"),
			chromedp.Click(chromedp.CSS("#x-format-csv")),
			chromedp.SendKeys(chromedp.CSS("#x-reason"), "browser test: export"),
			chromedp.Click(chromedp.CSS("#export")))
		var file string
		deadline := time.Now().Add(30 * time.Second)
		for file == "" {
			matches, _ := filepath.Glob(filepath.Join(dir, "deadletter-export-*.csv"))
			if len(matches) > 0 {
				file = matches[0]
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no CSV downloaded after 30 s")
			}
			time.Sleep(100 * time.Millisecond) // polling the download directory
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "dlq_id,domain,record_index,") || !strings.Contains(string(b), dlqID) {
			t.Errorf("the CSV lacks its header or the record:\n%.400s", b)
		}
		if strings.Count(string(b), "\n") < 2 {
			t.Errorf("the CSV has no row:\n%s", b)
		}
		op.open("/audit")
		if got := op.text("#access-table"); !strings.Contains(got, "browser test: export") || !strings.Contains(got, api.AccessExport) {
			t.Errorf("the export is not in the access audit:\n%s", got)
		}
	})

	op.open("/")
	op.screenshot("overview")

	viewer := newPerson(t, browserCtx, base, false)
	t.Run("viewer: no actions, and forged ones refused", func(t *testing.T) {
		viewer.t = t
		viewer.login(viewerName, pw(viewerName))
		viewer.open(recordPath)
		page := viewer.html()
		for _, b := range []string{`id="redrive"`, `id="release"`, `id="reveal"`, `id="correction"`, `id="check-correction"`} {
			if strings.Contains(page, b) {
				t.Errorf("the viewer is offered %s", b)
			}
		}
		if strings.Contains(page, `id="place-hold"`) {
			t.Error("the viewer is offered a hold")
		}
		if approvalPath != "" {
			viewer.open(approvalPath)
			if strings.Contains(viewer.html(), `id="approve"`) || strings.Contains(viewer.html(), `id="reject"`) {
				t.Error("the viewer is offered approve or reject")
			}
			if status, body := viewer.post(approvalPath+"/approve", "meaning=forged&password=x&csrf="+viewer.csrf(), nil); status != 403 || !strings.Contains(body, api.ErrForbidden) {
				t.Errorf("forged approve as viewer: %d", status)
			}
		}
		viewer.open("/drains")
		if strings.Contains(viewer.html(), `id="dry-run"`) {
			t.Error("the viewer is offered the drain wizard")
		}
		viewer.open(canaryPath)
		if strings.Contains(viewer.html(), `id="resume-drain"`) || strings.Contains(viewer.html(), `id="cancel-drain"`) {
			t.Error("the viewer is offered the drain's controls")
		}
		viewer.open("/audit")
		if page := viewer.html(); strings.Contains(page, `id="export"`) || !strings.Contains(page, `id="h-access"`) {
			t.Error("the viewer is offered the export, or not shown the access audit")
		}
		if status, body := viewer.post("/records/"+dlqID+"/correct", "reason=forged&payload=%7B%7D&csrf="+viewer.csrf(), nil); status != 403 || !strings.Contains(body, api.ErrForbidden) {
			t.Errorf("forged correction as viewer: %d", status)
		}
		before := chainLength(t, viewerNC, dlqID)
		status, body := viewer.post("/records/"+dlqID+"/redrive", "reason=forged&csrf="+viewer.csrf(), nil)
		if status != 403 || !strings.Contains(body, api.ErrForbidden) {
			t.Errorf("forged redrive as viewer: %d\n%s", status, body)
		}
		status, body = viewer.post("/records/"+dlqID+"/reveal", "reason=forged&csrf="+viewer.csrf(), nil)
		if status == 200 || strings.Contains(body, "pre class=\"payload\"") {
			t.Errorf("forged reveal as viewer: %d", status)
		}
		if after := chainLength(t, viewerNC, dlqID); after != before {
			t.Errorf("the chain grew from %d to %d records", before, after)
		}
	})

	t.Run("a POST without the CSRF token is refused", func(t *testing.T) {
		op.t = t
		op.open("/audit")
		for _, path := range []string{"/audit/checkpoint", "/records/" + dlqID + "/redrive", "/logout"} {
			if status, _ := op.post(path, "reason=x", nil); status != 403 {
				t.Errorf("POST %s without a token: %d", path, status)
			}
		}
		if status, _ := op.post("/audit/verify", "", map[string]string{"X-CSRF-Token": strings.Repeat("0", 64)}); status != 403 {
			t.Errorf("POST with a wrong header token: %d", status)
		}
		op.open("/") // still logged in
		if !strings.Contains(op.html(), "(operator)") {
			t.Error("a refused logout logged out")
		}
	})

	var findPath string
	t.Run("find a record by NDC and lot pasted into the Records search", func(t *testing.T) {
		op.t = t
		nc, err := st.ConnectAs(string(access.RolePublisher))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// A dispense that fails validation (no actor_id), of an NDC and a
		// lot a recall names; its transaction id is a payload value.
		const lot = `A1&B<2> Müller`
		doc, _ := json.Marshal(map[string]string{"transaction_id": "TX-FIND-SECRET", "registrant_dea": "BW4829137",
			"ndc": "00409-4888-20", "lot": lot, "expiry": "2027-01-31", "quantity_delta": "-2", "unit": "EA",
			"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2025-03-14T15:42:10Z", "x_note": "NOTE-FIND-SECRET"})
		if _, err := nc.Request("events.pharmacy.dispense", doc, 30*time.Second); err != nil {
			t.Fatalf("publish: %v", err)
		}
		op.open("/records")
		op.do(chromedp.SendKeys(chromedp.CSS("#r-ndc"), "0409-4888-20"), chromedp.SendKeys(chromedp.CSS("#r-lot"), lot))
		deadline := time.Now().Add(30 * time.Second)
		for {
			op.submit(`form.filters button[type=submit]`, "main h1")
			if strings.Contains(op.html(), "<code>00409488820</code>") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the event is not found after 30 s:\n%s", op.text("main"))
			}
		}
		if got := op.text("table.records td.idents"); !strings.Contains(got, "00409488820") || !strings.Contains(got, lot) {
			t.Errorf("identifiers cell %q", got)
		}
		if rows := eval[int](op, `document.querySelectorAll("table.records tbody tr").length`); rows != 1 {
			t.Errorf("%d rows, want 1", rows)
		}
		// The transaction id is a listed identifier (record 0 keeps it);
		// no other payload value is shown.
		if got := op.text("table.records td.idents"); !strings.Contains(got, "TX-FIND-SECRET") {
			t.Errorf("identifiers cell %q lacks the transaction id", got)
		}
		if strings.Contains(op.html(), "NOTE-FIND-SECRET") || strings.Contains(op.html(), "2027-01-31") {
			t.Error("the search page shows a payload value")
		}
		if got := eval[string](op, `document.querySelector("#r-lot").value`); got != lot {
			t.Errorf("the lot field holds %q after the search", got)
		}
		findPath = eval[string](op, `location.pathname + location.search`)
		op.screenshot("records-find")
	})

	pages := []string{"/", "/groups", "/records", recordPath, "/drains", drainPath, "/audit", "/approvals", "/holds"}
	for _, p := range []string{correctedPath, canaryPath, approvalPath, heldPath, findPath} {
		if p != "" {
			pages = append(pages, p)
		}
	}

	t.Run("JavaScript off: every page readable", func(t *testing.T) {
		noJS := newPerson(t, browserCtx, base, true)
		noJS.login(opName, pw(opName))
		if eval[bool](noJS, `typeof window.htmx !== "undefined"`) {
			t.Fatal("scripts ran")
		}
		for _, path := range pages {
			noJS.open(path)
			if txt := noJS.text("main"); len(strings.TrimSpace(txt)) < 20 {
				t.Errorf("%s: main is nearly empty: %q", path, txt)
			}
		}
		noJS.open(recordPath)
		if !strings.Contains(noJS.html(), `id="redrive"`) {
			t.Error("without JavaScript the record page lost its actions")
		}
	})

	anon := newPerson(t, browserCtx, base, false)
	t.Run("axe-core: no serious or critical violation", func(t *testing.T) {
		anon.t = t
		// axe finds a violation planted in a page (it is not vacuous).
		anon.open("/login")
		anon.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("main").insertAdjacentHTML("beforeend", '<img src="/static/none.png">')`))
		if v := anon.axe(string(axeSrc)); len(v) == 0 || v[0].ID != "image-alt" {
			t.Errorf("a planted image without alt text: %+v", v)
		}
		anon.open("/login")
		if v := anon.axe(string(axeSrc)); len(v) > 0 {
			t.Errorf("/login: %+v", v)
		}
		anon.screenshot("login")
		for _, path := range pages {
			op.open(path)
			if v := op.axe(string(axeSrc)); len(v) > 0 {
				t.Errorf("%s: %+v", path, v)
			}
		}
	})

	t.Run("no horizontal scroll", func(t *testing.T) {
		for _, vp := range []struct{ w, h int64 }{{1366, 768}, {768, 1024}} {
			op.do(chromedp.EmulateViewport(vp.w, vp.h))
			anon.t, op.t = t, t
			anon.do(chromedp.EmulateViewport(vp.w, vp.h))
			for _, path := range append([]string{"/login"}, pages...) {
				p := op
				if path == "/login" {
					p = anon
				}
				p.open(path)
				if over := eval[int](p, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
					t.Errorf("%dx%d %s: %d px of horizontal scroll", vp.w, vp.h, path, over)
				}
			}
		}
	})
}
