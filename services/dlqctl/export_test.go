package main_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/fsma"
)

// TestExport: on the whole stack, an inspector's export as JSONL verifies
// offline with the auditor's public key and a copy with one byte changed
// is refused; CSV and XLSX hold one row per record with the FSMA 204 KDE
// columns of the CTEs present; --lot keeps one traceability lot; a viewer
// may not export; every export is in the access audit with its reason.
func TestExport(t *testing.T) {
	e := startStack(t, stackOptions{})
	dir := t.TempDir()
	inputs := []string{
		testdata(t, "fsma/invalid/INVALID_GLN--bad-check-digit.json"),                  // shipping
		testdata(t, "fsma/invalid/MISSING_KDE--cooling-without-harvest-location.json"), // cooling
		testdata(t, "pharmacy/invalid/INVALID_NDC--letter-in-product-code.json"),
	}
	for i, in := range inputs {
		e.ok(t, "publish", in)
		e.waitQuarantined(t, api.ListRequest{}, i+1)
	}
	pub, err := auditor.SigningPublicKey(filepath.Join(e.anchorDir, stack.SigningKeyFile))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("jsonl verifies offline", func(t *testing.T) {
		out := filepath.Join(dir, "all.jsonl")
		var res struct {
			Chains, Records int
		}
		e.jsonOf(t, &res, "export", "--reason", "DEA inspection 2026-11", "--out", out, "--page", "1")
		if res.Chains != 3 || res.Records != 3 {
			t.Fatalf("export: %+v", res)
		}
		if r := e.ok(t, "verify-export", out, "--pubkey", pub); !strings.Contains(r.stdout, "VERIFIED") {
			t.Fatalf("verify-export: %s", r)
		}
		file := readFile(t, out)
		i := bytes.Index(file, []byte("SUP-00417"))
		if i < 0 {
			t.Fatal("the export holds no payload")
		}
		file[i] = 'X'
		bad := writeFile(t, dir, "tampered.jsonl", file)
		r := e.dlqctl(t, "", "verify-export", bad, "--pubkey", pub)
		if r.code != 1 || !strings.Contains(r.stderr, "export refused") || !strings.Contains(r.stderr, "seal_mismatch") {
			t.Fatalf("verify-export of a tampered copy: %s", r)
		}
	})

	t.Run("csv with the KDEs of the CTEs present", func(t *testing.T) {
		out := filepath.Join(dir, "fsma.csv")
		e.okAs(t, "inspector", "export", "--domain", "fsma", "--reason", "FDA records request", "--out", out)
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 {
			t.Fatalf("%d rows, want a header and 2 records", len(rows))
		}
		header := rows[0]
		for _, cte := range []string{fsma.Shipping, fsma.Cooling} {
			for _, k := range fsma.RequiredKDEs(cte) {
				for _, col := range strings.Split(k, " or ") {
					if !slices.Contains(header, col) {
						t.Errorf("no column %q (a KDE of %s)", col, cte)
					}
				}
			}
		}
		for _, col := range []string{"traceability_lot_code", "supplier_id", "audit_hash", "status", "error_code"} {
			if !slices.Contains(header, col) {
				t.Errorf("no column %q", col)
			}
		}
		if slices.Contains(header, "harvester_business_name") {
			t.Error("a KDE column of a CTE not present (initial packing)")
		}
		tlc := slices.Index(header, "traceability_lot_code")
		if !slices.ContainsFunc(rows[1:], func(r []string) bool { return r[tlc] == "00860001000030-RL250312A" }) {
			t.Errorf("no row of lot 00860001000030-RL250312A: %v", rows[1:])
		}
	})

	t.Run("xlsx of one lot", func(t *testing.T) {
		out := filepath.Join(dir, "lot.xlsx")
		e.okAs(t, "inspector", "export", "--domain", "fsma", "--lot", "00860001000030-RL250312A", "--reason", "FDA 24-hour request", "--out", out)
		x, err := excelize.OpenFile(out)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		rows, err := x.GetRows("Sheet1")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || !slices.Contains(rows[0], "ship_to") || !slices.Contains(rows[1], "00860001000030-RL250312A") {
			t.Fatalf("rows: %v", rows)
		}
		tables, err := x.GetTables("Sheet1")
		if err != nil || len(tables) != 1 {
			t.Fatalf("tables (sortable header): %v, %v", tables, err)
		}
	})

	t.Run("viewer refused", func(t *testing.T) {
		out := filepath.Join(dir, "viewer.csv")
		r := dlqctl(t, e.context("viewer"), "", "-o", "json", "export", "--reason", "curious", "--out", out)
		if r.code != 1 || !strings.Contains(r.stderr, `"code":"FORBIDDEN"`) {
			t.Fatalf("export as a viewer: %s", r)
		}
		if b, err := os.ReadFile(out); err == nil && len(b) > 0 {
			t.Fatal("a viewer's export wrote a file")
		}
	})

	t.Run("access audit", func(t *testing.T) {
		var rep api.AccessReply
		e.jsonOf(t, &rep, "access", "--all")
		reasons := map[string]int{}
		for _, it := range rep.Items {
			if it.Action != api.AccessExport || it.User == "" || it.Role == "" || it.IDsHash == "" {
				t.Errorf("access record %+v", it)
			}
			reasons[it.Reason]++
		}
		// Three pages of one chain, then one page each.
		if reasons["DEA inspection 2026-11"] != 3 || reasons["FDA records request"] != 1 || reasons["FDA 24-hour request"] != 1 || reasons["curious"] != 0 {
			t.Errorf("access records by reason: %v", reasons)
		}
		b, _ := json.Marshal(rep)
		if strings.Contains(string(b), "SUP-00417") {
			t.Error("the access audit holds a payload value")
		}
	})
}
