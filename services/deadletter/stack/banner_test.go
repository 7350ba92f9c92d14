package stack

import (
	"strings"
	"testing"

	"github.com/deadletter/deadletter/services/console"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// TestBannerTracing (issue 40, O6): the banner's Tracing line names the
// OTLP endpoint and the Jaeger query API as configured (never a fixed
// 16686), says that make jaeger-run's Jaeger has no UI and that the
// console's record pages are where traces are read, and leaves Jaeger out
// when tracing is off.
func TestBannerTracing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		console   bool
		jaegerURL string
		want      []string
		not       []string
	}{
		{
			name: "off", console: true, jaegerURL: "http://127.0.0.1:16686",
			want: []string{"off", "OTEL_EXPORTER_OTLP_ENDPOINT"},
			not:  []string{"Jaeger", "jaeger", "16686"},
		},
		{
			name: "off by OTEL_SDK_DISABLED though an endpoint is set", console: true,
			env:  map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318", telemetry.EnvSDKDisabled: "true"},
			want: []string{"off"}, not: []string{"4318", "Jaeger"},
		},
		{
			name: "a Jaeger elsewhere", console: true, jaegerURL: "http://jaeger.pharmacy.example:26686",
			env:  map[string]string{telemetry.EnvEndpoint: "http://jaeger.pharmacy.example:14318"},
			want: []string{"OTLP to http://jaeger.pharmacy.example:14318", "query API at http://jaeger.pharmacy.example:26686", "has no UI", "console's record pages"},
			not:  []string{"16686", "4318 "},
		},
		{
			name: "the traces endpoint before the general one", console: true, jaegerURL: "http://127.0.0.1:16686",
			env:  map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318", telemetry.EnvTracesEndpoint: "http://127.0.0.1:24318/v1/traces"},
			want: []string{"OTLP to http://127.0.0.1:24318/v1/traces", "query API at http://127.0.0.1:16686"},
		},
		{
			name: "no Jaeger query API for the console", console: true,
			env:  map[string]string{telemetry.EnvEndpoint: "http://collector.example:4318"},
			want: []string{"OTLP to http://collector.example:4318", "the console draws no traces", "DEADLETTER_CONSOLE_JAEGER_URL"},
			not:  []string{"16686"},
		},
		{
			name: "the console disabled", jaegerURL: "http://127.0.0.1:16686",
			env:  map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318"},
			want: []string{"OTLP to http://127.0.0.1:4318", "console is disabled"},
			not:  []string{"16686", "record pages"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{telemetry.EnvEndpoint, telemetry.EnvTracesEndpoint, telemetry.EnvSDKDisabled, telemetry.EnvTracesExporter} {
				t.Setenv(k, tc.env[k])
			}
			s := &Stack{cfg: Config{Console: console.Config{JaegerURL: tc.jaegerURL}}}
			if tc.console {
				s.Console = &console.Console{}
			}
			got := s.tracingState()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Tracing line lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("Tracing line names %q:\n%s", n, got)
				}
			}
		})
	}
}
