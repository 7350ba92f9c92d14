// Package tools locates (building on first use) the external programs the
// end-to-end tests drive: the nats CLI and Jaeger, pinned in
// deploy/tools/go.mod and cached in the git-ignored .cache/bin.
package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Root returns the repository root.
func Root(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("tools: cannot locate source")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

var mu sync.Mutex

// Binary returns the path of a pinned tool ("nats" or "jaeger"): the path in
// env var envName when set, else .cache/bin/<name>, built from
// deploy/tools when missing.
func Binary(tb testing.TB, name, envName, pkg string) string {
	tb.Helper()
	if p := os.Getenv(envName); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("tools: %s=%s: %v", envName, p, err)
		}
		return p
	}
	mu.Lock()
	defer mu.Unlock()
	root := Root(tb)
	bin := filepath.Join(root, ".cache", "bin", name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(root, "deploy", "tools")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("tools: build %s: %v\n%s", name, err, out)
	}
	return bin
}

// NATS returns the nats CLI (github.com/nats-io/natscli v0.5.0).
func NATS(tb testing.TB) string {
	return Binary(tb, "nats", "NATS_CLI", "github.com/nats-io/natscli/nats")
}

// GoBuild builds a main package of the workspace into dir and returns the
// binary's path.
func GoBuild(tb testing.TB, pkg, dir string) string {
	tb.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = Root(tb)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("tools: go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Run runs a command and returns its combined output, failing on error.
func Run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out)
	}
	return string(out)
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(tb testing.TB) int {
	tb.Helper()
	return freePort(tb)
}
