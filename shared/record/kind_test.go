package record

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// kindConstants returns the value of every constant of type Kind declared
// in the package's non-test files, found by walking their syntax: a Kind
// added anywhere in the package is found here.
func kindConstants(t *testing.T) map[string]Kind {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]Kind{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			g, ok := n.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				return true
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Kind" {
					continue
				}
				for i, n := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("Kind constant %s is not a string literal", n.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[n.Name] = Kind(v)
				}
			}
			return false
		})
	}
	return out
}

// TestEveryKindHasARule: every Kind constant has its entry in the
// lifecycle table (allowed statuses, effect, audit-log event), and the
// table names no other kind. Adding a kind is its constant and its entry.
func TestEveryKindHasARule(t *testing.T) {
	consts := kindConstants(t)
	if len(consts) < 9 {
		t.Fatalf("found %d Kind constants, expected at least 9", len(consts))
	}
	for name, k := range consts {
		t.Run(name, func(t *testing.T) {
			r, ok := kinds[k]
			if !ok {
				t.Fatalf("%s (%q) has no entry in the kinds table", name, k)
			}
			if r.event == "" || r.event == UnknownKindEvent {
				t.Errorf("%s has no audit-log event of its own", name)
			}
			if k != KindQuarantined && len(r.from) == 0 {
				t.Errorf("%s is allowed after no status", name)
			}
			if !k.Known() || k.Event() != r.event {
				t.Errorf("Known %v, Event %q", k.Known(), k.Event())
			}
		})
	}
	if len(kinds) != len(consts) {
		t.Errorf("the kinds table has %d entries, the package declares %d Kind constants", len(kinds), len(consts))
	}
	events := map[string]Kind{}
	for k, r := range kinds {
		if other, ok := events[r.event]; ok {
			t.Errorf("%s and %s share the event %s", k, other, r.event)
		}
		events[r.event] = k
	}
}

// TestStatusAfter: StatusAfter agrees with Fold on every allowed
// transition (the independent table of fold_test.go), and keeps the status
// for a kind it does not know.
func TestStatusAfter(t *testing.T) {
	for from, to := range allowed {
		for kind, want := range to {
			if got := StatusAfter(from, kind); got != want {
				t.Errorf("StatusAfter(%s, %s) = %s, want %s", from, kind, got, want)
			}
		}
	}
	tests := []struct {
		name string
		prev Status
		kind Kind
		want Status
	}{
		{"first record opens", "", KindQuarantined, StatusOpen},
		{"unknown kind keeps open", StatusOpen, "archived", StatusOpen},
		{"unknown kind keeps poison", StatusPoison, "archived", StatusPoison},
		{"correction keeps redriving", StatusRedriving, KindCorrected, StatusRedriving},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StatusAfter(tt.prev, tt.kind); got != tt.want {
				t.Errorf("StatusAfter = %s, want %s", got, tt.want)
			}
		})
	}
	if Kind("archived").Event() != UnknownKindEvent {
		t.Errorf("unknown kind's event %q", Kind("archived").Event())
	}
}
