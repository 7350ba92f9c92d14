package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/gate"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, in string
		want     time.Time
		bad      bool
	}{
		{name: "empty", in: ""},
		{name: "rfc3339", in: "2025-02-28T10:00:00Z", want: time.Date(2025, 2, 28, 10, 0, 0, 0, time.UTC)},
		{name: "offset to utc", in: "2025-02-28T10:00:00-05:00", want: time.Date(2025, 2, 28, 15, 0, 0, 0, time.UTC)},
		{name: "date", in: "2025-02-28", want: time.Date(2025, 2, 28, 0, 0, 0, 0, time.UTC)},
		{name: "duration", in: "90m", want: now.Add(-90 * time.Minute)},
		{name: "days", in: "7d", want: now.Add(-7 * 24 * time.Hour)},
		{name: "negative", in: "-1h", bad: true},
		{name: "word", in: "yesterday", bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseTime(c.in, now)
			if (err != nil) != c.bad || !got.Equal(c.want) {
				t.Errorf("parseTime(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.bad)
			}
		})
	}
}

// TestRedriveBody checks that a corrected payload is spliced in byte for
// byte and that the body decodes into the request the endpoint expects.
func TestRedriveBody(t *testing.T) {
	payload := []byte("{\n  \"ndc\": \"00406-0512-01\",\n  \"note\": \"<a&b>\"\n}")
	req := api.RedriveRequest{DLQID: "pharmacy_x", Actor: "ops", Reason: "fixed"}
	b, err := redriveBody(req, payload)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var got api.RedriveRequest
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if string(got.Payload) != string(payload) || got.DLQID != "pharmacy_x" || got.Actor != "ops" || got.Reason != "fixed" {
		t.Errorf("decoded %+v (payload %q)", got, got.Payload)
	}
}

func TestRoute(t *testing.T) {
	checkers := map[string]gate.Checker{}
	for _, c := range gate.Checkers() {
		checkers[c.Domain()] = c
	}
	cases := []struct {
		name    string
		doc     string
		flags   publishFlags
		subject string
		undet   bool
	}{
		{name: "pharmacy", doc: `{"event_type":"Dispense"}`, subject: "events.pharmacy.dispense"},
		{name: "dscsa urn", doc: `{"bizStep":"urn:epcglobal:cbv:bizstep:shipping"}`, subject: "events.dscsa.shipping"},
		{name: "fsma", doc: `{"cte_type":"initial_packing"}`, subject: "events.fsma.initial_packing"},
		{name: "nothing", doc: `{"x":1}`, undet: true},
		{name: "two domains", doc: `{"event_type":"dispense","cte_type":"shipping"}`, undet: true},
		{name: "two domains resolved", doc: `{"event_type":"dispense","cte_type":"shipping"}`, flags: publishFlags{domain: "fsma"}, subject: "events.fsma.shipping"},
		{name: "malformed", doc: `{"x":`, undet: true},
		{name: "fixed subject", doc: `{"x":`, flags: publishFlags{subject: "events.pharmacy.waste"}, subject: "events.pharmacy.waste"},
		{name: "domain and type", doc: `nope`, flags: publishFlags{domain: "dscsa", eventType: "receiving"}, subject: "events.dscsa.receiving"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			subject, _, _, err := route([]byte(c.doc), c.flags, checkers)
			if c.undet != errors.Is(err, ErrUndetectable) || subject != c.subject {
				t.Errorf("route = %q, %v; want %q (undetectable %v)", subject, err, c.subject, c.undet)
			}
		})
	}
}

func TestProgressLine(t *testing.T) {
	st := api.DrainState{DrainID: "drain-1", Status: api.DrainRunning, Remaining: 50, CurrentRate: 25,
		DrainCounts: api.DrainCounts{Selected: 100, Replayed: 52, Committed: 45, SkippedDuplicate: 2, ReplayFailed: 2, Poisoned: 1, Held: 0}}
	want := "drain-1 running 50/100 50% 25.0/s replayed=45 skipped=2 failed=2 poisoned=1 eta 2s"
	if got := progressLine(st); got != want {
		t.Errorf("progressLine = %q, want %q", got, want)
	}
}

// TestExecuteContext runs commands in-process, as a demo would.
func TestExecuteContext(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		status int
		stdout string
		stderr string
	}{
		{"help", []string{"--help"}, ExitOK, "Exit status: 0 ok, 1 the operation failed, 2 usage error.", ""},
		{"usage", []string{"ls", "-o", "xml"}, ExitUsage, "", "--output must be table or json"},
		{"no server", []string{"-s", "nats://127.0.0.1:1", "-o", "json", "groups"}, ExitFailed, "", `{"error":{"code":"CONNECT"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := ExecuteContext(t.Context(), c.args, IO{Out: &out, Err: &errb})
			if got != c.status || !bytes.Contains(out.Bytes(), []byte(c.stdout)) || !bytes.Contains(errb.Bytes(), []byte(c.stderr)) {
				t.Errorf("status %d, stdout %q, stderr %q", got, out.String(), errb.String())
			}
		})
	}
}

// TestCSVCell: a CSV cell that a spreadsheet would run as a formula is
// made inert; numbers, negative ones included, and other text are kept.
func TestCSVCell(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`=HYPERLINK("http://x","y")`, `'=HYPERLINK("http://x","y")`},
		{"+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1:A2)", "'@SUM(A1:A2)"},
		{"\t=1", "'\t=1"},
		{"-30", "-30"},
		{"+4.5", "+4.5"},
		{"SUP-00417", "SUP-00417"},
		{"", ""},
	} {
		if got := csvCell(tc.in); got != tc.want {
			t.Errorf("csvCell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestWriteCSVIsInert: writeCSV writes a formula-like payload value inert.
func TestWriteCSVIsInert(t *testing.T) {
	var b strings.Builder
	if err := writeCSV(&b, []string{"product_description"}, [][]string{{`=HYPERLINK("http://x","y")`}}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "product_description\n\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"\n"; got != want {
		t.Fatalf("writeCSV wrote %q, want %q", got, want)
	}
}
