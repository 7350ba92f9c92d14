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

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/export"
)

// TestExport: on the whole stack, an inspector's export as JSONL verifies
// offline with the auditor's public key and a copy with one byte changed
// is refused, also when a payload holds "&", "<" and ">"; CSV and XLSX
// hold one row per record with the FSMA 204 KDE columns of the CTEs
// present, column names unique, the XLSX a records sheet and a typed fsma
// sheet, each a table; --lot keeps one traceability lot, and the
// identifier filters select in every domain, a JSONL export of them
// verifying whole; a viewer
// may not export; every export is in the access audit with its reason.
func TestExport(t *testing.T) {
	e := startStack(t, stackOptions{})
	dir := t.TempDir()
	// The inspector's report: a product description with "&", "<" and ">".
	romaine := bytes.Replace(readFile(t, testdata(t, "fsma/invalid/INVALID_GLN--bad-check-digit.json")),
		[]byte("Romaine hearts, 3 count, 12 bags per case"), []byte("Romaine & kale <fresh>"), 1)
	romaine = bytes.Replace(romaine, []byte("RL250312A"), []byte("RL250312B"), 1)
	inputs := []string{
		testdata(t, "fsma/invalid/INVALID_GLN--bad-check-digit.json"),                  // shipping
		testdata(t, "fsma/invalid/MISSING_KDE--cooling-without-harvest-location.json"), // cooling
		testdata(t, "pharmacy/invalid/INVALID_NDC--letter-in-product-code.json"),
		writeFile(t, dir, "romaine.json", romaine), // shipping
	}
	for i, in := range inputs {
		e.ok(t, "publish", in)
		e.waitQuarantined(t, api.ListRequest{}, i+1)
	}
	pub, err := export.SigningPublicKey(filepath.Join(e.anchorDir, stack.SigningKeyFile))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("jsonl verifies offline", func(t *testing.T) {
		out := filepath.Join(dir, "all.jsonl")
		var res struct {
			Chains, Records int
		}
		e.jsonOf(t, &res, "export", "--reason", "DEA inspection 2026-11", "--out", out, "--page", "1")
		if res.Chains != 4 || res.Records != 4 {
			t.Fatalf("export: %+v", res)
		}
		if r := e.ok(t, "verify-export", out, "--pubkey", pub); !strings.Contains(r.stdout, "VERIFIED") {
			t.Fatalf("verify-export: %s", r)
		}
		file := readFile(t, out)
		if !bytes.Contains(file, []byte("Romaine & kale <fresh>")) {
			t.Error(`the export does not hold "Romaine & kale <fresh>" as published`)
		}
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
		e.okAs(t, inspectorUser, "export", "--domain", "fsma", "--reason", "FDA records request", "--out", out)
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 4 {
			t.Fatalf("%d rows, want a header and 3 records", len(rows))
		}
		header := rows[0]
		seen := map[string]bool{}
		for _, h := range header {
			if seen[strings.ToLower(h)] {
				t.Errorf("column %q twice", h)
			}
			seen[strings.ToLower(h)] = true
		}
		for _, cte := range []string{fsma.Shipping, fsma.Cooling} {
			for _, k := range fsma.RequiredKDEs(cte) {
				for _, col := range strings.Split(k, " or ") {
					if !slices.ContainsFunc(header, func(h string) bool { return h == "fsma."+col || strings.HasPrefix(h, "fsma."+col+".") }) {
						t.Errorf("no column fsma.%s (a KDE of %s)", col, cte)
					}
				}
			}
		}
		for _, col := range []string{"fsma.traceability_lot_code", "fsma.supplier_id", "fsma.ship_to.gln", "fsma.event_time", "event_time", "audit_hash", "status", "error_code"} {
			if !slices.Contains(header, col) {
				t.Errorf("no column %q", col)
			}
		}
		if slices.Contains(header, "fsma.harvester_business_name") {
			t.Error("a KDE column of a CTE not present (initial packing)")
		}
		tlc := slices.Index(header, "fsma.traceability_lot_code")
		if !slices.ContainsFunc(rows[1:], func(r []string) bool { return r[tlc] == "00860001000030-RL250312A" }) {
			t.Errorf("no row of lot 00860001000030-RL250312A: %v", rows[1:])
		}
	})

	t.Run("xlsx of one lot", func(t *testing.T) {
		out := filepath.Join(dir, "lot.xlsx")
		e.okAs(t, inspectorUser, "export", "--domain", "fsma", "--lot", "00860001000030-RL250312B", "--reason", "FDA 24-hour request", "--out", out)
		x, err := excelize.OpenFile(out) // a fresh reader of the file's bytes
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		if got := x.GetSheetList(); !slices.Equal(got, []string{"records", "fsma"}) {
			t.Fatalf("sheets %v, want records and fsma", got)
		}
		rows, err := x.GetRows("fsma")
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("fsma rows: %q, want a header and one record", rows)
		}
		col := func(name string) string {
			i := slices.Index(rows[0], name)
			if i < 0 || i >= len(rows[1]) {
				t.Fatalf("no column %q in %q", name, rows[0])
			}
			return rows[1][i]
		}
		if col("fsma.traceability_lot_code") != "00860001000030-RL250312B" || col("fsma.product_description") != "Romaine & kale <fresh>" ||
			col("fsma.ship_to.gln") != "0614141000013" || col("fsma.reference_document.number") != "BOL-778120" {
			t.Errorf("fsma row: %q", rows[1])
		}
		i := slices.Index(rows[0], "fsma.quantity")
		ref, _ := excelize.CoordinatesToCellName(i+1, 2)
		if v, _ := x.GetCellValue("fsma", ref); v != "600" {
			t.Errorf("fsma.quantity %q, want 600", v)
		}
		if typ, _ := x.GetCellType("fsma", ref); typ != excelize.CellTypeUnset { // a number
			t.Errorf("fsma.quantity is of cell type %v, not a number", typ)
		}
		for _, sheet := range []string{"records", "fsma"} {
			tables, err := x.GetTables(sheet)
			if err != nil || len(tables) != 1 {
				t.Fatalf("%s: tables (sortable header): %v, %v", sheet, tables, err)
			}
			header, _ := x.GetRows(sheet)
			seen := map[string]bool{}
			for _, h := range header[0] {
				if seen[strings.ToLower(h)] {
					t.Errorf("%s: column %q twice", sheet, h)
				}
				seen[strings.ToLower(h)] = true
			}
		}
	})

	t.Run("identifier filters in every domain, the jsonl whole", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			args   []string
			chains int
		}{
			{"pharmacy transaction id", []string{"--domain", "pharmacy", "--transaction-id", "INV-2025-0209"}, 1},
			{"pharmacy registrant", []string{"--domain", "pharmacy", "--registrant", "bw4829137"}, 1},
			{"fsma lot", []string{"--domain", "fsma", "--lot", "00860001000030-RL250312B"}, 1},
			{"a lot of no event", []string{"--lot", "A1&B<2>\"Ü\""}, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out := filepath.Join(dir, "filtered.jsonl")
				var res struct{ Chains int }
				e.jsonOfAs(t, inspectorUser, &res, append([]string{"export", "--reason", "DEA recall <lot>", "--out", out}, tc.args...)...)
				if res.Chains != tc.chains {
					t.Fatalf("%d chains, want %d", res.Chains, tc.chains)
				}
				if r := e.ok(t, "verify-export", out, "--pubkey", pub); !strings.Contains(r.stdout, "VERIFIED") {
					t.Fatalf("verify-export: %s", r)
				}
			})
		}
		r := e.dlqctl(t, "", "export", "--domain", "pharmacy", "--tlc", "00860001000030-RL250312B", "--reason", "r", "--out", filepath.Join(dir, "none.jsonl"))
		if r.code == 0 || !strings.Contains(r.stderr, "BAD_REQUEST") || !strings.Contains(r.stderr, "tlc") {
			t.Errorf("a pharmacy export by TLC: %s", r)
		}
	})

	t.Run("viewer refused", func(t *testing.T) {
		out := filepath.Join(dir, "viewer.csv")
		r := dlqctl(t, e.context(viewerUser), "", "-o", "json", "export", "--reason", "curious", "--out", out)
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
		// Four pages of one chain, then one page each.
		if reasons["DEA inspection 2026-11"] != 4 || reasons["FDA records request"] != 1 || reasons["FDA 24-hour request"] != 1 || reasons["curious"] != 0 {
			t.Errorf("access records by reason: %v", reasons)
		}
		b, _ := json.Marshal(rep)
		if strings.Contains(string(b), "SUP-00417") {
			t.Error("the access audit holds a payload value")
		}
	})
}
