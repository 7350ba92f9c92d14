// Package docs checks that the README documents what the code defines:
// every error code and every configuration variable.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tools.Root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadmeListsEveryCode(t *testing.T) {
	doc := readme(t)
	for _, c := range codes.Known() {
		row := "| `" + string(c.Code) + "` | "
		retried := "no"
		if c.Transient {
			retried = "yes"
		}
		if !strings.Contains(doc, row+retried+" |") {
			t.Errorf("README's error code table lacks %s (retried: %s)", c.Code, retried)
		}
	}
}

func TestReadmeListsEveryVariable(t *testing.T) {
	doc := readme(t)
	re := regexp.MustCompile(`"(DEADLETTER_[A-Z_]+)"`)
	root := tools.Root(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "services"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 {
		t.Fatal("found no configuration variables in the code")
	}
	for v := range seen {
		if !strings.Contains(doc, "`"+v+"`") {
			t.Errorf("README does not document %s", v)
		}
	}
}

func TestReadmeListsEveryMetric(t *testing.T) {
	doc := readme(t)
	re := regexp.MustCompile(`"(deadletter_[a-z_]+)"`)
	seen := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(tools.Root(t), "services"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "metrics.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 10 {
		t.Fatalf("found only %d metrics in the code", len(seen))
	}
	for m := range seen {
		if !strings.Contains(doc, "`"+m) {
			t.Errorf("README does not document metric %s", m)
		}
	}
}
