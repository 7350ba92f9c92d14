package access_test

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/access"
)

// updateDocs rewrites the generated tables: go test ./shared/access -run TestDocs -update-docs
var updateDocs = flag.Bool("update-docs", false, "rewrite the access tables of "+docPage)

// docPage holds the generated access tables (docs/operations/deploy.md
// and the README link to it).
const docPage = "docs/security.md"

// TestDocs keeps the accounts, roles and permissions tables of
// docs/security.md exactly as shared/access generates them.
func TestDocs(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	want := access.DocTables()
	for _, rel := range []string{docPage} {
		t.Run(rel, func(t *testing.T) {
			path := filepath.Join(root, rel)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			i, j := strings.Index(s, access.DocBegin), strings.Index(s, access.DocEnd)
			if i < 0 || j < i {
				t.Fatalf("%s has no generated access tables (markers %q ... %q)", rel, access.DocBegin, access.DocEnd)
			}
			have := s[i+len(access.DocBegin) : j]
			if strings.TrimSpace(have) == strings.TrimSpace(want) {
				return
			}
			if *updateDocs {
				s = s[:i+len(access.DocBegin)] + "\n" + want + s[j:]
				if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			t.Errorf("%s: the access tables differ from shared/access; run go test ./shared/access -run TestDocs -update-docs", rel)
		})
	}
}
