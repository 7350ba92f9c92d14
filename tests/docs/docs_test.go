// Package docs checks that the documentation documents what the code
// defines, and that its links lead somewhere:
//
//   - every error code (shared/codes and the domains') has its row in docs/reference/codes.md
//     ("| `CODE` | yes |" or "| `CODE` | no |");
//   - every DEADLETTER_* variable a service reads is named in
//     docs/reference/configuration.md;
//   - every deadletter_* metric of services/*/metrics.go is named in
//     docs/reference/metrics.md;
//   - every alert of deploy/prometheus/alerts.yml has its row in
//     docs/operations/runbook.md;
//   - every relative link of README.md, deploy/README.md and docs/**.md
//     names a file that exists, and a heading of it when it names one.
//   - every path, file and Go name of the README's "Where things live"
//     table exists in the tree.
//
// The access tables are checked by shared/access's TestDocs (docs/security.md).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// The pages that hold the tables the code must match.
const (
	codesDoc   = "docs/reference/codes.md"
	configDoc  = "docs/reference/configuration.md"
	metricsDoc = "docs/reference/metrics.md"
	runbookDoc = "docs/operations/runbook.md"
	alertRules = "deploy/prometheus/alerts.yml"
)

// read returns the text of the file rel (a slash path from the root).
func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tools.Root(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDocsListEveryCode(t *testing.T) {
	doc := read(t, codesDoc)
	for _, c := range registry.Codes() { // the domains' codes included
		row := "| `" + string(c.Code) + "` | "
		retried := "no"
		if c.Transient {
			retried = "yes"
		}
		if !strings.Contains(doc, row+retried+" |") {
			t.Errorf("%s's error code table lacks %s (retried: %s)", codesDoc, c.Code, retried)
		}
	}
}

func TestDocsListEveryVariable(t *testing.T) {
	doc := read(t, configDoc)
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
			t.Errorf("%s does not document %s", configDoc, v)
		}
	}
}

func TestDocsListEveryMetric(t *testing.T) {
	doc := read(t, metricsDoc)
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
			t.Errorf("%s does not document metric %s", metricsDoc, m)
		}
	}
}

func TestRunbookListsEveryAlert(t *testing.T) {
	doc := read(t, runbookDoc)
	re := regexp.MustCompile(`(?m)^\s*-\s*alert:\s*(\S+)\s*$`)
	alerts := re.FindAllStringSubmatch(read(t, alertRules), -1)
	if len(alerts) < 10 {
		t.Fatalf("found only %d alerts in %s", len(alerts), alertRules)
	}
	for _, m := range alerts {
		if !strings.Contains(doc, "| `"+m[1]+"` |") {
			t.Errorf("%s has no row for the alert %s", runbookDoc, m[1])
		}
	}
}

// TestLinks checks every relative link of the documentation.
func TestLinks(t *testing.T) {
	root := tools.Root(t)
	pages := []string{filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 20 {
		t.Fatalf("found only %d pages", len(pages))
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, target := range linkTargets(string(b)) {
			links++
			if err := checkLink(root, page, target); err != "" {
				t.Errorf("%s: link %q: %s", filepath.ToSlash(rel), target, err)
			}
		}
	}
	if links < 50 {
		t.Errorf("found only %d links", links)
	}
}

// TestLinkChecker pins what the link check accepts and refuses.
func TestLinkChecker(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## 0.3 Alerts\n\n## Müller & Söhne <Großhandel>\n\n## Twice\n\n## Twice\n\n"+
		"```sh\n# not a heading\n```\n\n## `make cluster`: on one machine\n")
	write("docs/sub/b.md", "# B\n")
	page := filepath.Join(root, "docs", "a.md")
	tests := []struct {
		name, target string
		ok           bool
	}{
		{"file beside", "sub/b.md", true},
		{"directory", "sub/", true},
		{"file up a level", "../docs/a.md", true},
		{"missing file", "c.md", false},
		{"heading with a dot", "#03-alerts", true},
		{"heading with punctuation and non-ASCII", "#müller--söhne-großhandel", true},
		{"second heading of the same text", "#twice-1", true},
		{"heading with code", "#make-cluster-on-one-machine", true},
		{"a shell comment is no heading", "#not-a-heading", false},
		{"missing heading", "#nowhere", false},
		{"heading of another page", "sub/b.md#b", true},
		{"missing heading of another page", "sub/b.md#a", false},
		{"outside the repository", "../../../etc/passwd", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLink(root, page, tc.target)
			if (err == "") != tc.ok {
				t.Errorf("checkLink(%q) = %q, want ok %v", tc.target, err, tc.ok)
			}
		})
	}
	got := linkTargets("[a](x.md) `[b](y.md)` <https://example.com>\n```\n[c](z.md)\n```\n[d](https://example.com) [e](mailto:x@example.com) [f](w.md \"title\")\n")
	if strings.Join(got, ",") != "x.md,w.md" {
		t.Errorf("linkTargets = %q, want x.md and w.md", got)
	}
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// linkTargets returns the relative link targets of a Markdown text: inline
// links outside code blocks and code spans, without URLs that name a scheme.
func linkTargets(text string) []string {
	var out []string
	fence := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		line = codeSpanRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			if !schemeRE.MatchString(m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// checkLink returns why target, a link of the page at path, leads nowhere
// ("" when it leads to a file of the repository at root, and to one of
// its headings when it names one).
func checkLink(root, page, target string) string {
	file, frag, _ := strings.Cut(target, "#")
	dest := page
	if file != "" {
		dest = filepath.Clean(filepath.Join(filepath.Dir(page), filepath.FromSlash(file)))
	}
	if r, err := filepath.Rel(root, dest); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "outside the repository"
	}
	info, err := os.Stat(dest)
	if err != nil {
		return "no such file"
	}
	if frag == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(dest, ".md") {
		return "a heading of something that is not a Markdown page"
	}
	b, err := os.ReadFile(dest)
	if err != nil {
		return err.Error()
	}
	if !anchors(string(b))[frag] {
		return "no such heading"
	}
	return ""
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// text: lower case, letters, digits, '-' and '_' kept, spaces turned into
// '-', everything else dropped; a repeated anchor gets "-1", "-2", ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	fence := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if title == "" || title[0] != ' ' {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := count[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		count[a]++
	}
	return out
}

// TestWhereThingsLive checks the README's "Where things live" table
// against the tree: every path it names exists, every file it names after
// a path is in that path's directory, and every Go name it names after a
// path is declared there.
func TestWhereThingsLive(t *testing.T) {
	root := tools.Root(t)
	text := read(t, "README.md")
	start := strings.Index(text, "\n## Where things live\n")
	if start < 0 {
		t.Fatal("README.md has no section \"Where things live\"")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	token := regexp.MustCompile("`([^`]+)`")
	goName := regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	rows := 0
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| concept") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		rows++
		dir := ""
		for _, m := range token.FindAllStringSubmatch(cells[2], -1) {
			name := m[1]
			switch {
			case strings.Contains(name, "/"):
				p := filepath.Join(root, filepath.FromSlash(name))
				info, err := os.Stat(p)
				if err != nil {
					t.Errorf("Where things live: %s does not exist", name)
					continue
				}
				if info.IsDir() {
					dir = p
				} else {
					dir = filepath.Dir(p)
				}
			case strings.HasSuffix(name, ".go"):
				if _, err := os.Stat(filepath.Join(dir, name)); dir == "" || err != nil {
					t.Errorf("Where things live: %s is not in %s", name, dir)
				}
			case goName.MatchString(name):
				if dir == "" || !declares(t, dir, name) {
					t.Errorf("Where things live: %s is not declared in %s", name, dir)
				}
			}
		}
	}
	if rows < 30 {
		t.Errorf("Where things live has %d rows", rows)
	}
}

// declares reports whether a Go file of dir (not a test) declares name as a
// function, method or type.
func declares(t *testing.T, dir, name string) bool {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(func (\([^)]*\) )?|type )` + name + `\b`)
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(b) {
			return true
		}
	}
	return false
}
