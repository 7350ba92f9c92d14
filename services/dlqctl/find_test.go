package main_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
)

// TestFind (end to end): events of the three domains fail validation
// through the real stack (validator, quarantiner, auditor), one carrying a
// lot with & < > quotes and non-ASCII text; `dlqctl find` finds each by
// the identifiers a recall or an investigation starts from, pasted in the
// forms the trade writes them, as the viewer and the operator, and prints
// the identifiers listings show and no other payload value.
func TestFind(t *testing.T) {
	e := startStack(t, stackOptions{})
	dir := t.TempDir()
	const (
		lot      = `A1&B<2> "Müller"`
		supplier = "Müller & Söhne <Großhandel>"
		tlc      = "00860001000030-RL250312A/Pharmacie Saint-Étienne"
	)
	type event struct {
		name, file string
		set        map[string]any
	}
	events := []event{
		{"pharmacy ndc 4-4-2", "pharmacy/invalid/INVALID_QUANTITY--thousands-separator.json",
			map[string]any{"ndc": "0409-4888-20", "lot": lot, "registrant_dea": "BW4829137", "transaction_id": "INV-2026-SECRET <1>"}},
		{"pharmacy other ndc same lot", "pharmacy/invalid/INVALID_QUANTITY--thousands-separator.json",
			map[string]any{"ndc": "55150-123-10", "lot": lot, "registrant_dea": "BW4829137", "transaction_id": "INV-2026-0002"}},
		{"dscsa", "dscsa/invalid/INVALID_LOCATION--not-a-gln-uri.json", nil},
		{"fsma", "fsma/invalid/INVALID_QUANTITY--zero.json",
			map[string]any{"supplier_id": supplier, "traceability_lot_code": tlc}},
	}
	for i, ev := range events {
		var doc map[string]any
		if err := json.Unmarshal(readFile(t, testdata(t, ev.file)), &doc); err != nil {
			t.Fatal(err)
		}
		for k, v := range ev.set {
			doc[k] = v
		}
		b, _ := json.Marshal(doc)
		e.ok(t, "publish", writeFile(t, dir, fmt.Sprintf("find-%d.json", i), b))
		e.waitQuarantined(t, api.ListRequest{}, i+1)
	}
	var all api.ListReply
	e.jsonOf(t, &all, "ls")
	idOf := map[string]string{} // event name → dlq id (ls is newest first)
	for i, it := range all.Items {
		idOf[events[len(events)-1-i].name] = it.DLQID
	}

	for _, tc := range []struct {
		name string
		args []string
		want []string // event names, newest first
	}{
		{"ndc + lot", []string{"--ndc", "0409-4888-20", "--lot", lot}, []string{"pharmacy ndc 4-4-2"}},
		{"ndc-11 plain", []string{"--ndc", "00409488820"}, []string{"pharmacy ndc 4-4-2"}},
		{"ndc 5-3-2 of the other", []string{"--ndc", "55150-123-10"}, []string{"pharmacy other ndc same lot"}},
		{"lot alone", []string{"--lot", lot}, []string{"pharmacy other ndc same lot", "pharmacy ndc 4-4-2"}},
		{"registrant + transaction id", []string{"--registrant", "bw4829137", "--transaction-id", "INV-2026-SECRET <1>"}, []string{"pharmacy ndc 4-4-2"}},
		{"transaction id alone", []string{"--transaction-id", "INV-2026-SECRET <1>"}, []string{"pharmacy ndc 4-4-2"}},
		{"gtin-14 + serial", []string{"--gtin", "00614141123452", "--serial", "10016550749981"}, []string{"dscsa"}},
		{"sgtin urn", []string{"--gtin", "urn:epc:id:sgtin:0614141.012345.10016550749981"}, []string{"dscsa"}},
		{"digital link with &", []string{"--gtin", "https://id.gs1.org/01/00614141123452/21/10016550749981?17=270101&10=A1"}, []string{"dscsa"}},
		{"tlc", []string{"--tlc", tlc}, []string{"fsma"}},
		{"supplier + lot as tlc", []string{"--supplier", supplier, "--lot", tlc}, []string{"fsma"}},
		{"open only", []string{"--lot", lot, "--state", "open", "--domain", "pharmacy"}, []string{"pharmacy other ndc same lot", "pharmacy ndc 4-4-2"}},
		{"nothing", []string{"--ndc", "0409-4888-21"}, nil},
		{"--id, a field by its name", []string{"--id", "ndc=0409-4888-20", "--id", "lot=" + lot}, []string{"pharmacy ndc 4-4-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, person := range []string{viewerUser, operatorUser} {
				var rep api.ListReply
				e.jsonOfAs(t, person, &rep, append([]string{"find"}, tc.args...)...)
				var got, want []string
				for _, it := range rep.Items {
					got = append(got, it.DLQID)
				}
				for _, n := range tc.want {
					want = append(want, idOf[n])
				}
				if !slices.Equal(got, want) || rep.Total != len(want) {
					t.Fatalf("as %s: got %v (total %d), want %v", person, got, rep.Total, want)
				}
			}
			out := e.ok(t, append([]string{"find"}, tc.args...)...).stdout
			if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2+len(tc.want) {
				t.Errorf("%d lines, want a header, %d rows and a count:\n%s", len(lines), len(tc.want), out)
			}
			// The transaction id is a listed identifier (records name
			// it); other payload values never show.
			for _, secret := range []string{"Romaine", "RPH-", "PO-778120"} {
				if strings.Contains(out, secret) {
					t.Errorf("the table shows the payload value %q:\n%s", secret, out)
				}
			}
		})
	}

	out := e.ok(t, "find", "--ndc", "0409-4888-20", "--lot", lot).stdout
	for _, want := range []string{"ndc11=00409488820", "lot=" + lot, "BW4829137", "open", "validation", "INVALID_QUANTITY"} {
		if !strings.Contains(out, want) {
			t.Errorf("find prints no %q:\n%s", want, out)
		}
	}
	out = e.ok(t, "find", "--gtin", "00614141123452").stdout
	if !strings.Contains(out, "gtin=00614141123452 serial=10016550749981") {
		t.Errorf("find --gtin:\n%s", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"ten plain digits", []string{"--ndc", "0409488820"}, "ambiguous"},
		{"bad dea", []string{"--registrant", "BW4829138"}, "registrant"},
		{"two domains", []string{"--ndc", "0409-4888-20", "--tlc", tlc}, "two domains"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			r := e.dlqctl(t, "", append([]string{"find"}, tc.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.msg) || !strings.Contains(r.stderr, "BAD_REQUEST") {
				t.Errorf("want a BAD_REQUEST naming %q: %s", tc.msg, r)
			}
		})
	}
}
