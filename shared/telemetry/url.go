package telemetry

import "strings"

// DefaultTraceURLBase is where `make jaeger-run` serves Jaeger's trace view.
const DefaultTraceURLBase = "http://127.0.0.1:16686/trace/"

// TraceURL returns the Jaeger URL of a trace: base (DefaultTraceURLBase when
// empty) followed by the trace id, with exactly one slash between them. It
// returns "" when traceID is empty (a record without trace context).
func TraceURL(base, traceID string) string {
	if traceID == "" {
		return ""
	}
	if base == "" {
		base = DefaultTraceURLBase
	}
	return strings.TrimRight(base, "/") + "/" + traceID
}
