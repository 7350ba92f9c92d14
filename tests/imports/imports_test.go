// Package imports checks the import graph of the production binaries: no
// test-only package (natstest, testing) and no live failpoint in any
// program under services/.
package imports

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/tests/internal/tools"
)

// failpointPkg is the package whose live implementation (live.go, build
// tag failpoint) must stay out of production builds; off.go is its
// production build.
const failpointPkg = "github.com/deadletter/deadletter/shared/failpoint"

// testOnly are packages no production binary may link.
var testOnly = []string{
	"github.com/deadletter/deadletter/shared/natstest",
	"testing",
	"net/http/httptest",
}

// goList runs go list in the workspace at root with args, the caller's
// GOFLAGS cleared (a -tags there would change the build looked at).
func goList(t *testing.T, root string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return strings.Fields(strings.TrimSpace(string(out)))
}

// mains returns the import paths of every program of the services
// modules (services/*/go.mod).
func mains(t *testing.T, root string) []string {
	t.Helper()
	mods, err := filepath.Glob(filepath.Join(root, "services", "*", "go.mod"))
	if err != nil || len(mods) == 0 {
		t.Fatalf("no services modules under %s: %v", root, err)
	}
	args := []string{"-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`}
	for _, m := range mods {
		rel, _ := filepath.Rel(root, filepath.Dir(m))
		args = append(args, "./"+filepath.ToSlash(rel)+"/...")
	}
	return goList(t, root, args...)
}

// TestProductionImportGraph walks go list -deps of every program under
// services/ (the binaries shipped) as built in production, and as the
// chaos suite builds them (-tags failpoint), where the live failpoint
// must be found: the check sees what it checks.
func TestProductionImportGraph(t *testing.T) {
	root := tools.Root(t)
	programs := mains(t, root)
	for _, want := range []string{"services/validator/cmd/validator", "services/quarantiner/cmd/quarantiner",
		"services/redriver/cmd/redriver", "services/deadletter/cmd/deadletter", "services/dlqctl"} {
		if !slices.ContainsFunc(programs, func(p string) bool { return strings.HasSuffix(p, want) }) {
			t.Fatalf("programs %v lack %s", programs, want)
		}
	}
	for _, tc := range []struct {
		name     string
		tags     string
		wantLive bool
	}{
		{"production", "", false},
		{"chaos build", "failpoint", true},
	} {
		for _, prog := range programs {
			t.Run(tc.name+"/"+strings.TrimPrefix(prog, "github.com/deadletter/deadletter/services/"), func(t *testing.T) {
				args := []string{"-deps", "-f", `{{.ImportPath}}{{range .GoFiles}} {{$.ImportPath}}/{{.}}{{end}}`}
				if tc.tags != "" {
					args = append(args, "-tags", tc.tags)
				}
				deps := goList(t, root, append(args, prog)...)
				for _, p := range testOnly {
					if slices.Contains(deps, p) {
						t.Errorf("%s links the test-only package %s", prog, p)
					}
				}
				if !slices.Contains(deps, failpointPkg) {
					return // nothing to arm at all
				}
				if live := slices.Contains(deps, failpointPkg+"/live.go"); live != tc.wantLive {
					t.Errorf("%s: live failpoint linked = %v, want %v", prog, live, tc.wantLive)
				}
				if off := slices.Contains(deps, failpointPkg+"/off.go"); off == tc.wantLive {
					t.Errorf("%s: failpoint's production build linked = %v, want %v", prog, off, !tc.wantLive)
				}
			})
		}
	}
}
