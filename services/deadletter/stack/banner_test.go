package stack

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/services/console"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// TestBannerTracing (issue 40, O6, O10): the banner's Tracing line names
// the OTLP endpoint and the Jaeger query API as configured (never a fixed
// 16686), says the console's record pages are where traces are read, where
// their "open in Jaeger" links go (the query API's Jaeger unless
// configured) and whether a Jaeger UI answers there (a real HTTP server
// serving the Go-built Jaeger's placeholder, or the UI's page): without
// one, the console's trace view is the way; it leaves Jaeger out when
// tracing is off.
func TestBannerTracing(t *testing.T) {
	// A Jaeger built from its Go module serves this page where its UI
	// would be; Jaeger's UI is titled "Jaeger UI".
	placeholder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`<!DOCTYPE html><title>Test Page</title><h1>This is not the Jaeger UI you are looking for!</h1>`))
	}))
	defer placeholder.Close()
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`<!doctype html><html lang="en"><head><title>Jaeger UI</title></head><body><div id="jaeger-ui-root"></div></body></html>`))
	}))
	defer ui.Close()
	for _, tc := range []struct {
		name      string
		env       map[string]string
		console   bool
		jaegerURL string
		// traceURLBase is the console's "open in Jaeger" links' base
		// ("" for the default).
		traceURLBase string
		want         []string
		not          []string
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
			name: "make jaeger-run's Jaeger: the placeholder where the links go", console: true, jaegerURL: placeholder.URL,
			env: map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318"},
			want: []string{"OTLP to http://127.0.0.1:4318", "console's record pages (http:///records/<dlq id>)", "query API at " + placeholder.URL,
				`"open in Jaeger" links go to ` + placeholder.URL + "/trace/<trace id>, where this Jaeger has no UI", "use the console's trace view"},
			not: []string{"16686"},
		},
		{
			name: "Jaeger's UI where the links go", console: true, jaegerURL: ui.URL,
			env:  map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318"},
			want: []string{"query API at " + ui.URL, `or in Jaeger's UI: the pages' "open in Jaeger" links go to ` + ui.URL + "/trace/<trace id>"},
			not:  []string{"no UI", "16686"},
		},
		{
			name: "links configured elsewhere than the query API, nothing answering there", console: true, jaegerURL: ui.URL,
			traceURLBase: "http://127.0.0.1:1/jaeger/trace/",
			env:          map[string]string{telemetry.EnvEndpoint: "http://127.0.0.1:4318"},
			want:         []string{`links go to http://127.0.0.1:1/jaeger/trace/<trace id>, where no Jaeger UI answers`, "use the console's trace view"},
			not:          []string{"Jaeger's UI:"},
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
			s := &Stack{cfg: Config{Console: console.Config{JaegerURL: tc.jaegerURL, TraceURLBase: tc.traceURLBase}}}
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
