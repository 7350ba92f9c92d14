package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Axe returns the path of axe-core's axe.min.js (from the npm registry,
// test-only): $AXE_JS when set, else .cache/npm/node_modules/axe-core,
// installed by `make axe` (which pins its version) when missing.
func Axe(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("AXE_JS"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	mu.Lock()
	defer mu.Unlock()
	root := Root(tb)
	js := filepath.Join(root, ".cache", "npm", "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(js); err == nil {
		return js
	}
	cmd := exec.Command("make", "-s", "axe")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("tools: make axe: %v\n%s", err, out)
	}
	return js
}
