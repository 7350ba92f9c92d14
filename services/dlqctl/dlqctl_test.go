package main_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestUsage checks the exit status and message of command lines that are
// wrong (2) or cannot reach a server (1), without a server.
func TestUsage(t *testing.T) {
	const nowhere = "nats://127.0.0.1:1"
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown command", []string{"bogus"}, 2, `unknown command "bogus"`},
		{"unknown flag", []string{"ls", "--bogus"}, 2, "unknown flag: --bogus"},
		{"bad output", []string{"ls", "-o", "xml"}, 2, "--output must be table or json"},
		{"show without id", []string{"show"}, 2, "needs 1 argument(s): DLQ-ID"},
		{"show with two ids", []string{"show", "a", "b"}, 2, "needs 1 argument(s)"},
		{"bad since", []string{"ls", "--since", "yesterday"}, 2, `--since: "yesterday" is not a time: use 2026-12-05, 2026-12-05T14:30:00Z or 2h ago`},
		{"bad grace", []string{"reconcile", "--grace", "7d"}, 2, `--grace: "7d" is not a duration: use 30s, 5m or 1h`},
		{"bad class", []string{"ls", "--class", "broken"}, 2, "--class must be one of"},
		{"negative rate", []string{"drain", "--rate", "-1"}, 2, "--rate must not be negative"},
		{"bad rate", []string{"drain", "--rate", "fast"}, 2, "invalid argument"},
		{"detach and dry run", []string{"drain", "--detach", "--dry-run"}, 2, "exclude each other"},
		{"negative canary", []string{"drain", "--canary", "-1"}, 2, "--canary must not be negative"},
		{"max failure rate above 1", []string{"drain", "--max-failure-rate", "1.5"}, 2, "--max-failure-rate must be in [0, 1]"},
		{"ramp without hold", []string{"drain", "--ramp", "1,5"}, 2, "--ramp needs --ramp-hold"},
		{"no guard with a canary", []string{"drain", "--no-guard", "--canary", "3"}, 2, "--no-guard turns the guard off"},
		{"resume without id", []string{"drain", "resume"}, 2, "DRAIN-ID"},
		{"bad progress", []string{"drain", "--progress", "fancy"}, 2, "--progress must be one of"},
		{"drain extra argument", []string{"drain", "now"}, 2, `unknown command "now"`},
		{"release without reason", []string{"release", "pharmacy_x"}, 2, "release needs --reason"},
		{"correction without reason", []string{"redrive", "pharmacy_x", "--payload", "-"}, 2, "needs --reason"},
		{"publish missing file", []string{"publish", "/nonexistent.json"}, 2, "no such file"},
		{"show payload without reason", []string{"show", "pharmacy_x", "--payload"}, 2, "--payload needs --reason"},
		{"export without reason", []string{"export", "--out", "x.csv"}, 2, "--reason is required"},
		{"export without out", []string{"export", "--reason", "r"}, 2, "--out is required"},
		{"export bad format", []string{"export", "--reason", "r", "--out", "x.pdf"}, 2, "--format must be one of"},
		{"export bad since", []string{"export", "--reason", "r", "--out", "x.csv", "--since", "yesterday"}, 2, "--since"},
		{"verify-export without key", []string{"verify-export", "x.jsonl"}, 2, "--pubkey is required"},
		{"publish type without domain", []string{"publish", "--type", "dispense", "-"}, 2, "--type needs --domain"},
		{"find without identifier", []string{"find", "--state", "open"}, 2, "give at least one identifier"},
		{"find bad state", []string{"find", "--ndc", "0409-4888-20", "--state", "lost"}, 2, "--state must be one of"},
		{"find --id without a value", []string{"find", "--id", "ndc"}, 2, "--id takes name=value"},
		{"no server", []string{"-s", nowhere, "ls"}, 1, "connect nats://127.0.0.1:1"},
		{"approval ls like drain ls", []string{"-s", nowhere, "approval", "ls"}, 1, "connect nats://127.0.0.1:1"},
		{"no server json", []string{"-s", nowhere, "-o", "json", "verify"}, 1, `{"error":{"code":"CONNECT"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdin := ""
			if c.name == "correction without reason" {
				stdin = `{"a":1}`
			}
			r := dlqctl(t, "", stdin, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("want exit %d and stderr containing %q; got %s", c.code, c.stderr, r)
			}
			if r.stdout != "" {
				t.Errorf("stdout should be empty: %q", r.stdout)
			}
		})
	}
}

// TestCompletion checks cobra's generated completion scripts.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run(shell, func(t *testing.T) {
			r := dlqctl(t, "", "", "completion", shell)
			if r.code != 0 || !strings.Contains(r.stdout, "dlqctl") {
				t.Fatalf("completion %s: %s", shell, r)
			}
		})
	}
	// Dynamic completion of a flag value.
	r := dlqctl(t, "", "", "__complete", "ls", "--class", "")
	for _, c := range []string{"validation", "exhausted", "poison"} {
		if !strings.Contains(r.stdout, c) {
			t.Errorf("--class completion lacks %s: %s", c, r)
		}
	}
}

// TestPublish publishes files, directories and stdin as the client user,
// checks the detected subjects, sequences and de-duplication, and follows
// the quarantine live with tail.
func TestPublish(t *testing.T) {
	e := startStack(t, stackOptions{})
	dir := t.TempDir()
	lines := readFile(t, testdata(t, "dscsa/valid/commissioning-sgtin.json"))
	ndjson := writeFile(t, dir, "events.ndjson", []byte(compact(t, lines)+"\n\n"+compact(t, readFile(t, testdata(t, "dscsa/valid/decommissioning.json")))+"\n"))
	writeFile(t, dir, "unknown.json", []byte(`{"hello":"world"}`))

	cases := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		subjects []string // expected subjects, in order ("" for an error)
		dup      []bool
	}{
		{name: "file", args: []string{testdata(t, "pharmacy/valid/dispense-schedule-ii.json")},
			subjects: []string{"events.pharmacy.dispense"}},
		{name: "directory", args: []string{testdata(t, "fsma/valid")},
			subjects: []string{"events.fsma.cooling", "events.fsma.cooling", "events.fsma.first_land_based_receiving",
				"events.fsma.first_land_based_receiving", "events.fsma.harvesting", "events.fsma.harvesting", "events.fsma.harvesting",
				"events.fsma.initial_packing", "events.fsma.initial_packing", "events.fsma.receiving", "events.fsma.receiving",
				"events.fsma.receiving", "events.fsma.shipping", "events.fsma.shipping", "events.fsma.shipping",
				"events.fsma.transformation", "events.fsma.transformation"}},
		{name: "stdin", args: []string{"-"}, stdin: string(readFile(t, testdata(t, "dscsa/valid/shipping-offset-0500.json"))),
			subjects: []string{"events.dscsa.shipping"}},
		{name: "json lines", args: []string{"--lines", ndjson},
			subjects: []string{"events.dscsa.commissioning", "events.dscsa.decommissioning"}},
		{name: "msg id", args: []string{"--msg-id", "order-1", testdata(t, "pharmacy/valid/adjust-negative-schedule-iii.json")},
			subjects: []string{"events.pharmacy.adjust"}, dup: []bool{false}},
		// EVENTS honours no publisher-chosen msg id (another publisher could
		// use it first): the copy is stored, and the validator commits the
		// event once by its business key.
		{name: "msg id again", args: []string{"--msg-id", "order-1", testdata(t, "pharmacy/valid/adjust-negative-schedule-iii.json")},
			subjects: []string{"events.pharmacy.adjust"}, dup: []bool{false}},
		{name: "domain and type given", args: []string{"--domain", "pharmacy", "--type", "dispense", "-"}, stdin: `{"not":"detected"}`,
			subjects: []string{"events.pharmacy.dispense"}},
		{name: "undetectable", args: []string{writeFile(t, dir, "x/unknown.json", []byte(`{"hello":"world"}`)),
			testdata(t, "pharmacy/valid/count-zero-difference-schedule-ii.json")}, code: 1,
			subjects: []string{"", "events.pharmacy.count"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.dlqctl(t, c.stdin, append([]string{"-o", "json", "publish"}, c.args...)...)
			if r.code != c.code {
				t.Fatalf("want exit %d: %s", c.code, r)
			}
			res := publishResults(t, r.stdout)
			if len(res) != len(c.subjects) {
				t.Fatalf("%d results, want %d: %s", len(res), len(c.subjects), r)
			}
			for i, p := range res {
				if p.Subject != c.subjects[i] {
					t.Errorf("result %d: subject %q, want %q (%+v)", i, p.Subject, c.subjects[i], p)
				}
				switch {
				case c.subjects[i] == "" && !strings.Contains(p.Error, "cannot tell the domain"):
					t.Errorf("result %d: error %q", i, p.Error)
				case c.subjects[i] != "" && (p.Error != "" || p.Seq == 0 || p.Stream != "EVENTS"):
					t.Errorf("result %d not stored: %+v", i, p)
				}
				if c.dup != nil && p.Duplicate != c.dup[i] {
					t.Errorf("result %d: duplicate %v, want %v", i, p.Duplicate, c.dup[i])
				}
			}
			if c.name == "directory" {
				// Through the publisher's import, in one atomic batch.
				if ids := batchIDs(t, e, res); len(ids) != 1 || ids[0] == "" {
					t.Errorf("the directory's events were stored in batches %q, want one", ids)
				}
			}
		})
	}

	t.Run("table output", func(t *testing.T) {
		r := e.ok(t, "publish", testdata(t, "pharmacy/valid/dispense-schedule-v-null-lot-and-expiry.json"))
		if !regexp.MustCompile(`^\d+ +events\.pharmacy\.dispense .*dispense-schedule-v-null-lot-and-expiry\.json\n$`).MatchString(r.stdout) {
			t.Errorf("publish line: %q", r.stdout)
		}
	})

	t.Run("tail follows new records", func(t *testing.T) {
		// A viewer (no payload rights, no JetStream) follows through the
		// auditor's records list.
		cmd := command(e.context(viewerUser), "tail", "-o", "json", "--count", "1", "--interval", "50ms")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		// The records quarantined so far (the "not detected" event) are old:
		// tail starts with new ones once it says it follows.
		line, err := bufio.NewReader(stderr).ReadString('\n')
		if err != nil || !strings.Contains(line, "following QUARANTINE") {
			t.Fatalf("tail did not start: %q %v", line, err)
		}
		secret := "PATIENT-SECRET-4711"
		e.ok(t, "publish", "--subject", "events.pharmacy.dispense", writeFile(t, dir, "broken.json", []byte(`{"patient":"`+secret+`",`)))
		out, err := io.ReadAll(stdout)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("tail: %v\n%s", err, out)
		}
		var rec output.TailRecord
		if err := json.Unmarshal(out, &rec); err != nil {
			t.Fatalf("tail line: %v: %s", err, out)
		}
		if rec.Kind != string(record.KindQuarantined) || rec.Code != "MALFORMED_JSON" || rec.Domain != "pharmacy" || rec.Class != string(record.ClassValidation) ||
			rec.Seq == 0 || len(rec.Hash) != 64 || rec.DLQID == "" {
			t.Errorf("tail record: %+v", rec)
		}
		if strings.Contains(string(out), secret) {
			t.Errorf("tail printed payload bytes: %s", out)
		}
	})
}

// TestTriage checks ls, groups, show, verify and reconcile: table output
// against golden files, JSON decoded into the shared/api types.
func TestTriage(t *testing.T) {
	e := startStack(t, stackOptions{})
	dir := t.TempDir()
	// Three failures, one at a time so that the order is stable.
	inputs := []struct {
		args []string
		code string
	}{
		{[]string{"--subject", "events.pharmacy.dispense", writeFile(t, dir, "broken.json", []byte(`{"transaction_id": "TX-1",`))}, "MALFORMED_JSON"},
		{[]string{testdata(t, "pharmacy/invalid/INVALID_NDC--letter-in-product-code.json")}, "INVALID_NDC"},
		{[]string{testdata(t, "fsma/invalid/INVALID_GLN--bad-check-digit.json")}, "INVALID_GLN"},
	}
	for i, in := range inputs {
		e.ok(t, append([]string{"publish"}, in.args...)...)
		e.waitQuarantined(t, api.ListRequest{}, i+1)
	}

	t.Run("ls", func(t *testing.T) {
		golden(t, "ls", normalize(e.ok(t, "ls").stdout, false))
		var rep api.ListReply
		e.jsonOf(t, &rep, "ls")
		if rep.Total != 3 || len(rep.Items) != 3 {
			t.Fatalf("ls: %+v", rep)
		}
		for i, it := range rep.Items { // newest first
			if want := inputs[len(inputs)-1-i].code; it.ErrorCode != want || it.Status != string(record.StatusOpen) {
				t.Errorf("item %d: %+v, want code %s", i, it, want)
			}
		}
		e.jsonOf(t, &rep, "ls", "--domain", "pharmacy", "--code", "INVALID_NDC")
		if rep.Total != 1 || rep.Items[0].ErrorCode != "INVALID_NDC" {
			t.Errorf("filtered ls: %+v", rep)
		}
		e.jsonOf(t, &rep, "ls", "--limit", "1", "--all")
		if len(rep.Items) != 3 || rep.NextCursor != "" {
			t.Errorf("ls --all over pages of 1: %d items, cursor %q", len(rep.Items), rep.NextCursor)
		}
		if out := e.ok(t, "ls", "--limit", "2").stdout; !strings.Contains(out, "2 of 3") || !strings.Contains(out, "--cursor '") {
			t.Errorf("paged ls: %s", out)
		}
	})

	t.Run("groups", func(t *testing.T) {
		golden(t, "groups", normalize(e.ok(t, "groups", "--parties").stdout, true))
		var rep api.GroupsReply
		e.jsonOf(t, &rep, "groups")
		if len(rep.Groups) != 3 {
			t.Fatalf("groups: %+v", rep)
		}
		for _, g := range rep.Groups {
			if g.Open != 1 || g.Total != 1 || len(g.Samples) != 1 {
				t.Errorf("group %+v", g)
			}
		}
	})

	var ndc api.ListReply
	e.jsonOf(t, &ndc, "ls", "--code", "INVALID_NDC")
	id := ndc.Items[0].DLQID

	t.Run("show", func(t *testing.T) {
		golden(t, "show", normalize(e.ok(t, "show", id).stdout, false))
		var s output.Show
		e.jsonOf(t, &s, "show", id)
		if s.State.DLQID != id || s.State.ErrorCode != "INVALID_NDC" || len(s.Records) != 1 || s.State.Payload != nil {
			t.Errorf("show: %+v", s)
		}
		const value = "00406-05I2-01" // the offending NDC, in the payload only
		raw := readFile(t, testdata(t, "pharmacy/invalid/INVALID_NDC--letter-in-product-code.json"))
		if !strings.Contains(string(raw), value) {
			t.Fatalf("fixture changed: %s", raw)
		}
		if out := e.ok(t, "show", id).stdout; strings.Contains(out, value) {
			t.Errorf("show printed the payload without --payload:\n%s", out)
		}
		if out := e.ok(t, "show", id, "--payload", "--reason", "triage test").stdout; !strings.Contains(out, value) {
			t.Errorf("show --payload lacks the payload:\n%s", out)
		}
		// Payloads need a role that reads them: a viewer is refused.
		r0 := dlqctl(t, e.context(viewerUser), "", "-o", "json", "show", id, "--payload", "--reason", "triage test")
		if r0.code != 1 || !strings.Contains(r0.stderr, `"code":"FORBIDDEN"`) || strings.Contains(r0.stdout+r0.stderr, value) {
			t.Errorf("show --payload as a viewer: %s", r0)
		}
		if out := e.okAs(t, viewerUser, "show", id).stdout; strings.Contains(out, value) || !strings.Contains(out, id) {
			t.Errorf("show as a viewer:\n%s", out)
		}
		r := e.dlqctl(t, "", "show", "pharmacy_00000000000000000000000000000000")
		if r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") {
			t.Errorf("show of an unknown id: %s", r)
		}
		r = e.dlqctl(t, "", "-o", "json", "show", "pharmacy_00000000000000000000000000000000")
		var eb output.Error
		if err := json.Unmarshal([]byte(r.stderr), &eb); r.code != 1 || err != nil || eb.Error.Code != api.ErrNotFound || eb.Error.Message == "" {
			t.Errorf("show of an unknown id, JSON: %s (%v)", r, err)
		}
	})

	t.Run("verify", func(t *testing.T) {
		golden(t, "verify", e.ok(t, "verify").stdout)
		var rep api.VerifyReply
		e.jsonOf(t, &rep, "verify")
		if !rep.OK || rep.Records != 3 || rep.Chains != 3 {
			t.Errorf("verify: %+v", rep)
		}
	})

	t.Run("reconcile", func(t *testing.T) {
		golden(t, "reconcile", normalize(e.ok(t, "reconcile", "--grace", "0s").stdout, false))
		var rep api.ReconcileReply
		e.jsonOf(t, &rep, "reconcile", "--grace", "0s")
		if rep.Events != 3 || rep.Counts[api.ReconcileOpen] != 3 || rep.Counts[api.ReconcileUnaccounted] != 0 {
			t.Errorf("reconcile: %+v", rep)
		}
	})

	t.Run("credentials", func(t *testing.T) {
		// A context found by name in the nats CLI's context directory.
		xdg := t.TempDir()
		writeFile(t, xdg, "nats/context/view.json", readFile(t, e.context(viewerUser)))
		viewerPW := e.password(t, viewerUser)
		cases := []struct {
			name   string
			ctx    string   // NATS_CONTEXT ("" for none)
			env    []string // more environment
			args   []string
			code   int
			stderr string
		}{
			{name: "context file", ctx: e.context(viewerUser), args: []string{"verify"}},
			{name: "context by name", env: []string{"XDG_CONFIG_HOME=" + xdg}, args: []string{"--context", "view", "verify"}},
			{name: "user and password", args: []string{"-s", e.url, "--user", viewerUser, "--password", viewerPW, "verify"}},
			{name: "no credentials", args: []string{"-s", e.url, "verify"}, code: 1,
				stderr: "authorization violation: dlqctl needs credentials, e.g. --context data/contexts/amara.okafor.json"},
			{name: "no credentials json", args: []string{"-s", e.url, "-o", "json", "ls"}, code: 1,
				stderr: `{"error":{"code":"CONNECT","message":"connect: authorization violation: dlqctl needs credentials`},
			{name: "wrong password", args: []string{"-s", e.url, "--user", viewerUser, "--password", "wrong", "verify"}, code: 1,
				stderr: "authorization violation: dlqctl needs credentials"},
			{name: "flag beats context", ctx: e.context(viewerUser), args: []string{"--password", "wrong", "verify"}, code: 1,
				stderr: "authorization violation"},
			// The viewer's account imports no drain.start: refused by the
			// server at once, not after a timeout.
			{name: "role without the endpoint", ctx: e.context(viewerUser), args: []string{"-o", "json", "drain", "--dry-run"}, code: 1,
				stderr: `"code":"PERMISSION"`},
			// Another user's inbox prefix: the reply subscription is denied.
			{name: "foreign inbox prefix", ctx: e.context(viewerUser), args: []string{"--inbox-prefix", access.InboxPrefix(operatorUser), "-o", "json", "verify"}, code: 1,
				stderr: `"code":"PERMISSION"`},
			{name: "prefix from env", ctx: e.context(viewerUser), env: []string{"NATS_INBOX_PREFIX=" + access.InboxPrefix(viewerUser) + ".cli"}, args: []string{"verify"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				cmd := command(c.ctx, c.args...)
				cmd.Env = append(cmd.Env, c.env...)
				var out, errb strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &errb
				code := 0
				if err := cmd.Run(); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						t.Fatal(err)
					}
					code = ee.ExitCode()
				}
				if code != c.code || !strings.Contains(errb.String(), c.stderr) {
					t.Errorf("want exit %d and stderr containing %q; got exit %d\nstdout:\n%s\nstderr:\n%s", c.code, c.stderr, code, out.String(), errb.String())
				}
			})
		}
	})
}

// TestDrain runs an outage: events exhaust while the downstream is down,
// then drains replay them, followed with plain progress lines (a pipe) and
// with the progress bar (a pseudo-terminal).
func TestDrain(t *testing.T) {
	down := newDownstream(t)
	down.down.Store(true)
	e := startStack(t, stackOptions{downstream: down.URL})
	dir := t.TempDir()
	const n = 12
	for i := range n {
		doc := map[string]any{
			"transaction_id": fmt.Sprintf("TX-%06d", i), "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
			"lot": fmt.Sprintf("LOT%06d", i), "expiry": "2026-09-30", "quantity_delta": "-30", "unit": "EA",
			"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2025-03-14T15:42:10Z", "actor_id": "RPH-0412",
		}
		b, _ := json.Marshal(doc)
		writeFile(t, dir, fmt.Sprintf("events/%02d.json", i), b)
	}
	e.ok(t, "publish", dir+"/events")
	e.waitQuarantined(t, api.ListRequest{Class: string(record.ClassExhausted)}, n)
	down.down.Store(false)

	t.Run("dry run", func(t *testing.T) {
		// The default guard's canary picks follow the quarantine's order,
		// which concurrent writers vary: the golden plan is unguarded.
		golden(t, "drain-plan", e.ok(t, "drain", "--domain", "pharmacy", "--dry-run", "--no-guard").stdout)
		if out := e.ok(t, "drain", "--domain", "pharmacy", "--dry-run").stdout; !regexp.MustCompile(`GUARD +canary of 10, pause above 10% re-failures over 100 outcomes \(the default\)\n`).MatchString(out) {
			t.Errorf("default plan shows no default guard:\n%s", out)
		}
		var rep api.DrainStartReply
		e.jsonOf(t, &rep, "drain", "--domain", "pharmacy", "--dry-run")
		if rep.Plan == nil || rep.Plan.Selected != n || rep.Plan.ByCode["DOWNSTREAM_UNAVAILABLE"] != n || rep.DrainID != "" {
			t.Errorf("plan: %+v %+v", rep, rep.Plan)
		}
		e.jsonOf(t, &rep, "drain", "--domain", "pharmacy", "--dry-run", "--canary", "3")
		if rep.Plan == nil || len(rep.Plan.Canary) != 3 || rep.Plan.Canary[0].Code != "DOWNSTREAM_UNAVAILABLE" {
			t.Errorf("canary plan: %+v", rep.Plan)
		}
		if out := e.ok(t, "drain", "--domain", "pharmacy", "--dry-run", "--canary", "3").stdout; !strings.Contains(out, "CANARY") ||
			!strings.Contains(out, rep.Plan.Canary[0].DLQID) {
			t.Errorf("canary plan:\n%s", out)
		}
	})

	lineRe := regexp.MustCompile(`^drain-\S+ (selecting|running|completed) \d+/\d+ \d+% \d+\.\d/s replayed=\d+ skipped=\d+ failed=\d+ poisoned=\d+( held=\d+)?( pending=\d+)?( errors=\d+)? eta \S+$`)
	t.Run("plain progress", func(t *testing.T) {
		// --actor is accepted and ignored: the drain is the operator's.
		r := e.ok(t, "drain", "--domain", "pharmacy", "--limit", "6", "--rate", "20", "--interval", "50ms", "--reason", "downstream restored",
			"--actor", "mallory")
		if strings.Contains(r.stdout, "\r") {
			t.Errorf("plain progress has carriage returns: %q", r.stdout)
		}
		var progress []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "drain-") {
				if !lineRe.MatchString(l) {
					t.Errorf("progress line %q", l)
				}
				progress = append(progress, l)
			}
		}
		if len(progress) < 2 {
			t.Fatalf("want several progress lines:\n%s", r.stdout)
		}
		if last := progress[len(progress)-1]; !strings.Contains(last, " completed 6/6 100% ") || !strings.Contains(last, "replayed=6 ") {
			t.Errorf("last progress line %q", last)
		}
		if !regexp.MustCompile(`STARTED BY +`+regexp.QuoteMeta(operatorUser)+`\n`).MatchString(r.stdout) || strings.Contains(r.stdout, "mallory") {
			t.Errorf("final state names the wrong actor:\n%s", r.stdout)
		}
		if !regexp.MustCompile(`STATUS +completed\n`).MatchString(r.stdout) || !strings.Contains(r.stdout, "6 committed (6 published)") {
			t.Errorf("final state:\n%s", r.stdout)
		}
		// The outcome says what the completed drain achieved.
		if !regexp.MustCompile(`OUTCOME +completed_all_resolved\n`).MatchString(r.stdout) {
			t.Errorf("final state has no outcome:\n%s", r.stdout)
		}
	})

	t.Run("progress bar in a terminal", func(t *testing.T) {
		cmd := command(e.context(operatorUser), "drain", "--domain", "pharmacy", "--rate", "20", "--interval", "50ms")
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out, _ := io.ReadAll(f) // EIO once the process exits and the terminal closes
		if err := cmd.Wait(); err != nil {
			t.Fatalf("drain in a terminal: %v\n%q", err, out)
		}
		s := string(out)
		for _, want := range []string{"\r", "█", "100%", "(6/6", "replayed 6 · skipped 0 · failed 0 · poisoned 0", "ev/s"} {
			if !strings.Contains(s, want) {
				t.Errorf("terminal output lacks %q:\n%q", want, s)
			}
		}
		if lineRe.MatchString(s) {
			t.Errorf("plain progress lines in a terminal")
		}
	})

	var drains api.DrainListReply
	e.jsonOf(t, &drains, "drain", "ls")
	if len(drains.Drains) != 2 {
		t.Fatalf("drain ls: %+v", drains)
	}
	for _, d := range drains.Drains {
		// Recorded under the authenticated caller, whatever --actor said.
		if d.Status != api.DrainCompleted || d.Committed != 6 || d.StartedBy != operatorUser || d.Request.Actor != operatorUser {
			t.Errorf("drain %+v", d)
		}
	}
	first := drains.Drains[0].DrainID

	t.Run("status, cancel, ls", func(t *testing.T) {
		var st api.DrainState
		e.jsonOf(t, &st, "drain", "status", first)
		if st.DrainID != first || st.Status != api.DrainCompleted || st.Request.Reason != "downstream restored" {
			t.Errorf("status: %+v", st)
		}
		r := e.dlqctl(t, "", "drain", "cancel", first)
		if r.code != 1 || !strings.Contains(r.stderr, "drain.cancel refused: INVALID_TRANSITION") {
			t.Errorf("cancel of a completed drain: %s", r)
		}
		r = e.dlqctl(t, "", "drain", "resume", first, "--reason", "again")
		if r.code != 1 || !strings.Contains(r.stderr, "drain.resume refused: INVALID_TRANSITION") {
			t.Errorf("resume of a completed drain: %s", r)
		}
		out := e.ok(t, "drain", "ls").stdout
		if !strings.Contains(out, first) || !strings.Contains(out, "2 drains") || strings.Contains(out, "mallory") {
			t.Errorf("drain ls:\n%s", out)
		}
		r = e.dlqctl(t, "", "drain", "status", "drain-nope")
		if r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") {
			t.Errorf("status of an unknown drain: %s", r)
		}
	})

	t.Run("detach then follow", func(t *testing.T) {
		var rep api.DrainStartReply
		e.jsonOf(t, &rep, "drain", "--domain", "fsma", "--detach")
		if rep.DrainID == "" {
			t.Fatalf("detach: %+v", rep)
		}
		r := e.ok(t, "drain", "status", rep.DrainID, "--follow", "--progress", "plain", "--interval", "50ms")
		if !strings.Contains(r.stdout, rep.DrainID+" completed 0/0 0%") {
			t.Errorf("follow:\n%s", r.stdout)
		}
	})

	t.Run("reconcile", func(t *testing.T) {
		var rep api.ReconcileReply
		e.jsonOf(t, &rep, "reconcile", "--grace", "0s")
		if rep.Counts[api.ReconcileUnaccounted] != 0 || rep.Counts[api.ReconcileResolved] != n || rep.Counts[api.ReconcileReplay] != n {
			t.Errorf("reconcile after the drains: %+v", rep.Counts)
		}
	})
}

// TestRedrive corrects, redrives, poisons and releases one event; the
// release and the identity-changing correction wait for a second person
// (the default approval policy), whom `dlqctl approval approve` signs as.
func TestRedrive(t *testing.T) {
	e := startStack(t, stackOptions{redriveCap: 2})
	invalid := testdata(t, "pharmacy/invalid/INVALID_NDC--letter-in-product-code.json")
	valid := testdata(t, "pharmacy/valid/dispense-schedule-ii.json")
	e.ok(t, "publish", invalid)
	id := e.waitQuarantined(t, api.ListRequest{}, 1).Items[0].DLQID
	pwFile := writeFile(t, t.TempDir(), "approver.pw", []byte(e.password(t, approverUser)+"\n"))
	// This test corrects a Schedule II event at once: the identity rule,
	// not the controlled-substance default, which sends it to a second
	// person.
	e.jsonOfAs(t, policyUser, &api.PolicyReply{}, "policy", "set", "--corrections", "identity", "--reason", "this test corrects a Schedule II event at once")

	steps := []struct {
		name    string
		args    []string
		code    int
		outcome string // RedriveReply.Outcome, or AppendReply.Status for release
		stderr  string
		// pending: the step asks for an action that waits for approval;
		// approve: the step is the approver signing the last one.
		pending, approve bool
	}{
		{name: "validation without correction", args: []string{"redrive", id}, code: 1, stderr: `"code":"NOT_REDRIVABLE"`},
		{name: "still invalid correction", args: []string{"redrive", id, "--payload", invalid, "--reason", "try again"}, code: 1, outcome: api.OutcomeReplayFailed},
		{name: "poisoned at the cap", args: []string{"redrive", id, "--payload", invalid, "--reason", "once more"}, code: 1, outcome: api.OutcomePoisoned},
		{name: "poison is not redriven", args: []string{"redrive", id}, code: 1, stderr: `"code":"POISONED"`},
		{name: "release waits for approval", args: []string{"release", id, "--reason", "supplier confirmed the NDC", "--actor", "qa-lead"}, code: 1, pending: true},
		{name: "release approved", approve: true, outcome: "released"},
		{name: "release twice", args: []string{"release", id, "--reason", "again"}, code: 1, stderr: `"code":"INVALID_TRANSITION"`},
		{name: "identity-changing correction waits for approval", args: []string{"redrive", id, "--payload", valid, "--reason", "NDC fixed from the invoice"}, code: 1, pending: true},
		{name: "correction approved", approve: true, outcome: api.OutcomeReplayed},
	}
	var approvalID string
	// answered: every approval a step was answered with.
	answered := map[string]bool{}
	pendingIn := regexp.MustCompile(`pending approval (appr-[0-9A-Za-z-]+)`)
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.approve {
				var rep api.ApprovalReply
				e.jsonOfAs(t, approverUser, &rep, "approval", "approve", approvalID, "--meaning", "reviewed against the invoice", "--password-file", pwFile)
				if rep.Approval.Status != api.ApprovalExecuted || rep.Approval.Outcome != s.outcome || rep.Approval.Decider != approverUser || rep.Approval.Requester != operatorUser {
					t.Errorf("approved %+v, want executed %s", rep.Approval, s.outcome)
				}
				return
			}
			r := e.dlqctl(t, "", append([]string{"-o", "json"}, s.args...)...)
			if r.code != s.code || !strings.Contains(r.stderr, s.stderr) {
				t.Fatalf("want exit %d, stderr %q: %s", s.code, s.stderr, r)
			}
			if s.pending {
				var oe output.Error
				if err := json.Unmarshal([]byte(r.stderr), &oe); err != nil || oe.Error.Code != api.ErrApprovalRequired || oe.Error.Approval == nil {
					t.Fatalf("want %s with the pending approval: %s", api.ErrApprovalRequired, r)
				}
				approvalID = oe.Error.Approval.ID
				answered[approvalID] = true
				tr := e.dlqctl(t, "", s.args...)
				m := pendingIn.FindStringSubmatch(tr.stderr)
				if m == nil {
					t.Errorf("the table output does not name the pending approval: %s", tr)
					return
				}
				// The same approval, unless the chain moved between the
				// two asks (a record of the step before landing late):
				// then the request is another one, rightly.
				answered[m[1]] = true
				return
			}
			if s.outcome == "" {
				return
			}
			var got struct {
				Outcome string `json:"outcome"`
				Status  string `json:"status"`
				Actor   string `json:"actor"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v: %s", err, r)
			}
			if got.Outcome != s.outcome && !(s.args[0] == "release" && got.Status == s.outcome) {
				t.Errorf("outcome %+v, want %s", got, s.outcome)
			}
			// The records name the authenticated operator, never --actor.
			if got.Actor != operatorUser {
				t.Errorf("recorded actor %q, want operator", got.Actor)
			}
		})
	}

	t.Run("approval list and show", func(t *testing.T) {
		var list api.ApprovalListReply
		e.jsonOfAs(t, viewerUser, &list, "approval", "list")
		// Each pending step asked twice (JSON, table): the second answers
		// the first's pending approval (2 in all), and the list holds
		// exactly the approvals the steps were answered with.
		listed := map[string]bool{}
		for _, a := range list.Approvals {
			listed[a.ID] = true
			if !answered[a.ID] {
				t.Errorf("approval list holds %s (%s), which no step was answered with", a.ID, a.Action)
			}
		}
		if len(listed) != len(answered) || len(answered) < 2 {
			t.Errorf("approval list: %d approvals, the steps were answered with %d: %v", len(listed), len(answered), answered)
		}
		out := e.okAs(t, approverUser, "approval", "show", approvalID).stdout
		if !strings.Contains(out, "IDENTITY DIFF") || !strings.Contains(out, "ordering_key") || !strings.Contains(out, "MEANING") {
			t.Errorf("approval show as the approver:\n%s", out)
		}
		if out := e.okAs(t, viewerUser, "approval", "show", approvalID).stdout; strings.Contains(out, "IDENTITY DIFF") || strings.Contains(out, "\nREQUEST\n") {
			t.Errorf("approval show as a viewer shows values:\n%s", out)
		}
		if r := dlqctl(t, e.context(approverUser), "", "approval", "approve", approvalID, "--password-file", pwFile); r.code != 2 || !strings.Contains(r.stderr, "--meaning") {
			t.Errorf("approve without --meaning: %s", r)
		}
		if r := dlqctl(t, e.context(approverUser), "", "approval", "approve", approvalID, "--meaning", "m"); r.code != 2 || !strings.Contains(r.stderr, "--password-file") {
			t.Errorf("approve without a terminal or --password-file: %s", r)
		}
	})

	t.Run("policy", func(t *testing.T) {
		var rep api.PolicyReply
		e.jsonOfAs(t, policyUser, &rep, "policy", "set", "--drain-max-selected", "10", "--reason", "test")
		if rep.Policy.DrainMaxSelected != 10 || !rep.Policy.ReleasePoison || rep.SetBy != policyUser {
			t.Errorf("policy set %+v", rep)
		}
		if r := dlqctl(t, e.context(operatorUser), "", "policy", "set", "--drain-max-selected", "0", "--reason", "mine"); r.code != 1 {
			t.Errorf("policy set as the operator: %s", r)
		}
		if out := e.okAs(t, viewerUser, "policy", "show").stdout; !regexp.MustCompile(`DRAIN MAX SELECTED +10 `).MatchString(out) {
			t.Errorf("policy show:\n%s", out)
		}
	})

	t.Run("chain", func(t *testing.T) {
		var s output.Show
		e.jsonOf(t, &s, "show", id, "--payload", "--reason", "redrive test")
		var kinds []string
		for _, cr := range s.Records {
			var r record.Record
			if err := json.Unmarshal(cr.Record, &r); err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, string(r.Kind))
		}
		want := []string{"quarantined", "corrected", "redrive_requested", "replay_failed", "corrected", "redrive_requested",
			"poisoned", "approved", "released", "approved", "corrected", "redrive_requested", "replayed"}
		if strings.Join(kinds, ",") != strings.Join(want, ",") {
			t.Errorf("chain kinds %v, want %v", kinds, want)
		}
		if s.State.Status != record.StatusResolved || !s.State.Corrected {
			t.Errorf("state %+v", s.State)
		}
		// The correction is stored byte for byte (indentation included).
		got, err := s.State.Payload.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(readFile(t, valid))); string(got) != want {
			t.Errorf("stored correction differs from the file:\n%s\nwant\n%s", got, want)
		}
		golden(t, "show-redriven", normalize(e.ok(t, "show", id).stdout, false))
	})

	t.Run("tail replays the chain without payloads", func(t *testing.T) {
		r := e.okAs(t, viewerUser, "tail", "--all", "--count", "13", "-o", "json")
		sc := bufio.NewScanner(strings.NewReader(r.stdout))
		n := 0
		for sc.Scan() {
			var rec output.TailRecord
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.DLQID != id || rec.Index != n {
				t.Errorf("line %d: %+v %v", n, rec, err)
			}
			switch record.Kind(rec.Kind) {
			case record.KindCorrected, record.KindReleased, record.KindRedriveRequested:
				if rec.Actor != operatorUser {
					t.Errorf("line %d: %s by %q, want operator", n, rec.Kind, rec.Actor)
				}
			}
			n++
		}
		if n != 13 || strings.Contains(r.stdout, "transaction_id") || strings.Contains(r.stdout, "INV-2025-0181") {
			t.Errorf("tail --all: %d lines:\n%s", n, r.stdout)
		}
		table := e.okAs(t, viewerUser, "tail", "--all", "--count", "1").stdout
		if !regexp.MustCompile(`^\S+Z seq=1 quarantined +` + id + ` #0 domain=pharmacy class=validation code=INVALID_NDC redrives=0 hash=[0-9a-f]{12}\n$`).MatchString(table) {
			t.Errorf("tail line %q", table)
		}
	})
}

func publishResults(tb testing.TB, stdout string) []output.PublishResult {
	tb.Helper()
	var out []output.PublishResult
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var r output.PublishResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatalf("publish line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func compact(tb testing.TB, b []byte) string {
	tb.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// batchIDs returns the distinct Nats-Batch-Id headers EVENTS stored with
// the published events ("" for an event published on its own), read as the
// administrator.
func batchIDs(tb testing.TB, e *env, res []output.PublishResult) []string {
	tb.Helper()
	nc, err := e.s.ConnectAs(access.Admin, nats.Timeout(30*time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := js.Stream(tb.Context(), subjects.EventsStream)
	if err != nil {
		tb.Fatal(err)
	}
	seen := map[string]bool{}
	var ids []string
	for _, r := range res {
		m, err := st.GetMsg(tb.Context(), r.Seq)
		if err != nil {
			tb.Fatal(err)
		}
		if id := m.Header.Get("Nats-Batch-Id"); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}
