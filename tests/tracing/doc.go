// Package tracing checks deadletter's tracing end to end against a real
// Jaeger (the binary `make jaeger` builds, run by tests/internal/jaeger):
// one trace per event from publish to quarantine, the advisory path, no
// payload value in any span, and no exporter when tracing is off.
package tracing
