package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// The walk's people: two operators, an approver and an inspector, each a
// named person with their own NATS user (created in the test's access
// setup, besides the role users the stack's defaults make).
const (
	amara = "amara.okafor"  // operator: triage, the correction
	jonas = "jonas.mueller" // operator: the drain
	chen  = "chen.wei"      // approver
	ines  = "ines.duarte"   // inspector: the hold and the export
)

// tradeText is payload text as the trade writes it: every JSON- and
// HTML-significant character, quotes and non-ASCII names.
const tradeText = `Müller & Söhne <Großhandel> "Nord" — Pharmacie Saint-Étienne, 5 < 7 > 3 & ' ✓`

// startWalkStack is startStack with the walk's named people added to the
// access table before the stack first starts.
func startWalkStack(t *testing.T, down *downstream) (*stack.Stack, string) {
	t.Helper()
	return startWalkStackWith(t, down, nil)
}

// startWalkStackWith is startWalkStack whose access table more changes
// (a role granted to a person) before the stack first starts.
func startWalkStackWith(t *testing.T, down *downstream, more func(*access.Secrets)) (*stack.Stack, string) {
	t.Helper()
	// The default people name some of them already (make run's example
	// people): add the others.
	people := access.DefaultPeople()
	for _, p := range []access.Person{{Name: amara, Role: access.RoleOperator}, {Name: jonas, Role: access.RoleOperator},
		{Name: chen, Role: access.RoleApprover}, {Name: ines, Role: access.RoleInspector}} {
		if !slices.ContainsFunc(people, func(q access.Person) bool { return q.Name == p.Name }) {
			people = append(people, p)
		}
	}
	sec, err := access.NewSecrets(people, access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		t.Fatal(err)
	}
	if more != nil {
		more(sec)
	}
	cfg := stack.DefaultConfig()
	cfg.Validator.DownstreamURL = down.URL
	cfg.Validator.MaxDeliver = 2
	cfg.Validator.BackoffBase, cfg.Validator.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	cfg.Validator.DownstreamTimeout = time.Second
	dir := t.TempDir()
	cfg.DataDir, cfg.AnchorDir = filepath.Join(dir, "data"), filepath.Join(dir, "anchors")
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := sec.Save(filepath.Join(cfg.DataDir, stack.CredentialsFile)); err != nil {
		t.Fatal(err)
	}
	cfg.Port, cfg.SyncAlways, cfg.MetricsAddr = -1, false, ""
	cfg.PasswordCost = access.MinBcryptCost
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
		done <- nil // the cleanup's receive
		t.Fatalf("stack exited: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("stack not ready after 60 s")
	}
	return st, filepath.Join(cfg.AnchorDir, stack.SigningKeyFile)
}

// walkShots is where the walk's screenshots go (git-ignored).
func walkShots(t *testing.T) string {
	dir := filepath.Join(tools.Root(t), "tests", "console", "screenshots", "walk")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// walkViewports are the two window sizes every page is looked at in.
var walkViewports = []struct{ w, h int64 }{{768, 1024}, {1366, 768}}

// shot checks the page as it is in both window sizes (no horizontal
// scroll, axe-core finds no serious or critical violation) and saves a
// full-page screenshot of each: <n>-<name>-<width>.png.
func (p *person) shot(n int, name string, axeSrc []byte) {
	p.t.Helper()
	p.shotTo(walkShots(p.t), n, name, axeSrc)
}

// shotTo is shot into dir.
func (p *person) shotTo(dir string, n int, name string, axeSrc []byte) {
	p.t.Helper()
	if v := p.axe(string(axeSrc)); len(v) > 0 {
		p.t.Errorf("%s: %+v", name, v)
	}
	for _, vp := range walkViewports {
		p.do(chromedp.EmulateViewport(vp.w, vp.h))
		if over := eval[int](p, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 0 {
			p.t.Errorf("%s at %dx%d: %d px of horizontal scroll", name, vp.w, vp.h, over)
		}
		// A button shows its whole label: none is narrower than its text.
		if clipped := eval[[]string](p, clippedButtons); len(clipped) > 0 {
			p.t.Errorf("%s at %dx%d: buttons clipped: %q", name, vp.w, vp.h, clipped)
		}
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			p.t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d-%s-%d.png", n, name, vp.w)), png, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

// clippedButtons lists the labels of the page's visible buttons whose
// label does not fit them (cut by their width or an ancestor's).
const clippedButtons = `[...document.querySelectorAll("button")].filter(b => b.offsetParent !== null && !b.hidden).filter(b => {
	if (b.scrollWidth > b.clientWidth + 1) { return true; }
	const r = b.getBoundingClientRect();
	for (let a = b.parentElement; a; a = a.parentElement) {
		const s = getComputedStyle(a);
		if (s.overflowX !== "visible") {
			const ar = a.getBoundingClientRect();
			if (r.left < ar.left - 1 || r.right > ar.right + 1) { return a.scrollWidth <= a.clientWidth; }
		}
	}
	return false;
}).map(b => b.textContent.trim())`

// waitText polls the page (reloading path) until css's text contains
// want.
func (p *person) waitText(path, css, want string) string {
	p.t.Helper()
	q, _ := json.Marshal(css)
	var got string
	natstest.CheckFor(p.t, 60*time.Second, 200*time.Millisecond, func() error {
		p.open(path)
		got = eval[string](p, fmt.Sprintf(`(n => n ? n.innerText : "")(document.querySelector(%s))`, q))
		if !strings.Contains(got, want) {
			return fmt.Errorf("%s %s: %q lacks %q", path, css, got, want)
		}
		return nil
	})
	return got
}

// tradeDispense is a valid pharmacy dispense carrying the trade's text in
// an extension property.
func tradeDispense(t *testing.T, i int) (string, []byte) {
	t.Helper()
	ev := validDispense(t, i)
	var doc map[string]any
	if err := json.Unmarshal(ev.Data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["x_note"] = tradeText
	doc["transaction_id"] = fmt.Sprintf("TX-WALK-%d-%d", time.Now().UnixNano()%1e6, i)
	return ev.Subject, rawJSON(t, doc)
}

// rawJSON is v as JSON the way a partner's system writes it: &, < and >
// as they are (not \u0026, which Go's encoder writes by default).
func rawJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// TestWalk walks Parts 1 to 3 as a pharmacy chain's team would, in
// Chromium: amara.okafor triages and corrects a failure (an identity
// change: sent for approval), cannot approve it herself; chen.wei reads
// the diff, is refused with a wrong password (the meaning kept), signs;
// jonas.mueller drains the downstream outage's group from the Groups page
// once the downstream is back; a shipment document with one bad event
// shows in the Groups page by document and on the record's provenance,
// and jonas's drain of a group amara drains already is refused, naming
// hers; ines.duarte holds a record from the
// Records list and downloads a JSONL export through Chromium, verified
// offline with the audit key by the code dlqctl verify-export runs,
// payloads holding & < > quotes and non-ASCII text. Every page is
// screenshotted in both window sizes (tests/console/screenshots/walk/).
func TestWalk(t *testing.T) {
	natstest.Long(t, "Chromium")
	axeSrc, err := os.ReadFile(tools.Axe(t))
	if err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t)
	down := newDownstream(t)
	st, keyFile := startWalkStack(t, down)
	// At a name: passkeys take no IP address as their relying party.
	base := atName(st)
	pw := func(user string) string { return st.Secrets().Users[user].Password }
	viewerNC, err := st.ConnectAs(access.DefaultPerson(access.RoleViewer))
	if err != nil {
		t.Fatal(err)
	}
	defer viewerNC.Close()
	pub, err := st.ConnectAs(string(access.RolePublisher))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	// A downstream outage: four valid dispenses with the trade's text
	// exhaust their deliveries; one dispense fails validation.
	down.down.Store(true)
	seenEx := openIDs(t, viewerNC, "pharmacy", "exhausted")
	for i := range 4 {
		subject, data := tradeDispense(t, 700+i)
		if _, err := pub.Request(subject, data, 30*time.Second); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	seenVal := openIDs(t, viewerNC, "pharmacy", "validation")
	bad := rawJSON(t, map[string]string{"transaction_id": "TX-WALK-BAD", "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
		"event_type": "dispense", "x_note": tradeText})
	if _, err := pub.Request("events.pharmacy.dispense", bad, 30*time.Second); err != nil {
		t.Fatalf("publish: %v", err)
	}
	badID := newRecord(t, viewerNC, "pharmacy", "validation", seenVal)
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		fresh := 0
		for id := range openIDs(t, viewerNC, "pharmacy", "exhausted") {
			if !seenEx[id] {
				fresh++
			}
		}
		if fresh < 4 {
			return fmt.Errorf("%d of 4 events exhausted", fresh)
		}
		return nil
	})

	n := 0
	next := func() int { n++; return n }
	anon := newPerson(t, browserCtx, base, false)
	anon.open("/login")
	anon.shot(next(), "login", axeSrc)

	am := newPerson(t, browserCtx, base, false)
	var approvalPath string
	t.Run("amara triages and asks for a correction", func(t *testing.T) {
		am.t = t
		// A failed login keeps the name typed.
		am.open("/login")
		am.do(chromedp.SendKeys(chromedp.CSS("#user"), amara), chromedp.SendKeys(chromedp.CSS("#password"), "not-her-password"),
			chromedp.Click(chromedp.CSS(`form.login button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`main .alert`)))
		if got := eval[string](am, `document.querySelector("#user").value`); got != amara {
			t.Errorf("the user name after a failed login: %q", got)
		}
		am.shot(next(), "login-failed", axeSrc)
		am.login(amara, pw(amara))
		am.open("/")
		am.shot(next(), "overview", axeSrc)
		am.open("/groups?domain=pharmacy")
		if !strings.Contains(am.html(), `class="drain-group"`) {
			t.Error("the Groups page offers no drain of a group")
		}
		am.shot(next(), "groups", axeSrc)
		am.open("/records?domain=pharmacy")
		if got := am.text("table.records thead"); !strings.Contains(got, "Error code") || strings.Contains(got, "error_code") {
			t.Errorf("headers %q", got)
		}
		// Ids are whole: one line, the full value in the title.
		if lines := eval[int](am, `document.querySelector("table.records a.id").getClientRects().length`); lines != 1 {
			t.Errorf("an id spans %d lines", lines)
		}
		if got := eval[string](am, `document.querySelector("table.records a.id").title`); !strings.HasPrefix(got, "pharmacy_") {
			t.Errorf("an id's title %q", got)
		}
		if eval[bool](am, `document.querySelector("button.copy").hidden`) {
			t.Error("no copy button")
		}
		am.shot(next(), "records", axeSrc)

		am.open("/records/" + badID)
		if !strings.Contains(am.html(), `id="correction"`) {
			t.Error("the editor is hidden until a reveal")
		}
		am.shot(next(), "record", axeSrc)
		am.do(chromedp.SendKeys(chromedp.CSS("#reveal-reason"), "walk: the pharmacy's invoice"),
			chromedp.Click(chromedp.CSS("#reveal")), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
		if got := am.text("pre.payload"); !strings.Contains(got, "Müller & Söhne <Großhandel>") {
			t.Errorf("the revealed payload %q", got)
		}
		_, data := tradeDispense(t, 900)
		// As typed in a browser: CRLF line ends and a final line break.
		var v any
		_ = json.Unmarshal(data, &v)
		var pretty bytes.Buffer
		e := json.NewEncoder(&pretty)
		e.SetEscapeHTML(false)
		e.SetIndent("", "  ")
		_ = e.Encode(v)
		typed := strings.ReplaceAll(strings.TrimSpace(pretty.String()), "\n", "\r\n") + "\r\n"
		js, _ := json.Marshal(typed)
		am.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#correction").value = `+string(js)),
			chromedp.SendKeys(chromedp.CSS("#correct-reason"), "walk: the invoice's transaction"))
		am.submit("#check-correction", "#check-result")
		if got := am.text("#check-result"); !strings.HasPrefix(got, "Valid") {
			t.Fatalf("the correction checks %q", got)
		}
		for _, l := range strings.Split(am.text("#diff"), "\n") {
			if l := strings.TrimSpace(l); l == "- }" || l == "+ }" {
				t.Errorf("a spurious %q in the diff:\n%s", l, am.text("#diff"))
			}
		}
		am.shot(next(), "record-correction", axeSrc)
		am.submit("#submit-correction", ".notice")
		m := regexp.MustCompile(`^Sent for approval (\S+)`).FindStringSubmatch(am.text(".notice"))
		if m == nil {
			t.Fatalf("notice %q, want sent for approval", am.text(".notice"))
		}
		approvalPath = "/approvals/" + m[1]
		if !strings.HasSuffix(eval[string](am, `location.pathname`), "/records/"+badID) {
			t.Errorf("the outcome is not on the record's page (POST/redirect/GET): %s", eval[string](am, `location.pathname`))
		}
		am.shot(next(), "record-sent-for-approval", axeSrc)
		// The requester cannot approve.
		am.open(approvalPath)
		if strings.Contains(am.html(), `id="approve"`) {
			t.Error("the requester is offered Approve")
		}
		if status, _ := am.post(approvalPath+"/approve", "meaning=mine&password="+pw(amara)+"&csrf="+am.csrf(), nil); status != 403 {
			t.Errorf("the requester's forged approve: %d", status)
		}
	})
	if approvalPath == "" {
		t.FailNow()
	}

	cw := newPerson(t, browserCtx, base, false)
	t.Run("chen approves: the diff, a wrong password refused with the meaning kept, signed with his passkey", func(t *testing.T) {
		cw.t = t
		// chen's laptop has a platform authenticator; he makes a passkey
		// and the administrator registers it.
		cw.virtualAuthenticator()
		cw.login(chen, pw(chen))
		key, _ := cw.makePasskey("ThinkPad 陈伟")
		cw.shot(next(), "passkeys", axeSrc)
		registerPasskey(t, st, chen, access.RoleApprover, key)
		cw.open("/approvals")
		cw.shot(next(), "approvals", axeSrc)
		cw.open(approvalPath)
		// Both payloads as written: the correction reached the redriver
		// byte for byte (no \u0026 where the operator typed &).
		if got := cw.text("#approval-payload"); !strings.Contains(got, "Müller & Söhne <Großhandel>") || strings.Contains(got, `\u0026`) {
			t.Errorf("the corrected payload as the approver reads it: %q", got)
		}
		cw.shot(next(), "approval", axeSrc)
		meaning := "Geprüft: Rechnung Müller & Söhne <Nord>"
		cw.do(chromedp.SendKeys(chromedp.CSS("#approve-meaning"), meaning))
		cw.submit("#approve", "main .notice")
		if got := cw.text("main .notice"); !strings.HasPrefix(got, "Approved by "+chen) {
			t.Errorf("notice %q", got)
		}
		cw.shot(next(), "approval-signed", axeSrc)
		cw.open("/records/" + badID)
		if got := cw.text(".timeline"); !strings.Contains(got, "approved by "+chen) || !strings.Contains(got, amara) {
			t.Errorf("the timeline does not name both people: %q", got)
		}
		cw.shot(next(), "record-signed", axeSrc)
	})

	jm := newPerson(t, browserCtx, base, false)
	var drainPath string
	t.Run("jonas drains the outage's group once the downstream is back", func(t *testing.T) {
		jm.t = t
		down.down.Store(false)
		jm.login(jonas, pw(jonas))
		jm.open("/groups?domain=pharmacy")
		link := eval[string](jm, `(a => a ? a.getAttribute("href") : "")([...document.querySelectorAll("a.drain-group")].find(a => a.href.includes("DOWNSTREAM_UNAVAILABLE") && !a.href.includes("party=")))`)
		if link == "" {
			t.Fatalf("no drain link for the outage's group:\n%s", jm.text("main"))
		}
		jm.open(link)
		if got := jm.text("#plan-selected"); got == "0" {
			t.Fatalf("the group's plan selects nothing:\n%s", jm.text("main"))
		}
		if got := eval[string](jm, `document.querySelector("input[name=codes]").value`); got != "DOWNSTREAM_UNAVAILABLE" {
			t.Errorf("the plan's codes %q", got)
		}
		jm.shot(next(), "drain-plan", axeSrc)
		jm.do(chromedp.SendKeys(chromedp.CSS("#d-rate"), "0"), chromedp.SendKeys(chromedp.CSS("#d-reason"), "walk: the downstream is back"))
		jm.submit("#start-drain", "#drain-status")
		drainPath = eval[string](jm, `location.pathname`)
		status := func() string {
			return eval[string](jm, `(document.querySelector("#drain-status") || {}).textContent || ""`)
		}
		natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			if st := status(); st != api.DrainCompleted {
				return fmt.Errorf("drain status %q", st)
			}
			return nil
		})
		jm.open(drainPath)
		if eval[bool](jm, `document.querySelector("#drain-rate") !== null`) {
			t.Error("the rate line stays after the drain completed")
		}
		jm.shot(next(), "drain-completed", axeSrc)
		// Back to the plan: planned again; the old plan's Start is refused.
		jm.do(chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if eval[string](jm, `location.pathname`) == "/drains/plan" && eval[bool](jm, `document.querySelector("#start-drain") !== null`) {
			jm.do(chromedp.SendKeys(chromedp.CSS("#d-reason"), "walk: again"))
			jm.submit("#start-drain", "main h1")
			if p := eval[string](jm, `location.pathname`); p != "/drains/start" && p != "/drains/plan" && strings.HasPrefix(p, "/drains/") {
				// A fresh plan after Back starts what it shows (nothing
				// is left): acceptable; a stale one must not.
				t.Logf("the replanned drain started: %s", p)
			}
		}
		jm.open("/drains")
		jm.shot(next(), "drains", axeSrc)
	})

	in := newPerson(t, browserCtx, base, false)
	t.Run("ines holds a record from the Records list and exports a JSONL she verifies offline", func(t *testing.T) {
		in.t = t
		in.login(ines, pw(ines))
		in.open("/records?domain=pharmacy")
		in.do(chromedp.Click(chromedp.CSS(`input.select[value="`+badID+`"]`)),
			chromedp.SendKeys(chromedp.CSS("#bulk-case"), "CASE-2026-Ü17"),
			chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "walk: DEA inquiry & recall <lot>"))
		in.submit("#bulk-hold", "main .notice")
		if got := in.text("main .notice"); !strings.HasPrefix(got, "1 of 1 selected records held") {
			t.Errorf("notice %q", got)
		}
		in.waitText("/records?domain=pharmacy", "table.records", "held")
		in.shot(next(), "records-held", axeSrc)
		in.open("/holds")
		in.shot(next(), "holds", axeSrc)
		in.open("/")
		if got := in.text("#held-records"); got == "0" {
			t.Error("the Overview counts no held record")
		}

		// A checkpoint (the operator's), then the export.
		jm.open("/audit")
		jm.submit("#checkpoint", "#h-checkpoint")
		dir := t.TempDir()
		if _, err := chromedp.CallBrowser(in.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, BrowserContextID: chromedp.FromContext(in.ctx).BrowserContextID, DownloadPath: dir,
		}); err != nil {
			t.Fatal(err)
		}
		in.open("/audit")
		in.shot(next(), "audit", axeSrc)
		in.do(chromedp.SendKeys(chromedp.CSS("#x-domain"), "pharmacy"),
			chromedp.Click(chromedp.CSS("#x-format-jsonl")),
			chromedp.SendKeys(chromedp.CSS("#x-reason"), "walk: DEA inquiry"),
			chromedp.Click(chromedp.CSS("#export")))
		var file string
		natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			m, _ := filepath.Glob(filepath.Join(dir, "deadletter-export-*.jsonl"))
			if len(m) == 0 {
				return errors.New("no JSONL downloaded")
			}
			file = m[0]
			return nil
		})
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), badID) {
			t.Errorf("the export lacks the corrected record %s", badID)
		}
		if !strings.Contains(string(b), `Söhne`) && !strings.Contains(string(b), `S\u00f6hne`) {
			t.Error("the export holds no payload with the trade's text")
		}
		key, err := auditor.SigningPublicKey(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rep, err := auditor.VerifyExport(f, key)
		if err != nil {
			t.Fatalf("the export downloaded through Chromium does not verify with the audit key: %v", err)
		}
		t.Logf("verified offline: %d chains, %d records (%d after the checkpoint)", rep.Chains, rep.Records, rep.Uncovered)
		if rep.Records == 0 {
			t.Error("the verified export holds no record")
		}
	})

	t.Run("a shipment document with one bad event: groups by document, provenance, an overlapping drain refused", func(t *testing.T) {
		am.t, jm.t = t, t
		set, err := sample.Load()
		if err != nil {
			t.Fatal(err)
		}
		const docID, events, badAt = "SHIP-WALK-4812", 12, 4
		data, err := set.Document(docID, int(time.Now().UnixNano()%1e6), events, map[int]bool{badAt: true})
		if err != nil {
			t.Fatal(err)
		}
		seenDoc := openIDs(t, viewerNC, dscsa.Name, "validation")
		if _, err := pub.Request(subjects.Event(dscsa.Name, subjects.DocumentType), data, 30*time.Second); err != nil {
			t.Fatalf("publish the document: %v", err)
		}
		docRecord := newRecord(t, viewerNC, dscsa.Name, "validation", seenDoc)

		// Groups by document: the shipment, its sender, the one event
		// quarantined, by code.
		line := am.waitText("/groups?by=document&domain=dscsa", "#doc-groups", docID)
		for _, want := range []string{"Shipment document " + docID, "from " + sample.DocumentSender, sample.DocumentReceiver, "1 event quarantined of 12"} {
			if !strings.Contains(line, want) {
				t.Errorf("the document's group lacks %q: %q", want, line)
			}
		}
		am.shot(next(), "groups-by-document", axeSrc)

		// The record: its position in the document and its event hash ID.
		am.open("/records/" + docRecord)
		if got := am.text("#provenance"); !strings.Contains(got, fmt.Sprintf("event %d of %d", badAt+1, events)) || !strings.Contains(got, docID) ||
			!strings.Contains(got, sample.DocumentSender) {
			t.Errorf("the record's provenance %q", got)
		}
		if !strings.Contains(am.text("main"), "Event hash ID") {
			t.Error("the record shows no event hash ID")
		}
		am.shot(next(), "record-document", axeSrc)

		// An outage again: two dispenses exhaust; amara's drain of them
		// runs slowly (one replay every 1,000 s, no guard); jonas's plan
		// of the same group shows it, and his Start is refused, naming
		// amara's drain with a link.
		down.down.Store(true)
		defer down.down.Store(false)
		seenEx := openIDs(t, viewerNC, "pharmacy", "exhausted")
		for i := range 2 {
			subject, data := tradeDispense(t, 800+i)
			if _, err := pub.Request(subject, data, 30*time.Second); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
			fresh := 0
			for id := range openIDs(t, viewerNC, "pharmacy", "exhausted") {
				if !seenEx[id] {
					fresh++
				}
			}
			if fresh < 2 {
				return fmt.Errorf("%d of 2 events exhausted", fresh)
			}
			return nil
		})
		amNC, err := st.ConnectAs(amara)
		if err != nil {
			t.Fatal(err)
		}
		defer amNC.Close()
		slow := 0.001
		filter := api.DrainFilter{Domain: "pharmacy", Classes: []string{"exhausted"}, ErrorCodes: []string{"DOWNSTREAM_UNAVAILABLE"}}
		started, err := endpoint.Call[api.DrainStartRequest, api.DrainStartReply](context.Background(), amNC, api.DrainStart,
			api.DrainStartRequest{Filter: filter, RatePerSecond: &slow, NoGuard: true, Reason: "walk: slowly, while the downstream recovers"})
		if err != nil {
			t.Fatalf("amara's drain: %v", err)
		}
		defer func() {
			_, _ = endpoint.Call[api.DrainIDRequest, api.DrainState](context.Background(), amNC, api.DrainCancel, api.DrainIDRequest{DrainID: started.DrainID})
		}()
		plan := "/drains/plan?exhausted=on&domain=pharmacy&codes=DOWNSTREAM_UNAVAILABLE&no_guard=on"
		jm.waitText(plan, "#h-plan-overlaps", "Other drains")
		if g := jm.text("#plan-guard"); !strings.Contains(g, "off") || !strings.Contains(jm.text("main"), "become poison") {
			t.Errorf("the plan without a guard: %q", g)
		}
		if ov := jm.text("main"); !strings.Contains(ov, started.DrainID) || !strings.Contains(ov, amara) {
			t.Errorf("the plan does not name amara's drain %s:\n%s", started.DrainID, ov)
		}
		jm.shot(next(), "drain-plan-overlap", axeSrc)
		jm.do(chromedp.SendKeys(chromedp.CSS("#d-reason"), "walk: the same group"))
		jm.submit("#start-drain", "main .alert")
		if got := jm.text("main .alert"); !strings.HasPrefix(got, api.ErrDrainOverlap) {
			t.Errorf("an overlapping start: %q", got)
		}
		if href := eval[string](jm, `(a => a ? a.getAttribute("href") : "")(document.querySelector("#overlap-refusal a.overlap-drain"))`); href != "/drains/"+started.DrainID {
			t.Errorf("the refusal's link to the other drain: %q", href)
		}
		jm.shot(next(), "drain-overlap-refused", axeSrc)
	})

	t.Run("a session that ended: the login from a page in use works and goes back", func(t *testing.T) {
		jm.t = t
		jm.open("/drains")
		// The server no longer knows the page's session (it ended).
		if _, err := chromedp.Call(jm.ctx, network.SetCookie, network.SetCookieParams{Name: "dl_session", Value: strings.Repeat("0", 64),
			URL: strings.TrimSuffix(base, "/") + "/", Path: "/", Secure: ptr(true), HTTPOnly: ptr(true), SameSite: network.CookieSameSiteStrict}); err != nil {
			t.Fatal(err)
		}
		jm.do(chromedp.Click(chromedp.CSS(`nav a[href="/records"]`)), chromedp.WaitVisible(chromedp.CSS("#password")))
		jm.do(chromedp.SendKeys(chromedp.CSS("#user"), jonas), chromedp.SendKeys(chromedp.CSS("#password"), pw(jonas)),
			chromedp.Click(chromedp.CSS(`form.login button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`.user`)))
		if got, path := jm.text(".user"), eval[string](jm, `location.pathname`); got != jonas || path != "/records" {
			t.Errorf("after the login: %q on %s (the page's old CSRF header must not refuse the login)", got, path)
		}
		jm.shot(next(), "records-after-relogin", axeSrc)
	})
}

func ptr[T any](v T) *T { return &v }
