package exportsheet

import (
	"bytes"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// TestInertCell: a cell that a spreadsheet would run as a formula is made
// inert; numbers, negative ones included, and other text are kept.
func TestInertCell(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"formula", `=HYPERLINK("http://x","y")`, `'=HYPERLINK("http://x","y")`},
		{"plus", "+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"},
		{"minus expression", "-2+3", "'-2+3"},
		{"at", "@SUM(A1:A2)", "'@SUM(A1:A2)"},
		{"tab", "\t=1", "'\t=1"},
		{"negative number", "-30", "-30"},
		{"signed number", "+4.5", "+4.5"},
		{"text", "SUP-00417", "SUP-00417"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InertCell(tc.in); got != tc.want {
				t.Errorf("InertCell(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestWriteCSVIsInert: WriteCSV writes a formula-like payload value inert.
func TestWriteCSVIsInert(t *testing.T) {
	var b strings.Builder
	if err := WriteCSV(&b, []string{"product_description"}, [][]string{{`=HYPERLINK("http://x","y")`}}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "product_description\n\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"\n"; got != want {
		t.Fatalf("WriteCSV wrote %q, want %q", got, want)
	}
}

// TestWriteXLSX: the sheet reads back with its header and rows.
func TestWriteXLSX(t *testing.T) {
	var b bytes.Buffer
	if err := WriteXLSX(&b, []string{"dlq_id", "domain"}, [][]string{{"a", "pharmacy"}, {"b", "fsma"}}); err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rows, err := f.GetRows("Sheet1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0][0] != "dlq_id" || rows[2][1] != "fsma" {
		t.Fatalf("rows %q", rows)
	}
}
