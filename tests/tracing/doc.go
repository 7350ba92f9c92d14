// Package tracing checks deadletter's tracing end to end against a real
// Jaeger (the binary `make jaeger` builds, run by tests/internal/jaeger):
// one trace per event from publish to quarantine (also for an event
// published without a traceparent), the advisory path, redrives and
// corrections linked to it, no payload value in any span, and no exporter
// when tracing is off.
package tracing
