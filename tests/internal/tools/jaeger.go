package tools

import "testing"

// JaegerPackage is the Go package of Jaeger v2, pinned (v1.75.0) as a tool in
// deploy/tools/go.mod.
const JaegerPackage = "github.com/jaegertracing/jaeger/cmd/jaeger"

// Jaeger returns the Jaeger v2 binary: $JAEGER_BIN when set, else
// .cache/bin/jaeger, built from deploy/tools when missing (`make jaeger`
// builds the same file; a cold build takes several minutes and ~2 GB of RAM).
func Jaeger(tb testing.TB) string {
	return Binary(tb, "jaeger", "JAEGER_BIN", JaegerPackage)
}
