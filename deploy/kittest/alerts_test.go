package kittest

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// proposed are the metrics the alerts and the dashboard need that no code
// registers yet (deploy/README.md lists them for the services to add).
// A name here that the code registers fails the test: take it off.
var proposed = []string{
	"deadletter_quarantine_open_records_by_party",
}

// promtool returns the promtool binary: .cache/bin (built by make
// promtool, which make test and make kit-test run first), else PATH.
// Missing, the test fails: a check skipped never passes.
func promtool(tb testing.TB) string {
	tb.Helper()
	if p := filepath.Join(repo, ".cache", "bin", "promtool"); fileExists(p) {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		tb.Fatal("promtool not found: run make promtool (builds it into .cache/bin), or put one on the PATH")
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestAlertRules runs promtool check rules and promtool test rules.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	dir := filepath.Join(repo, "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

var metricName = regexp.MustCompile(`\bdeadletter_[a-z_]+\b`)

// registered returns every deadletter_* metric name the code registers
// (string literals in the non-test Go files of services/ and shared/).
func registered(tb testing.TB) map[string]bool {
	tb.Helper()
	lit := regexp.MustCompile(`"(deadletter_[a-z_]+)"`)
	out := map[string]bool{}
	for _, root := range []string{"services", "shared"} {
		err := filepath.WalkDir(filepath.Join(repo, root), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, m := range lit.FindAllSubmatch(b, -1) {
				out[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	if len(out) == 0 {
		tb.Fatal("no registered metric found")
	}
	return out
}

// queried returns the deadletter_* names in exprs, histogram series
// suffixes removed.
func queried(exprs []string) []string {
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				n = strings.TrimSuffix(n, suf)
			}
			seen[n] = true
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ruleExprs returns the expr of every rule of a rules file.
func ruleExprs(tb testing.TB) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		tb.Fatal(err)
	}
	var exprs []string
	for _, line := range strings.Split(string(b), "\n") {
		if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			exprs = append(exprs, e)
		}
	}
	return exprs
}

// dashboardExprs decodes the Grafana dashboard and returns every panel's
// queries; a panel without one fails.
func dashboardExprs(tb testing.TB) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "grafana", "deadletter.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		tb.Fatal(err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		tb.Fatal("dashboard without uid or panels")
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 || p.Targets[0].Expr == "" {
			tb.Errorf("panel %q has no query", p.Title)
		}
		for _, t := range p.Targets {
			exprs = append(exprs, t.Expr)
		}
	}
	return exprs
}

// TestMetricNames checks every deadletter_* metric the rules and the
// dashboard query is registered by the code, or is a listed proposal that
// is not.
func TestMetricNames(t *testing.T) {
	reg := registered(t)
	for _, p := range proposed {
		if reg[p] {
			t.Errorf("%s is registered now: take it off the proposed list", p)
		}
	}
	for name, exprs := range map[string][]string{"alerts.yml": ruleExprs(t), "deadletter.json": dashboardExprs(t)} {
		t.Run(name, func(t *testing.T) {
			names := queried(exprs)
			if len(names) == 0 {
				t.Fatal("no deadletter metric queried")
			}
			for _, n := range names {
				if !reg[n] && !slices.Contains(proposed, n) {
					t.Errorf("%s queries %s, which no code registers", name, n)
				}
			}
		})
	}
}
