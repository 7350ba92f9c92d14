package registry_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
			// The hooks the generic code calls for every domain: sample's
			// identities, the records list's identifiers (and, with
			// search fields, their search). Sheet is optional.
			if s.Unique == nil || s.Search.KeyIdentifiers == nil || (len(s.Search.Fields) > 0) != (s.Search.Parse != nil) {
				t.Fatalf("spec %s lacks a hook: Unique, Search.KeyIdentifiers, or Search.Parse for its Search.Fields", s.Name)
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
		if !*updateSchema {
			t.Fatalf("quarantine-record.schema.json domain enum %q, registry %q (regenerate: go test ./shared/domain/registry -run TestSchemasFollowRegistry -update-schema)", got, want)
		}
		path := filepath.Join(workspaceRoot(t), "schemas", "quarantine-record.schema.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out, err := withDomainEnum(raw, want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s's domain enum %q", path, want)
	}
}

// updateSchema rewrites the quarantine record schema's domain enum from
// the registry (the schema is published as a file; the enum is the one
// list of domains that cannot derive from Go at run time).
var updateSchema = flag.Bool("update-schema", false, "rewrite schemas/quarantine-record.schema.json's domain enum from the registry")

// domainEnum is the domain property's enum in the quarantine record schema.
var domainEnum = regexp.MustCompile(`(?s)("domain": \{\n\s*"description": "[^"]*",\n(\s*)"enum": \[)[^\]]*(\n\s*\])`)

// withDomainEnum returns the quarantine record schema raw with the domain
// property's enum set to names, in the file's layout.
func withDomainEnum(raw []byte, names []string) ([]byte, error) {
	m := domainEnum.FindSubmatchIndex(raw)
	if m == nil {
		return nil, errors.New("no domain enum found in the quarantine record schema")
	}
	indent := string(raw[m[4]:m[5]]) + "  "
	var b strings.Builder
	for i, n := range names {
		q, _ := json.Marshal(n)
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n" + indent + string(q))
	}
	out := slices.Concat(raw[:m[3]], []byte(b.String()), raw[m[6]:])
	var probe any
	if err := json.Unmarshal(out, &probe); err != nil {
		return nil, err
	}
	return out, nil
}

func TestWithDomainEnum(t *testing.T) {
	raw, err := schemas.Read("quarantine-record")
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
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	same, err := withDomainEnum(raw, s.Properties.Domain.Enum)
	if err != nil || string(same) != string(raw) {
		t.Fatalf("rewriting the enum as it is changed the file (%v)", err)
	}
	out, err := withDomainEnum(raw, []string{"pharmacy", "tobacco & vape <Ü>", "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &s); err != nil || !slices.Equal(s.Properties.Domain.Enum, []string{"pharmacy", "tobacco & vape <Ü>", "unknown"}) {
		t.Fatalf("enum %q (%v)", s.Properties.Domain.Enum, err)
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

// singleDomainFeatures are the files outside shared/domain/ that may
// compare with a domain package's constants: features that exist for one
// domain only, which a fourth domain does not touch. Each entry is a
// directory prefix and a file name (the file may move below the
// directory), and why.
var singleDomainFeatures = []struct{ dir, file, why string }{
	// DSCSA's EPCIS documents: uploaded, split into events and
	// reconciled as DSCSA documents (dscsa.MalformedDocument).
	{"services/validator/", "ingest.go", "DSCSA EPCIS document upload"},
	{"services/auditor/reconcile/", "document.go", "DSCSA EPCIS document reconciliation"},
	// The EPCIS form of an inspection export holds DSCSA events only.
	{"shared/exportsheet/", "epcis.go", "EPCIS export of DSCSA events"},
}

// TestNoDomainConstantComparisons walks the Go syntax tree of every
// non-test file in the workspace, as TestNoDomainNameLiterals does, and
// finds no comparison with a registered domain package's constant (its
// Name, its codes...) outside shared/domain/ and singleDomainFeatures: no
// `case pharmacy.Name:`, no `dom == fsma.Name`, no
// `codes.Of(err) == dscsa.SomeCode`. Such a comparison is a per-domain
// rule living outside its domain, which a fourth domain would have to
// extend: it belongs in the domain's package, behind a hook of
// domain.Spec (Unique, Search, Sheet...) that the generic code calls for
// every registered domain.
func TestNoDomainConstantComparisons(t *testing.T) {
	root := workspaceRoot(t)
	fset := token.NewFileSet()
	// The constants each domain package declares, by import path.
	consts := map[string]map[string]bool{}
	for _, n := range registry.Names() {
		names := map[string]bool{}
		dir := filepath.Join(root, "shared", "domain", n)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("domain %s: no Go files in %s", n, dir)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
					for _, spec := range gd.Specs {
						for _, id := range spec.(*ast.ValueSpec).Names {
							names[id.Name] = true
						}
					}
				}
			}
		}
		if !names["Name"] {
			t.Fatalf("domain %s declares no Name constant", n)
		}
		consts[domainImportPath+n] = names
	}
	checked := 0
	walkGo(t, root, fset, func(rel string, f *ast.File) {
		if strings.HasPrefix(rel, "shared/domain/") || slices.ContainsFunc(singleDomainFeatures, func(a struct{ dir, file, why string }) bool {
			return strings.HasPrefix(rel, a.dir) && filepath.Base(rel) == a.file
		}) {
			return
		}
		checked++
		for _, v := range constantComparisons(fset, f, consts) {
			t.Errorf("%s; move the per-domain rule into its domain package (a hook of domain.Spec), or list a single-domain feature in singleDomainFeatures", v)
		}
	})
	if checked < 50 {
		t.Fatalf("checked only %d files from %s: not the workspace", checked, root)
	}
}

// domainImportPath is the import path of the domain packages' parent.
const domainImportPath = "github.com/deadletter/deadletter/shared/domain/"

// constantComparisons returns the comparisons (==, !=, a case of a
// switch) of f with a constant of a domain package (consts: the constants
// by import path), each as "position: compares with the domain constant
// pkg.Name".
func constantComparisons(fset *token.FileSet, f *ast.File, consts map[string]map[string]bool) []string {
	// The file's local names of domain packages.
	local := map[string]map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		names, ok := consts[p]
		if !ok {
			continue
		}
		name := p[strings.LastIndexByte(p, '/')+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = names
	}
	if len(local) == 0 {
		return nil
	}
	var out []string
	check := func(e ast.Expr) {
		sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
		if !ok {
			return
		}
		if x, ok := sel.X.(*ast.Ident); ok && local[x.Name][sel.Sel.Name] {
			out = append(out, fmt.Sprintf("%s: compares with the domain constant %s.%s", fset.Position(e.Pos()), x.Name, sel.Sel.Name))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				check(n.X)
				check(n.Y)
			}
		case *ast.CaseClause:
			for _, e := range n.List {
				check(e)
			}
		}
		return true
	})
	return out
}

func TestConstantComparisons(t *testing.T) {
	consts := map[string]map[string]bool{
		domainImportPath + "pharmacy": {"Name": true, "BadNDC": true},
		domainImportPath + "fsma":     {"Name": true},
	}
	const imports = `package p
import (
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	rx "github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/codes"
)
`
	tests := []struct {
		name, body string
		want       int
	}{
		{"case of a switch", `func f(d string) { switch d { case "x", pharmacy.Name: } }`, 1},
		{"equal", `func f(d string) bool { return d == pharmacy.Name }`, 1},
		{"not equal, constant first", `func f(d string) bool { return pharmacy.Name != d }`, 1},
		{"renamed import, in parentheses", `func f(d string) bool { return d == (rx.Name) }`, 1},
		{"a domain's code", `func f(err error) bool { return codes.Of(err) == pharmacy.BadNDC }`, 1},
		{"two in one expression", `func f(a, b string) bool { return a == pharmacy.Name || b == rx.Name }`, 2},
		{"a function of the domain", `func f(s string) bool { n, _ := pharmacy.NormalizeNDC(s); return n == s }`, 0},
		{"the name used, not compared", `func f() string { return "events." + pharmacy.Name }`, 0},
		{"a map keyed by the name", `var m = map[string]int{pharmacy.Name: 1}`, 0},
		{"another package's Name", `func f(d string) bool { return d == codes.Name }`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", imports+tt.body, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if got := constantComparisons(fset, f, consts); len(got) != tt.want {
				t.Fatalf("got %d comparisons %q, want %d", len(got), got, tt.want)
			}
		})
	}
}
