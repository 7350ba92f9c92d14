package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
)

// column is the display column at which byte offset i of line starts,
// counted independently of safetext.Width for the characters of the test's
// names: 陈, 伟 and the emoji take two columns, the combining diaeresis
// none.
func column(line string, i int) int {
	n := 0
	for _, r := range line[:i] {
		switch {
		case strings.ContainsRune("陈伟🧪🧫", r):
			n += 2
		case r == '\u0308':
		default:
			n++
		}
	}
	return n
}

// TestPeopleLsAlignsByDisplayWidth (issue 40, O9): `people ls` with 陈伟,
// Müller & Söhne (precomposed and combining) and an emoji among the
// display names starts every cell of a column at the same display column.
func TestPeopleLsAlignsByDisplayWidth(t *testing.T) {
	dir := t.TempDir()
	if _, err := access.LoadOrCreate(dir+"/"+stack.CredentialsFile, access.DefaultPeople(), cheap); err != nil {
		t.Fatal(err)
	}
	added := map[string]string{
		"wei.chen":       "陈伟",
		"bob.schneider":  "Bob Schneider <Müller & Söhne>",
		"jonas.combined": "Jonas Mu\u0308ller & \"So\u0308hne\"",
		"lab.qa":         "🧪 QA Lab 🧫",
	}
	for name, display := range added {
		mustPeople(t, "add", name, "--data-dir", dir, "--role", "viewer", "--display-name", display)
	}
	ls := mustPeople(t, "ls", "--data-dir", dir)
	lines := strings.Split(strings.TrimRight(ls, "\n"), "\n")
	header := lines[0]
	roleCol, stateCol := column(header, strings.Index(header, "ROLE")), column(header, strings.Index(header, "STATE"))
	sec, err := access.LoadOrCreate(dir+"/"+stack.CredentialsFile, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]access.Person{}
	for _, p := range sec.People {
		byName[p.Name] = p
	}
	seen := 0
	for _, line := range lines[1:] {
		name, _, _ := strings.Cut(line, " ")
		p, ok := byName[name]
		if !ok {
			continue // the applied line, when any
		}
		seen++
		// Each cell as written, then the spaces before the next.
		next := func(at int, cell string) int {
			if !strings.HasPrefix(line[at:], cell) {
				t.Fatalf("%s: %q expected at byte %d:\n%s", name, cell, at, ls)
			}
			at += len(cell)
			return at + len(line[at:]) - len(strings.TrimLeft(line[at:], " "))
		}
		display := orDash(p.DisplayName)
		role := next(next(next(0, name), orDash(access.PersonOf(name))), display)
		state := next(role, string(p.Role))
		if got := column(line, role); got != roleCol {
			t.Errorf("%s (%s): ROLE at display column %d, the header's at %d:\n%s", name, display, got, roleCol, ls)
		}
		if got := column(line, state); got != stateCol {
			t.Errorf("%s (%s): STATE at display column %d, the header's at %d:\n%s", name, display, got, stateCol, ls)
		}
	}
	if seen != len(sec.People) {
		t.Errorf("ls shows %d of %d people:\n%s", seen, len(sec.People), ls)
	}
	for _, display := range added {
		if !strings.Contains(ls, display) {
			t.Errorf("ls lacks %q:\n%s", display, ls)
		}
	}
}

// TestWriteColumns: the last cell is not padded, a short row ends early,
// and the gap is columnGap spaces after the widest cell.
func TestWriteColumns(t *testing.T) {
	var b bytes.Buffer
	if err := writeColumns(&b, [][]string{{"NAME", "ROLE"}, {"陈伟", "viewer"}, {"x"}}); err != nil {
		t.Fatal(err)
	}
	if want := "NAME  ROLE\n陈伟  viewer\nx\n"; b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
