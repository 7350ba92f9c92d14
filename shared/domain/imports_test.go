package domain_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path of deadletter's modules' parent.
const module = "github.com/deadletter/deadletter/"

// forbidden are the packages no domain package may link, directly or
// through another package, each with why: the domains are what the gate,
// the idempotency rules and the services ask (through domain.Spec's
// hooks), never the other way round (issue #41).
var forbidden = []struct{ prefix, why string }{
	{module + "shared/gate", "the gate calls the domains' checkers; a domain decodes with domain.Decode"},
	{module + "shared/idempotency", "idempotency asks the domain's Spec for its content identity (Spec.Content)"},
	{module + "services/", "the services run the domains' rules; a rule knows no service"},
}

// violations returns, for packages given as import path and imports (go
// list's lines "path imp imp..."), each import of a forbidden package as
// "importer imports imported (why)", sorted.
func violations(lines []string) []string {
	var out []string
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, imp := range fields[1:] {
			for _, f := range forbidden {
				if imp == f.prefix || strings.HasPrefix(imp, strings.TrimSuffix(f.prefix, "/")+"/") {
					out = append(out, fields[0]+" imports "+imp+" ("+f.why+")")
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestDomainImportsNothingOfTheGate lists every package the domain
// packages (./...: this one and its subpackages, as built, tests left
// out) link, with go list -deps, and finds none that imports shared/gate,
// shared/idempotency or a package under services/: the domain packages
// import nothing of the gate or the validator, and content identity is a
// hook of their Spec (issue #41).
func TestDomainImportsNothingOfTheGate(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Env = append(os.Environ(), "GOFLAGS=") // a -tags there would change the build looked at
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	// The check sees what it checks: the domain packages and their own
	// imports are in the list.
	var listed []string
	for _, l := range lines {
		listed = append(listed, strings.Fields(l)[0])
	}
	for _, want := range []string{"shared/domain", "shared/domain/registry", "shared/domain/dscsa/document", "shared/domain/dscsa/eventhash", "shared/codes"} {
		if !slices.Contains(listed, module+want) {
			t.Fatalf("go list -deps ./... lacks %s: not the domain packages (%d listed)", want, len(listed))
		}
	}
	for _, v := range violations(lines) {
		t.Error(v)
	}
}

// TestImportViolations: the rule flags each forbidden package, and only
// those.
func TestImportViolations(t *testing.T) {
	tests := []struct {
		name string
		line string
		want int
	}{
		{"the gate", module + "shared/domain/dscsa/document " + module + "shared/gate " + module + "shared/codes", 1},
		{"idempotency", module + "shared/domain/dscsa " + module + "shared/idempotency", 1},
		{"a service", module + "shared/domain/fsma " + module + "services/validator", 1},
		{"a service's subpackage", module + "shared/domain " + module + "services/redriver/replay", 1},
		{"two at once", module + "shared/domain " + module + "shared/gate " + module + "services/auditor/reconcile", 2},
		{"a package whose name begins like the gate's", module + "shared/domain " + module + "shared/gateway", 0},
		{"shared packages the domains use", module + "shared/domain " + module + "shared/codes " + module + "shared/envelope " + module + "shared/gs1 " + module + "schemas", 0},
		{"the standard library", module + "shared/domain encoding/json strings", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := violations([]string{tt.line}); len(got) != tt.want {
				t.Fatalf("violations = %q, want %d", got, tt.want)
			}
		})
	}
}
