package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// teamShot is shot into screenshots/team/.
func (p *person) teamShot(n int, name string, axeSrc []byte) {
	p.t.Helper()
	dir := filepath.Join(tools.Root(p.t), "tests", "console", "screenshots", "team")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	p.shotTo(dir, n, name, axeSrc)
}

// presence makes the tab's authenticator confirm the person's presence
// at once (on), or wait for it (off: a passkey prompt left open).
func (p *person) presence(on bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, webauthn.SetAutomaticPresenceSimulation, webauthn.SetAutomaticPresenceSimulationParams{AuthenticatorID: p.authenticator, Enabled: on}); err != nil {
		p.t.Fatalf("WebAuthn.setAutomaticPresenceSimulation: %v", err)
	}
}

// recordsFit checks that the Records table on the page shows every
// column at 1366 px wide (it does not scroll sideways in its box).
func (p *person) recordsFit() {
	p.t.Helper()
	p.do(chromedp.EmulateViewport(1366, 768))
	if over := eval[int](p, `(s => s.scrollWidth - s.clientWidth)(document.querySelector("table.records").closest(".scroll"))`); over > 0 {
		p.t.Errorf("the Records table scrolls %d px sideways at 1366 px: its last columns are cut", over)
	}
}

// scheduleIIDispense is a Schedule II dispense whose quantity the gate
// refuses ("-3e1", not a decimal as the schema writes it), with the
// trade's text; it returns the event and the same event with the
// quantity corrected to qty.
func scheduleIIDispense(t *testing.T, i int, qty string) (bad, fixed map[string]any) {
	t.Helper()
	if err := json.Unmarshal(validDispense(t, 4000+i).Data, &bad); err != nil {
		t.Fatal(err)
	}
	bad["dea_schedule"], bad["quantity_delta"] = "II", "-3e1"
	bad["transaction_id"] = fmt.Sprintf("INV-2026-40%02d <Müller & Söhne> \"Nord\"", i)
	bad["x_note"], bad["x_pharmacist"] = tradeText, "陈伟"
	fixed = make(map[string]any, len(bad))
	for k, v := range bad {
		fixed[k] = v
	}
	fixed["quantity_delta"] = qty
	return bad, fixed
}

// typed is a JSON document as a person types it into the correction
// editor: indented, & < > as they are, CRLF line ends.
func typed(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.TrimSpace(b.String()), "\n", "\r\n") + "\r\n"
}

// askCorrectionInConsole opens record id, reveals its payload, types the
// correction, checks it and sends it: the record's page then says what
// came of it (a notice, or the refusal).
func (p *person) askCorrectionInConsole(id string, corrected any, reason string) {
	p.t.Helper()
	p.open("/records/" + id)
	p.do(chromedp.SendKeys(chromedp.CSS("#reveal-reason"), "the pharmacy's count sheet"),
		chromedp.Click(chromedp.CSS("#reveal")), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
	js, _ := json.Marshal(typed(p.t, corrected))
	p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#correction").value = `+string(js)),
		chromedp.SendKeys(chromedp.CSS("#correct-reason"), reason))
	p.submit("#check-correction", "#check-result")
}

// TestPharmacyTeamWalk walks the pharmacy team's day in Chromium under
// the default policy (corrections of a controlled substance need a
// second person, issue #40): amara.okafor (operator) asks for the
// correction of a Schedule II dispense's quantity, sent for approval;
// jonas.mueller (operator) opens the same record, sees the pending
// correction (who, when, what it changes) and his own correction is
// refused CORRECTION_PENDING, naming hers; amara, who also holds the
// approver role (amara.okafor+approver), is not offered her own request
// to approve and a forged approval is refused SELF_APPROVAL in words;
// chen.wei (approver) signs it with his passkey and it executes. A
// second request of amara's goes stale (jonas replays the record as it
// is, and its chain moves on): the approval page says so before signing,
// and chen's signature is refused as stale, never executed, in words, on
// the page and in the approvals list. The Records table fits 1366 px,
// every column shown. Screenshots of each step in both window sizes:
// tests/console/screenshots/team/.
func TestPharmacyTeamWalk(t *testing.T) {
	natstest.Long(t, "Chromium")
	axeSrc, err := os.ReadFile(tools.Axe(t))
	if err != nil {
		t.Fatal(err)
	}
	browserCtx := startBrowser(t)
	var amaraApprover string
	st, _ := startWalkStackWith(t, newDownstream(t), func(sec *access.Secrets) {
		var err error
		if amaraApprover, err = sec.Grant(amara, access.RoleApprover, access.Admin); err != nil {
			t.Fatal(err)
		}
	})
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

	// Two Schedule II dispenses the gate refuses for their quantity.
	var ids [2]string
	var fixes [2]map[string]any
	for i := range ids {
		seen := openIDs(t, viewerNC, "pharmacy", "validation")
		bad, fixed := scheduleIIDispense(t, i, "-30")
		if _, err := pub.Request("events.pharmacy.dispense", rawJSON(t, bad), 30*time.Second); err != nil {
			t.Fatalf("publish: %v", err)
		}
		ids[i], fixes[i] = newRecord(t, viewerNC, "pharmacy", "validation", seen), fixed
	}

	n := 0
	next := func() int { n++; return n }
	am := newPerson(t, browserCtx, base, false)
	am.login(amara, pw(amara))
	jm := newPerson(t, browserCtx, base, false)
	jm.login(jonas, pw(jonas))
	cw := newPerson(t, browserCtx, base, false)
	cw.virtualAuthenticator()
	cw.login(chen, pw(chen))
	key, _ := cw.makePasskey("ThinkPad 陈伟 <Apotheke> & \"Labor\"")
	registerPasskey(t, st, chen, access.RoleApprover, key)

	sentRE := regexp.MustCompile(`^Sent for approval (\S+)`)
	var approvalID string
	t.Run("amara asks for a correction of a Schedule II quantity: sent for a second person", func(t *testing.T) {
		am.t = t
		am.askCorrectionInConsole(ids[0], fixes[0], "Zählung 30 Stück, Müller & Söhne <Nord>")
		if got := am.text("#check-result"); !strings.HasPrefix(got, "Valid") || !strings.Contains(got, "second person") {
			t.Fatalf("the check %q, want valid and sent for a second person's approval", got)
		}
		am.teamShot(next(), "amara-checked", axeSrc)
		am.submit("#submit-correction", "main .notice, main .alert")
		m := sentRE.FindStringSubmatch(am.text("main .notice"))
		if m == nil {
			t.Fatalf("notice %q, want sent for approval", am.text("main"))
		}
		approvalID = m[1]
		am.teamShot(next(), "amara-sent", axeSrc)
	})
	if approvalID == "" {
		t.FailNow()
	}

	t.Run("jonas opens the record: the pending correction shown, his own refused CORRECTION_PENDING naming it", func(t *testing.T) {
		jm.t = t
		jm.open("/records/" + ids[0])
		pending := jm.text("#pending-correction")
		for _, want := range []string{approvalID, amara, "quantity", "waits for a second person"} {
			if !strings.Contains(pending, want) {
				t.Errorf("the pending correction %q lacks %q", pending, want)
			}
		}
		jm.teamShot(next(), "jonas-sees-pending", axeSrc)
		_, other := scheduleIIDispense(t, 0, "-28")
		other["transaction_id"] = fixes[0]["transaction_id"]
		jm.askCorrectionInConsole(ids[0], other, "陈伟 counted 28 <not 30>")
		if jm.exists("#submit-correction") {
			jm.submit("#submit-correction", "main .alert")
		}
		refusal := jm.text("main .alert, #check-result")
		if !strings.Contains(refusal, approval.CodeCorrectionPending) || !strings.Contains(refusal, approvalID) {
			t.Errorf("jonas's second correction: %q, want %s naming %s", refusal, approval.CodeCorrectionPending, approvalID)
		}
		if !jm.exists("#pending-correction") {
			t.Error("the refusal's page does not show the pending correction")
		}
		jm.teamShot(next(), "jonas-refused-pending", axeSrc)
		if n := chainLength(t, viewerNC, ids[0]); n != 1 {
			t.Errorf("the refused correction changed the chain: %d records", n)
		}
	})

	t.Run("amara, an approver too, cannot approve her own request", func(t *testing.T) {
		aa := newPerson(t, browserCtx, base, false)
		aa.login(amaraApprover, pw(amaraApprover))
		aa.open("/approvals/" + approvalID)
		if aa.exists("#approve") {
			t.Error("the requester is offered Approve")
		}
		if got := aa.text("#approval-own"); !strings.Contains(got, "You asked for this request") || !strings.Contains(got, "second person") {
			t.Errorf("the page says %q to its requester", got)
		}
		aa.teamShot(next(), "amara-own-request", axeSrc)
		// A forged approval (no passkey): refused by the redriver in words.
		status, body := aa.post("/approvals/"+approvalID+"/approve", url.Values{"csrf": {aa.csrf()}, "meaning": {"my own"}}.Encode(), nil)
		if status != http.StatusForbidden || !strings.Contains(body, api.ErrSelfApproval) || !strings.Contains(body, "own request") {
			t.Errorf("the requester's forged approval: %d %.400s", status, body)
		}
	})

	t.Run("chen approves, signed with his passkey: executed", func(t *testing.T) {
		cw.t = t
		path := "/approvals/" + approvalID
		cw.open(path)
		if cw.exists("#approval-moved") || cw.exists("#approval-own") {
			t.Errorf("a fresh approval is shown stale or as chen's own: %q", cw.text("#h-decide + *"))
		}
		if got := cw.text("#payload-diff"); !strings.Contains(got, "quantity_delta") || !strings.Contains(got, `"-30"`) {
			t.Errorf("the changed fields %q", got)
		}
		meaning := "Geprüft: Zählung 30 <Nord> & 陈伟"
		cw.do(chromedp.SendKeys(chromedp.CSS("#approve-meaning"), meaning))
		cw.teamShot(next(), "chen-to-sign", axeSrc)
		// While the passkey asks for his presence, the page shows what it
		// signs: looked at, then left (reloaded) and signed again.
		cw.presence(false)
		cw.do(chromedp.Click(chromedp.CSS("#approve")))
		natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			if got := eval[string](cw, `(n => n ? n.textContent : "")(document.querySelector(".sign-status"))`); !strings.Contains(got, "Confirm with your passkey") {
				return fmt.Errorf("the signing status %q", got)
			}
			return nil
		})
		if got := cw.text("[data-sign-show]"); !strings.Contains(got, approvalID) || !strings.Contains(got, meaning) || !strings.Contains(got, chen) {
			t.Errorf("the decision shown while signing: %q", got)
		}
		cw.teamShot(next(), "chen-signing", axeSrc)
		cw.presence(true)
		cw.open(path)
		cw.do(chromedp.SendKeys(chromedp.CSS("#approve-meaning"), meaning))
		cw.submit("#approve", "main .notice, main .alert, .sign-status.failed")
		if cw.exists("main .alert, .sign-status.failed") {
			t.Fatalf("approve refused: %q", cw.text("main .alert, .sign-status.failed"))
		}
		words := cw.waitText(path, "#approval-words", "executed")
		if !strings.Contains(words, "replayed and committed") {
			t.Errorf("the executed approval reads %q", words)
		}
		cw.teamShot(next(), "chen-executed", axeSrc)
	})

	var staleID string
	t.Run("a request gone stale: the record moved on before chen signs, refused as stale in words", func(t *testing.T) {
		am.t, jm.t, cw.t = t, t, t
		am.askCorrectionInConsole(ids[1], fixes[1], "Zählung 30 Stück")
		am.submit("#submit-correction", "main .notice, main .alert")
		m := sentRE.FindStringSubmatch(am.text("main .notice"))
		if m == nil {
			t.Fatalf("notice %q, want sent for approval", am.text("main"))
		}
		staleID = m[1]
		// jonas replays the record as it is: it fails again, and its
		// chain moves on past the approval's.
		jm.open("/records/" + ids[1])
		jm.do(chromedp.Click(chromedp.CSS("#include-validation")), chromedp.SendKeys(chromedp.CSS("#redrive-reason"), "once more, as sent"))
		jm.submit("#redrive", "main .notice, main .alert")
		if jm.exists("main .alert") {
			t.Fatalf("the replay: %q", jm.text("main .alert"))
		}
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if n := chainLength(t, viewerNC, ids[1]); n < 3 {
				return fmt.Errorf("the replayed chain has %d records", n)
			}
			return nil
		})
		path := "/approvals/" + staleID
		moved := cw.waitText(path, "main", "moved on")
		if !strings.Contains(moved, "refused as stale") {
			t.Errorf("the stale approval's page says %q", moved)
		}
		cw.do(chromedp.SendKeys(chromedp.CSS("#approve-meaning"), "Geprüft, Zählung 30"))
		cw.teamShot(next(), "chen-stale-to-sign", axeSrc)
		cw.submit("#approve", "main .notice, main .alert, .sign-status.failed")
		alert := cw.text("main .alert, .sign-status.failed")
		if !strings.Contains(alert, "stale") || !strings.Contains(alert, "never executed") {
			t.Errorf("signing the stale approval: %q", alert)
		}
		if got := cw.text("#approval-words"); !strings.Contains(got, "refused as stale") || !strings.Contains(got, "never executed") {
			t.Errorf("the stale approval reads %q", got)
		}
		if got := cw.text("#approval-status"); got != api.ApprovalRefused {
			t.Errorf("the stale approval's status %q", got)
		}
		cw.teamShot(next(), "chen-stale-refused", axeSrc)
		if n := chainLength(t, viewerNC, ids[1]); n != 3 {
			t.Errorf("the stale approval appended to the chain: %d records", n)
		}
	})

	t.Run("the approvals list and the Records table read whole at 1366 px", func(t *testing.T) {
		cw.t, am.t = t, t
		cw.open("/approvals")
		for id, want := range map[string]string{approvalID: "executed: replayed and committed", staleID: "refused as stale"} {
			if got := cw.text("#approvals-table tr:has(a[href='/approvals/" + id + "'])"); !strings.Contains(got, want) {
				t.Errorf("the approvals list's row of %s: %q, want %q", id, got, want)
			}
		}
		cw.teamShot(next(), "approvals", axeSrc)
		am.open("/records?domain=pharmacy")
		am.recordsFit()
		am.teamShot(next(), "records", axeSrc)
	})
}
