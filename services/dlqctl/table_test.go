package main_test

import (
	"strings"
	"testing"

	"golang.org/x/text/width"

	"github.com/deadletter/deadletter/shared/access"
)

// TestTablesAlignByDisplayWidth (issue 40 O9): a table whose cells hold
// CJK, Latin accents and an emoji lines up on a terminal: every row's
// STATUS column starts at the same display column as the header's.
func TestTablesAlignByDisplayWidth(t *testing.T) {
	e := startStack(t, stackOptions{})
	inspector := access.DefaultPerson(access.RoleInspector)
	for _, h := range []struct{ party, caseID string }{
		{"陈伟药房", "CASE-陈伟-1"},
		{"Müller & Söhne <Großhandel>", "CASE-Müller-2"},
		{`Rx 💊 "night desk"`, "CASE-💊-3"},
		{"BW4829137", "CASE-4"},
	} {
		e.okAs(t, inspector, "hold", "place", "--party", h.party, "--case", h.caseID, "--reason", "subpoena", "--confirm")
	}
	out := e.okAs(t, viewerUser, "hold", "ls").stdout
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("hold ls: want a header and 4 holds:\n%s", out)
	}
	col := func(line, word string) int {
		i := strings.Index(line, word)
		if i < 0 {
			t.Fatalf("%q lacks %q", line, word)
		}
		return columns(line[:i])
	}
	want := col(lines[0], "STATUS")
	for _, l := range lines[1:] {
		if got := col(l, "active"); got != want {
			t.Errorf("STATUS at column %d in %q, %d in the header:\n%s", got, l, want, out)
		}
	}
}

// columns is the display width of s, for text of wide and narrow
// characters without combining marks.
func columns(s string) int {
	n := 0
	for _, r := range s {
		switch width.LookupRune(r).Kind() {
		case width.EastAsianWide, width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}
