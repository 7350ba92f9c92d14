package main_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/api"
)

// tradeNote is an extension property's text as the trade writes it:
// JSON- and HTML-significant characters, quotes and non-ASCII names.
const tradeNote = `Müller & Söhne <Großhandel> "Nord" — 陈伟药房, 5 < 7 > 3 & '`

// corrected is the JSON of the pharmacy example file rel with changes
// applied, written as a partner's system writes it (& < > as they are,
// indented).
func corrected(tb testing.TB, rel string, changes map[string]any) []byte {
	tb.Helper()
	var doc map[string]any
	if err := json.Unmarshal(readFile(tb, testdata(tb, rel)), &doc); err != nil {
		tb.Fatal(err)
	}
	for k, v := range changes {
		doc[k] = v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// TestRedriveDryRun: `dlqctl redrive --dry-run`, with or without a
// corrected payload, prints what the redrive would do (the subject it is
// checked on, the gate's verdict, the identity fields changed, whether a
// second person must approve) and changes nothing: no record, no
// approval, no replay. It exits 0 when the gate accepts the payload, 1
// when it refuses it or the redrive itself would be refused (a held
// event: HELD).
func TestRedriveDryRun(t *testing.T) {
	e := startStack(t, stackOptions{})
	// The rows below correct a Schedule II dispense and say whether the
	// identity rule asks a second person: the identity rule, not the
	// controlled-substance default, which always asks one for them.
	e.jsonOfAs(t, policyUser, &api.PolicyReply{}, "policy", "set", "--corrections", "identity", "--reason", "the dry run rows test the identity rule")
	const invalidFile = "pharmacy/invalid/INVALID_NDC--letter-in-product-code.json"
	const noActorFile = "pharmacy/invalid/SCHEMA_VALIDATION_ERROR--missing-actor.json"
	e.ok(t, "publish", testdata(t, invalidFile))
	id := e.waitQuarantined(t, api.ListRequest{}, 1).Items[0].DLQID
	e.ok(t, "publish", testdata(t, noActorFile))
	noActorID := e.waitQuarantined(t, api.ListRequest{Code: "SCHEMA_VALIDATION_ERROR"}, 1).Items[0].DLQID
	dir := t.TempDir()
	// The NDC fixed, the transaction kept; a note of the trade's text.
	ndcFixed := writeFile(t, dir, "ndc-fixed.json", corrected(t, invalidFile, map[string]any{"ndc": "00406-0512-01", "x_note": tradeNote}))
	// Another transaction: the event's identity changes.
	otherTx := writeFile(t, dir, "other-transaction.json", corrected(t, invalidFile, map[string]any{"ndc": "00406-0512-01", "transaction_id": "INV-2025-0209/B <Müller & Söhne>"}))
	// A receive, not a dispense: checked on events.pharmacy.receive.
	receive := writeFile(t, dir, "receive.json", readFile(t, testdata(t, "pharmacy/valid/receive-schedule-ii-ndc-4-4-2.json")))
	// Still wrong: a letter in the NDC.
	stillBad := writeFile(t, dir, "still-bad.json", corrected(t, invalidFile, map[string]any{"x_note": tradeNote}))
	// The missing pharmacist added: nothing that names the event changes.
	actorAdded := writeFile(t, dir, "actor-added.json", corrected(t, noActorFile, map[string]any{"actor_id": "RPH-0412", "x_note": tradeNote}))
	notJSON := writeFile(t, dir, "not.json", []byte(`{"ndc": "00406-0512-01",`))

	// What a dry run must leave as it is: the chain, the approvals, EVENTS.
	chainLen := func() int {
		var s output.Show
		e.jsonOfAs(t, viewerUser, &s, "show", id)
		return len(s.Records)
	}
	approvals := func() int {
		var l api.ApprovalListReply
		e.jsonOfAs(t, viewerUser, &l, "approval", "list")
		return len(l.Approvals)
	}
	records, pending := chainLen(), approvals()

	cases := []struct {
		name string
		args []string
		code int
		// ok: the gate accepts; codeIs: the gate's refusal; stderr: the
		// redriver's refusal of the redrive itself.
		ok        bool
		gateCode  string
		stderr    string
		eventType string
		// subjectMoved: checked on another event type than the
		// original's; approval: a second person would be needed;
		// identity: a field the correction must be said to change.
		subjectMoved, approval bool
		identity               string
	}{
		{name: "no correction, validation class", args: []string{"redrive", id, "--dry-run"}, code: 1, stderr: api.ErrNotRedrivable},
		{name: "no correction, include validation: the original refused again", args: []string{"redrive", id, "--dry-run", "--include-validation"},
			code: 1, gateCode: "INVALID_NDC", eventType: "dispense"},
		{name: "the NDC fixed: the ordering key changes, a second person", args: []string{"redrive", id, "--dry-run", "--payload", ndcFixed, "--reason", "NDC from the invoice"},
			code: 0, ok: true, eventType: "dispense", approval: true, identity: "ordering_key"},
		{name: "the pharmacist added: run at once", args: []string{"redrive", noActorID, "--dry-run", "--payload", actorAdded, "--reason", "RPH-0412 per the log <shift 2>"},
			code: 0, ok: true, eventType: "dispense"},
		{name: "another transaction: an identity change, a second person", args: []string{"redrive", id, "--dry-run", "--payload", otherTx, "--reason", "invoice B <Müller & Söhne>"},
			code: 0, ok: true, eventType: "dispense", approval: true, identity: "idempotency_key"},
		{name: "a receive: checked on the receive subject", args: []string{"redrive", id, "--dry-run", "--payload", receive, "--reason", "it was a receipt"},
			code: 0, ok: true, eventType: "receive", subjectMoved: true, approval: true, identity: "event_type"},
		{name: "still a letter in the NDC", args: []string{"redrive", id, "--dry-run", "--payload", stillBad, "--reason", "a try"}, code: 1, gateCode: "INVALID_NDC", eventType: "dispense"},
		{name: "payload from stdin", args: []string{"redrive", id, "--dry-run", "--payload", "-", "--reason", "from the clipboard"},
			code: 0, ok: true, eventType: "dispense", approval: true, identity: "ordering_key"},
		{name: "a correction without a reason", args: []string{"redrive", id, "--dry-run", "--payload", ndcFixed}, code: 2, stderr: "needs --reason"},
		{name: "not JSON", args: []string{"redrive", id, "--dry-run", "--payload", notJSON, "--reason", "typo"}, code: 2, stderr: "is not valid JSON"},
		{name: "no such record", args: []string{"redrive", "pharmacy_00000000000000000000000000000000", "--dry-run", "--payload", ndcFixed, "--reason", "NDC from the invoice"}, code: 1, stderr: api.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdin := ""
			if c.name == "payload from stdin" {
				stdin = string(readFile(t, ndcFixed))
			}
			js := dlqctl(t, e.context(operatorUser), stdin, append([]string{"-o", "json"}, c.args...)...)
			if js.code != c.code || !strings.Contains(js.stderr, c.stderr) {
				t.Fatalf("want exit %d, stderr containing %q: %s", c.code, c.stderr, js)
			}
			if c.stderr != "" {
				return
			}
			var rep output.Redrive
			if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil || rep.Check == nil {
				t.Fatalf("the dry run's JSON (%v): %s", err, js)
			}
			chk := rep.Check
			if rep.DLQID != c.args[1] || rep.Outcome != "" || rep.Status != "open" || rep.Class != "validation" || rep.Actor != "" {
				t.Errorf("reply %+v: want the chain as it stands, no outcome, no actor", rep.RedriveReply)
			}
			if chk.OK != c.ok || chk.Code != c.gateCode || chk.EventType != c.eventType || chk.Subject != "events.pharmacy."+c.eventType || chk.Domain != "pharmacy" {
				t.Errorf("check %+v, want ok %v code %q on events.pharmacy.%s", chk, c.ok, c.gateCode, c.eventType)
			}
			if moved := chk.OriginalEventType != chk.EventType; moved != c.subjectMoved || chk.OriginalEventType != "dispense" {
				t.Errorf("original event type %q, event type %q: want moved %v", chk.OriginalEventType, chk.EventType, c.subjectMoved)
			}
			if chk.ApprovalRequired != c.approval || (c.identity != "" && !strings.Contains(strings.Join(chk.IdentityChanges, ","), c.identity)) {
				t.Errorf("approval %v (%v), identity changes %v: want approval %v, %q changed", chk.ApprovalRequired, chk.ApprovalReasons, chk.IdentityChanges, c.approval, c.identity)
			}

			// The table says the same in words.
			tab := dlqctl(t, e.context(operatorUser), stdin, c.args...)
			if tab.code != c.code {
				t.Fatalf("table: want exit %d: %s", c.code, tab)
			}
			want := []string{
				`(?m)^DLQ ID +` + regexp.QuoteMeta(c.args[1]) + `$`,
				`(?m)^DRY RUN +nothing written, no approval asked for, nothing published$`,
				`(?m)^SUBJECT +events\.pharmacy\.` + c.eventType + `$`,
			}
			if c.ok {
				want = append(want, `(?m)^GATE +accepts the payload$`)
			} else {
				want = append(want, `(?m)^GATE +refuses the payload: `+c.gateCode+`: .+ \(the replay would be quarantined again\)$`)
				if !strings.Contains(tab.stderr, "the gate refuses the payload: "+c.gateCode) {
					t.Errorf("stderr does not say why it failed: %s", tab)
				}
			}
			if c.subjectMoved {
				want = append(want, `(?m)^EVENT TYPE +receive \(the original: dispense; the correction moves the event to this subject\)$`)
			} else {
				want = append(want, `(?m)^EVENT TYPE +`+c.eventType+`$`)
			}
			if len(chk.IdentityChanges) == 0 {
				want = append(want, `(?m)^IDENTITY +unchanged$`)
			} else {
				want = append(want, `(?m)^IDENTITY +changes `+regexp.QuoteMeta(strings.Join(chk.IdentityChanges, ", "))+`$`)
			}
			if c.approval {
				want = append(want, `(?m)^APPROVAL +a second person must approve it first .*APPROVAL_REQUIRED`)
			} else {
				want = append(want, `(?m)^APPROVAL +not needed: the redrive would run at once$`)
			}
			for _, w := range want {
				if !regexp.MustCompile(w).MatchString(tab.stdout) {
					t.Errorf("the table lacks %s:\n%s", w, tab.stdout)
				}
			}
			if strings.Contains(tab.stdout, "Müller") || strings.Contains(tab.stdout, "INV-2025") {
				t.Errorf("the dry run prints a payload value:\n%s", tab.stdout)
			}
		})
	}

	t.Run("nothing changed", func(t *testing.T) {
		if n := chainLen(); n != records {
			t.Errorf("the chain has %d records after the dry runs, had %d", n, records)
		}
		if n := approvals(); n != pending {
			t.Errorf("%d approvals after the dry runs, were %d", n, pending)
		}
		l := e.list(t, api.ListRequest{})
		for _, it := range l.Items {
			if it.Status != "open" || it.RedriveCount != 0 {
				t.Errorf("after the dry runs: %+v", it)
			}
		}
		if l.Total != 2 {
			t.Errorf("%d chains after the dry runs, want 2", l.Total)
		}
	})

	t.Run("a held event: refused as the redrive would be", func(t *testing.T) {
		e.okAs(t, inspectorUser, "hold", "place", id, "--case", "CASE-DRY <Müller & Söhne>", "--reason", "subpoena")
		r := e.dlqctl(t, "", "-o", "json", "redrive", id, "--dry-run", "--payload", ndcFixed, "--reason", "NDC from the invoice")
		if r.code != 1 || !strings.Contains(r.stderr, `"code":"`+api.ErrHeld+`"`) || r.stdout != "" {
			t.Errorf("want exit 1, %s: %s", api.ErrHeld, r)
		}
	})
}
