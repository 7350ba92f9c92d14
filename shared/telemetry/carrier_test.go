package telemetry

import (
	"context"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const (
	testTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID      = "00f067aa0ba902b7"
	testTraceparent = "00-" + testTraceID + "-" + testSpanID + "-01"
)

func TestCarrierGet(t *testing.T) {
	tests := []struct {
		name   string
		header nats.Header
		key    string
		want   string
		values []string
	}{
		{"exact key", nats.Header{"traceparent": {testTraceparent}}, "traceparent", testTraceparent, []string{testTraceparent}},
		{"other case found", nats.Header{"Traceparent": {testTraceparent}}, "traceparent", testTraceparent, []string{testTraceparent}},
		{"exact key wins over a case variant", nats.Header{"Traceparent": {"other"}, "traceparent": {testTraceparent}}, "traceparent", testTraceparent, []string{testTraceparent}},
		{"first of several values", nats.Header{"tracestate": {"a=1", "b=2"}}, "tracestate", "a=1", []string{"a=1", "b=2"}},
		{"absent", nats.Header{"Nats-Msg-Id": {"x"}}, "traceparent", "", nil},
		{"nil header", nil, "traceparent", "", nil},
		{"empty value list", nats.Header{"traceparent": {}}, "traceparent", "", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Carrier(tc.header)
			if got := c.Get(tc.key); got != tc.want {
				t.Errorf("Get(%q) = %q, want %q", tc.key, got, tc.want)
			}
			if got := c.Values(tc.key); !slices.Equal(got, tc.values) {
				t.Errorf("Values(%q) = %q, want %q", tc.key, got, tc.values)
			}
		})
	}
}

func TestCarrierSet(t *testing.T) {
	tests := []struct {
		name   string
		header nats.Header
		want   nats.Header
	}{
		{"new key", nats.Header{"Nats-Msg-Id": {"x"}}, nats.Header{"Nats-Msg-Id": {"x"}, "traceparent": {"v"}}},
		{"replaces every value", nats.Header{"traceparent": {"a", "b"}}, nats.Header{"traceparent": {"v"}}},
		{"removes case variants", nats.Header{"Traceparent": {"a"}, "TRACEPARENT": {"b"}}, nats.Header{"traceparent": {"v"}}},
		{"leaves other keys alone", nats.Header{"Deadletter-Dlq-Id": {"d"}}, nats.Header{"Deadletter-Dlq-Id": {"d"}, "traceparent": {"v"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Carrier(tc.header)
			c.Set("traceparent", "v")
			if len(c) != len(tc.want) {
				t.Fatalf("header %v, want %v", c, tc.want)
			}
			for k, v := range tc.want {
				if !slices.Equal(c[k], v) {
					t.Errorf("header[%q] = %q, want %q", k, c[k], v)
				}
			}
		})
	}
}

func TestCarrierKeys(t *testing.T) {
	c := Carrier(nats.Header{"traceparent": {"a"}, "Tracestate": {"b"}, "Nats-Msg-Id": {"c"}})
	got := c.Keys()
	slices.Sort(got)
	if want := []string{"Nats-Msg-Id", "Tracestate", "traceparent"}; !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q (as stored, not canonicalized)", got, want)
	}
	if got := Carrier(nil).Keys(); len(got) != 0 {
		t.Errorf("Keys() of nil = %q", got)
	}
}

// TestCarrierRoundTrip injects with the W3C propagator into a nats.Header
// and extracts the same span context, including from a header whose names
// a gateway rewrote in another case.
func TestCarrierRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex(testTraceID)
	sid, _ := trace.SpanIDFromHex(testSpanID)
	ts, _ := trace.ParseTraceState("vendor=abc")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	prop := propagation.TraceContext{}
	h := nats.Header{}
	prop.Inject(trace.ContextWithSpanContext(context.Background(), sc), Carrier(h))
	if got := h["traceparent"]; !slices.Equal(got, []string{testTraceparent}) {
		t.Fatalf("traceparent = %q, want %q", got, testTraceparent)
	}
	if got := h["tracestate"]; !slices.Equal(got, []string{"vendor=abc"}) {
		t.Fatalf("tracestate = %q", got)
	}
	tests := []struct {
		name   string
		header nats.Header
	}{
		{"as injected", h},
		{"names in another case", nats.Header{"Traceparent": h["traceparent"], "TraceState": h["tracestate"]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := trace.SpanContextFromContext(prop.Extract(context.Background(), Carrier(tc.header)))
			if got.TraceID() != tid || got.SpanID() != sid || !got.IsSampled() || got.TraceState().Get("vendor") != "abc" || !got.IsRemote() {
				t.Errorf("extracted %+v", got)
			}
		})
	}
}
