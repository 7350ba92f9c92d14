package registry_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/registry"
)

// TestNoDomainNameLiterals walks the Go syntax tree of every non-test file
// in the workspace and finds no string literal naming a registered domain
// outside the places that own domain names. A literal names a domain when
// its value is the name ("fsma") or, holding no white space, one of its
// dot-separated tokens is ("events.fsma.shipping", "events.fsma."). Prose
// (help texts and usage examples, which hold spaces) is documentation, like
// comments, and is not checked. The exceptions:
//
//   - shared/domain/<name>/: the domain's own package (its Name constant);
//   - shared/domain/registry/: the registry;
//   - schemas/: the published schemas and their examples;
//   - *_test.go files and testdata/ directories: fixtures name domains.
//
// Everything else derives domain names from the registry.
func TestNoDomainNameLiterals(t *testing.T) {
	root := workspaceRoot(t)
	names := registry.Names()
	allowed := []string{"shared/domain/registry/", "schemas/"}
	for _, n := range names {
		allowed = append(allowed, "shared/domain/"+n+"/")
	}
	fset := token.NewFileSet()
	files := 0
	walkGo(t, root, fset, func(rel string, f *ast.File) {
		if slices.ContainsFunc(allowed, func(p string) bool { return strings.HasPrefix(rel, p) }) {
			return
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if dom, ok := namesDomain(v, names); ok {
				t.Errorf("%s: literal %s names the domain %s; derive it from package registry", fset.Position(lit.Pos()), lit.Value, dom)
			}
			return true
		})
	})
	if files < 50 {
		t.Fatalf("walked only %d files from %s: not the workspace", files, root)
	}
}

// namesDomain reports whether a literal's value names one of the domains.
func namesDomain(v string, names []string) (string, bool) {
	if strings.ContainsAny(v, " \t\n") {
		return "", false
	}
	for _, tok := range strings.Split(v, ".") {
		if slices.Contains(names, tok) {
			return tok, true
		}
	}
	return "", false
}

func TestNamesDomain(t *testing.T) {
	names := registry.Names()
	tests := []struct {
		name string
		v    string
		want bool
	}{
		{"bare name", names[0], true},
		{"subject", "events." + names[0] + ".x", true},
		{"subject prefix", "events." + names[0] + ".", true},
		{"unknown", registry.Unknown, false},
		{"longer word", names[0] + "x", false},
		{"json text", `{"domain":"` + names[0] + `"}`, false},
		{"help text", "publish events." + names[0] + ".x (an example)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := namesDomain(tt.v, names); got != tt.want {
				t.Fatalf("namesDomain(%q) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}

// workspaceRoot returns the directory holding go.work, above the test's.
func workspaceRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

// TestRegistry: every registered domain is complete and consistent.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range registry.All() {
		t.Run(s.Name, func(t *testing.T) {
			if s.Name == "" || s.Name == registry.Unknown || seen[s.Name] {
				t.Fatalf("bad or repeated name %q", s.Name)
			}
			seen[s.Name] = true
			if s.Checker == nil || s.Checker.Domain() != s.Name {
				t.Fatalf("checker for %q names %v", s.Name, s.Checker)
			}
			if len(s.EventTypes) == 0 || s.KeySource == "" || s.OrderingKey == "" || s.PartyID == "" || s.PartyLabel == "" || s.Title == "" {
				t.Fatalf("incomplete spec %+v", s)
			}
			if got, ok := registry.Lookup(s.Name); !ok || got.Name != s.Name {
				t.Fatal("Lookup")
			}
			if registry.PartyLabel(s.Name) != s.PartyLabel {
				t.Fatal("PartyLabel")
			}
			if registry.DomainOf("events."+s.Name+"."+s.EventTypes[0]) != s.Name {
				t.Fatal("DomainOf")
			}
		})
	}
	if err := registry.Check(registry.Unknown, false); err == nil {
		t.Fatal("unknown accepted without allowUnknown")
	}
	if err := registry.Check("bogus", true); err == nil || strings.Contains(err.Error(), "bogus") {
		t.Fatalf("Check(bogus) = %v", err)
	}
	if registry.PartyLabel(registry.Unknown) != "party" {
		t.Fatal("PartyLabel(unknown)")
	}
	if registry.DomainOf("events.bogus.x") != registry.Unknown {
		t.Fatal("DomainOf(bogus)")
	}
}

// TestSchemasFollowRegistry: every registered domain has its schema, and
// the quarantine record schema's domain enum is exactly the registry's
// domains and Unknown (the one published list that cannot derive from Go).
func TestSchemasFollowRegistry(t *testing.T) {
	for _, n := range registry.Names() {
		if _, err := schemas.Read(n); err != nil {
			t.Errorf("domain %s has no schema: %v", n, err)
		}
	}
	b, err := schemas.Read("quarantine-record")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Domain struct {
				Enum []string `json:"enum"`
			} `json:"domain"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Properties.Domain.Enum, registry.NamesAndUnknown(); !slices.Equal(got, want) {
		t.Fatalf("quarantine-record.schema.json domain enum %q, registry %q", got, want)
	}
}

// TestDomainCodesInTheirDomain walks the Go syntax tree of every non-test
// file in the workspace, as TestNoDomainNameLiterals does, and finds no
// constant declaring one of a registered domain's own codes
// (domain.Spec.Codes) outside that domain's package: a domain's codes live
// with its rules (shared/domain/<name>/), so a fourth domain is its
// package, its schema and one line of the registry. Each domain's codes
// are known to package codes (codes.IsKnown, the docs' table), once.
func TestDomainCodesInTheirDomain(t *testing.T) {
	owner := map[string]string{} // code value → its domain
	for _, s := range registry.All() {
		for _, c := range s.Codes {
			if prev, ok := owner[string(c.Code)]; ok {
				t.Errorf("%s is a code of %s and of %s", c.Code, prev, s.Name)
			}
			owner[string(c.Code)] = s.Name
			if !codes.IsKnown(c.Code) || c.Meaning == "" {
				t.Errorf("%s's code %s is not registered with a meaning", s.Name, c.Code)
			}
		}
	}
	if len(owner) == 0 {
		t.Fatal("no domain declares a code of its own")
	}
	fset := token.NewFileSet()
	walkGo(t, workspaceRoot(t), fset, func(rel string, f *ast.File) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						continue
					}
					if dom, ok := owner[s]; ok && !strings.HasPrefix(rel, "shared/domain/"+dom+"/") {
						t.Errorf("%s: the constant %s is a code of the domain %s; declare it in shared/domain/%s", fset.Position(lit.Pos()), lit.Value, dom, dom)
					}
				}
			}
		}
	})
}

// walkGo parses every non-test Go file of the workspace below root
// (skipping hidden, testdata and vendor directories) and calls fn with its
// slash-separated path relative to root.
func walkGo(t *testing.T, root string, fset *token.FileSet, fn func(rel string, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			base := d.Name()
			if rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		fn(rel, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
