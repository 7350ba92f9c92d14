package cli

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/deadletter/deadletter/shared/safetext"
)

// TestTableAlignsByDisplayWidth: every column of every row starts at the
// same terminal column, whatever the names before it hold.
func TestTableAlignsByDisplayWidth(t *testing.T) {
	rows := [][]string{
		{"NAME", "DISPLAY NAME", "ROLE", "PARTIES"},
		{"chen.wei", "Chen Wei (陈伟)", "approver", "-"},
		{"jonas.mueller", "Jonas Müller & Söhne", "operator", "REG-1"},
		{"jonas.mueller2", "Jonas Mu\u0308ller & So\u0308hne", "operator", "REG-2"},
		{"rx.bot", "Pharmacy 💊 <night> \"desk\"", "publisher", "*"},
		{"wei.chen", "陈伟陈伟陈伟陈伟陈伟陈伟陈伟陈伟陈伟陈伟陈伟陈伟 (a long name)", "viewer", "-"},
	}
	var out bytes.Buffer
	tb := newTable(&out, rows[0]...)
	for _, r := range rows[1:] {
		tb.row(r...)
	}
	tb.flush()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(rows) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(rows), out.String())
	}
	var starts []int
	for i, line := range lines {
		var got []int
		at := 0
		for _, cell := range rows[i] {
			k := strings.Index(line, cell)
			if k < 0 {
				t.Fatalf("line %d lacks %q: %q", i, cell, line)
			}
			got = append(got, at+safetext.Width(line[:k]))
			at += safetext.Width(line[:k+len(cell)])
			line = line[k+len(cell):]
		}
		if i == 0 {
			starts = got
			continue
		}
		for j := range got {
			if got[j] != starts[j] {
				t.Errorf("row %d: column %d starts at %d, the header's at %d:\n%s", i, j, got[j], starts[j], out.String())
			}
		}
	}
}

// TestTableLikeTabwriter: text whose display width is its count of runes
// comes out byte for byte as text/tabwriter wrote it (the golden files
// stay valid), blocks of rows with fewer cells included.
func TestTableLikeTabwriter(t *testing.T) {
	cases := []struct {
		name string
		rows [][]string
	}{
		{name: "one column", rows: [][]string{{"a"}, {"bbb"}}},
		{name: "header and rows", rows: [][]string{{"DLQ ID", "DOMAIN", "CODE"}, {"pharmacy_0123", "pharmacy", "DOWNSTREAM_UNAVAILABLE"}, {"fsma_1", "fsma", "SCHEMA"}}},
		{name: "key value", rows: [][]string{{"CORRECTIONS", "identity"}, {"PENDING TTL", "72h"}}},
		{name: "ragged rows", rows: [][]string{{"a", "bb", "c"}, {"dddd", "e"}, {"f"}, {"gg", "h", "iiiii", "j"}, {"k", "l", "m", "n"}}},
		{name: "latin accents", rows: [][]string{{"Søren Dahl", "policy"}, {"Lúcia Ferreira", "approver"}, {"Elif Yılmaz", "inspector"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want, got bytes.Buffer
			tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', 0)
			tb := newTable(&got)
			for _, r := range c.rows {
				_, _ = tw.Write([]byte(strings.Join(r, "\t") + "\n"))
				tb.row(r...)
			}
			_ = tw.Flush()
			tb.flush()
			if got.String() != want.String() {
				t.Errorf("got\n%s\nwant (tabwriter)\n%s", got.String(), want.String())
			}
		})
	}
}
