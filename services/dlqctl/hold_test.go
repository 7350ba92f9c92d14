package main_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// TestHold: an inspector places a hold on an event, every role lists it
// with the event it holds, an operator lifts it; the records name the
// authenticated people (under the default policy the lift first waits for
// approval; once the policy lets him, alone); a lift of a lifted hold
// exits 1 with its code.
func TestHold(t *testing.T) {
	e := startStack(t, stackOptions{})
	e.ok(t, "publish", testdata(t, "pharmacy/invalid/INVALID_NDC--letter-in-product-code.json"))
	id := e.waitQuarantined(t, api.ListRequest{}, 1).Items[0].DLQID

	var placed api.HoldReply
	r := e.okAs(t, access.DefaultPerson(access.RoleInspector), "-o", "json", "hold", "place", id, "--case", "CASE-1", "--reason", "subpoena")
	if err := json.Unmarshal([]byte(r.stdout), &placed); err != nil {
		t.Fatalf("%v: %s", err, r)
	}
	if placed.Hold.PlacedBy != access.DefaultPerson(access.RoleInspector) || !slices.Equal(placed.DLQIDs, []string{id}) {
		t.Fatalf("placed %+v holding %v", placed.Hold, placed.DLQIDs)
	}
	r = e.okAs(t, access.DefaultPerson(access.RoleViewer), "hold", "list")
	if !strings.Contains(r.stdout, placed.Hold.ID) || !strings.Contains(r.stdout, "CASE-1") || !strings.Contains(r.stdout, "event "+id) {
		t.Errorf("hold list: %s", r)
	}
	// A party hold matching no stored event asks for confirmation.
	nobody := "Müller & Söhne <Großhandel>"
	if r := dlqctl(t, e.context(access.DefaultPerson(access.RoleInspector)), "", "hold", "place", "--party", nobody, "--case", "CASE-3", "--reason", "subpoena"); r.code != 1 ||
		!strings.Contains(r.stderr, api.ErrHoldMatchesNothing) {
		t.Errorf("a hold matching nothing: %s", r)
	}
	e.okAs(t, access.DefaultPerson(access.RoleInspector), "hold", "place", "--party", nobody, "--case", "CASE-3", "--reason", "subpoena", "--confirm")
	if r := e.okAs(t, access.DefaultPerson(access.RoleViewer), "hold", "list"); !regexp.MustCompile(`CASE-3 +active +party .* 0 +` + regexp.QuoteMeta(access.DefaultPerson(access.RoleInspector))).MatchString(r.stdout) {
		t.Errorf("hold list: %s", r)
	}
	// Under the default policy the lift waits for a second person.
	if r := e.dlqctl(t, "", "hold", "lift", placed.Hold.ID, "--case", "CASE-1", "--reason", "case closed"); r.code == 0 || !strings.Contains(r.stderr, "pending approval appr-") {
		t.Errorf("lift under the default policy: %s", r)
	}
	e.okAs(t, access.DefaultPerson(access.RolePolicy), "policy", "set", "--hold-lift=false", "--reason", "counsel lifts alone")
	r = e.ok(t, "-o", "json", "hold", "lift", placed.Hold.ID, "--case", "CASE-1", "--reason", "case closed")
	var lifted api.HoldReply
	if err := json.Unmarshal([]byte(r.stdout), &lifted); err != nil {
		t.Fatalf("%v: %s", err, r)
	}
	if lifted.Hold.LiftedBy != access.DefaultPerson(access.RoleOperator) || lifted.Hold.Status != api.HoldLifted {
		t.Errorf("lifted %+v", lifted.Hold)
	}
	if r := e.dlqctl(t, "", "hold", "lift", placed.Hold.ID, "--case", "CASE-1", "--reason", "again"); r.code != 1 || !strings.Contains(r.stderr, api.ErrNotPlaced) {
		t.Errorf("second lift: %s", r)
	}
	if r := e.dlqctl(t, "", "hold", "place", id, "--case", "CASE-2"); r.code == 0 || !strings.Contains(r.stderr, api.ErrBadRequest) {
		t.Errorf("a hold without reason: %s", r)
	}
	// --since and --until read the times people type, as dlqctl ls and
	// drain do (package when): a duration ago, a date.
	inspector := access.DefaultPerson(access.RoleInspector)
	r = e.okAs(t, inspector, "-o", "json", "hold", "place", "--domain", "pharmacy", "--since", "7d", "--until", "2099-01-01",
		"--case", "CASE-4 Pharmacie Saint-Étienne", "--reason", "FDA inspection", "--confirm")
	var filtered api.HoldReply
	if err := json.Unmarshal([]byte(r.stdout), &filtered); err != nil {
		t.Fatalf("%v: %s", err, r)
	}
	if f := filtered.Hold.Target.Filter; f == nil || f.Since == nil || time.Since(*f.Since) < 7*24*time.Hour ||
		f.Until == nil || !f.Until.Equal(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("filter hold placed with --since 7d --until 2099-01-01: %+v", filtered.Hold.Target)
	}
	if r := dlqctl(t, e.context(inspector), "", "hold", "place", "--domain", "pharmacy", "--since", "yesterday",
		"--case", "CASE-5", "--reason", "x"); r.code == 0 || !strings.Contains(r.stderr, "not a time") {
		t.Errorf("--since yesterday: %s", r)
	}

	// A hold by identifiers (find's flags) and a hold of several events:
	// one hold each, or a refusal naming why, nothing held.
	for _, tc := range []struct {
		name string
		args []string
		code string // "": placed
		want []string
	}{
		{"registrant and transaction id", []string{"--registrant", "bw4829137", "--transaction-id", "INV-2025-0209"}, "", []string{id}},
		{"--id name=value", []string{"--domain", "pharmacy", "--id", "transaction_id=INV-2025-0209"}, "", []string{id}},
		{"a tlc of the pharmacy domain", []string{"--domain", "pharmacy", "--tlc", "RL-2026 <Müller & Söhne>"}, api.ErrBadRequest, nil},
		{"a bad ndc", []string{"--ndc", "0409-48B8-20"}, api.ErrBadRequest, nil},
		{"two events, one unknown", []string{id, "pharmacy_00000000000000000000000000000000"}, api.ErrNotFound, nil},
		{"the same event twice", []string{id, id}, api.ErrBadRequest, nil},
	} {
		t.Run("place/"+tc.name, func(t *testing.T) {
			args := append([]string{"-o", "json", "hold", "place", "--case", "CASE-6 " + tc.name, "--reason", "recall <Müller & Söhne>"}, tc.args...)
			r := dlqctl(t, e.context(inspector), "", args...)
			if tc.code != "" {
				if r.code != 1 || !strings.Contains(r.stderr, tc.code) {
					t.Fatalf("want %s: %s", tc.code, r)
				}
				var l api.HoldListReply
				e.jsonOf(t, &l, "hold", "list")
				for _, h := range l.Holds {
					if h.Hold.CaseID == "CASE-6 "+tc.name {
						t.Errorf("refused, yet hold %s placed", h.Hold.ID)
					}
				}
				return
			}
			var rep api.HoldReply
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
				t.Fatalf("%s", r)
			}
			if got := slices.Concat(rep.DLQIDs, rep.Pending); !slices.Equal(got, tc.want) {
				t.Errorf("the hold holds %v, want %v", got, tc.want)
			}
		})
	}
}
