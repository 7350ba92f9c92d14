package console

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// jaegerAnswer is a trace as Jaeger's /api/traces/<id> answers it: a
// publish, its validation that failed, the dead-letter send and the
// quarantine; the span names carry markup (escaped by the page).
const jaegerAnswer = `{"data":[{"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spans":[
{"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"c3","operationName":"quarantine dlq.intake.dscsa","references":[{"refType":"CHILD_OF","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"b2"}],"startTime":1000300,"duration":200,"tags":[{"key":"deadletter.error_code","type":"string","value":"GTIN_CHECK_DIGIT_FAILED"}],"processID":"p3"},
{"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"a1","operationName":"send events.dscsa.shipping","references":[],"startTime":1000000,"duration":1000,"tags":[],"processID":"p1"},
{"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"b1","operationName":"validate <Müller & Söhne>","references":[{"refType":"CHILD_OF","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"a1"}],"startTime":1000100,"duration":150,"tags":[{"key":"otel.status_code","type":"string","value":"ERROR"}],"processID":"p2"},
{"traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"b2","operationName":"send dlq.intake.dscsa","references":[{"refType":"CHILD_OF","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"b1"}],"startTime":1000200,"duration":50,"tags":[],"processID":"p2"}
],"processes":{"p1":{"serviceName":"test-publisher"},"p2":{"serviceName":"deadletter-validator"},"p3":{"serviceName":"deadletter-quarantiner"}}}]}`

// TestTraceView: the drawing of a trace and what the page says when it
// cannot draw one.
func TestTraceView(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	jaeger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/traces/" + id:
			_, _ = w.Write([]byte(jaegerAnswer))
		case "/api/traces/" + strings.Repeat("0", 31) + "1":
			http.Error(w, `{"data":null,"errors":[{"code":404,"msg":"trace not found"}]}`, http.StatusNotFound)
		default:
			_, _ = w.Write([]byte("<html>not json"))
		}
	}))
	defer jaeger.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "http://" + closed.Addr().String()
	closed.Close()

	cases := []struct {
		name, url, id, problem string
	}{
		{name: "no trace context", url: jaeger.URL, id: ""},
		{name: "not configured", url: "", id: id, problem: "no Jaeger query URL is configured (DEADLETTER_CONSOLE_JAEGER_URL)"},
		{name: "unreachable", url: nowhere, id: id, problem: "Jaeger did not answer at " + nowhere + " within 3s"},
		{name: "credentials redacted", url: "http://ops:s3cret@" + closed.Addr().String(), id: id, problem: "http://ops:xxxxx@"},
		{name: "unknown trace", url: jaeger.URL, id: strings.Repeat("0", 31) + "1", problem: "Jaeger has no such trace"},
		{name: "not json", url: jaeger.URL, id: strings.Repeat("a", 32), problem: "Jaeger's answer could not be read"},
		{name: "not a trace id", url: jaeger.URL, id: "../../api/services", problem: "not a trace id"},
		{name: "drawn", url: jaeger.URL, id: id},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			con := &recordPages{web: web{log: slog.New(slog.DiscardHandler)}, jaegerURL: c.url}
			v := con.traceOf(context.Background(), c.id)
			if !strings.Contains(v.Problem, c.problem) || (c.problem == "") != (v.Problem == "") {
				t.Fatalf("problem %q, want %q", v.Problem, c.problem)
			}
			if strings.Contains(v.Problem, "s3cret") {
				t.Errorf("the page would show a password: %q", v.Problem)
			}
			if c.name != "drawn" {
				if len(v.Spans) != 0 {
					t.Errorf("spans drawn: %+v", v.Spans)
				}
				return
			}
			var got []string
			for _, s := range v.Spans {
				got = append(got, s.Indent()+s.Name)
			}
			want := []string{"send events.dscsa.shipping", "\u00a0\u00a0validate <Müller & Söhne>",
				"\u00a0\u00a0\u00a0\u00a0send dlq.intake.dscsa", "\u00a0\u00a0\u00a0\u00a0\u00a0\u00a0quarantine dlq.intake.dscsa"}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("rows %q, want %q", got, want)
			}
			if strings.Join(v.Services, ",") != "test-publisher,deadletter-validator,deadletter-quarantiner" {
				t.Errorf("services %v", v.Services)
			}
			if v.Total != time.Millisecond || v.Errors != 1 || v.Spans[3].Code != "GTIN_CHECK_DIGIT_FAILED" || !v.Spans[1].Failed || v.Spans[2].Failed || v.Spans[3].Failed {
				t.Errorf("total %v errors %d rows %+v", v.Total, v.Errors, v.Spans)
			}
			if q := v.Spans[3]; q.X != 300 || q.W != 200 || q.At() != "+0.30 ms" || q.Took() != "0.20 ms" {
				t.Errorf("quarantine bar x %v w %v at %s took %s", q.X, q.W, q.At(), q.Took())
			}
		})
	}
}

// TestTraceSection renders the record page's trace section: escaped span
// names, the error code, and the problem when there is one.
func TestTraceSection(t *testing.T) {
	var v traceView
	var r struct{ Data []jaegerTrace }
	if err := json.Unmarshal([]byte(jaegerAnswer), &r); err != nil {
		t.Fatal(err)
	}
	tr := r.Data[0]
	v.ID, v.Configured, v.Source = tr.TraceID, true, "http://127.0.0.1:16686"
	draw(&v, tr)
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		trace traceView
		want  []string
		not   []string
	}{
		{name: "drawn", trace: v, want: []string{"validate &lt;Müller &amp; Söhne&gt;", `<code>GTIN_CHECK_DIGIT_FAILED</code>`,
			"<strong>deadletter-quarantiner</strong>", `<rect x="300.0" y="0" width="200.0"`, "4 spans", "1 failed"}, not: []string{"<Müller"}},
		{name: "jaeger down", trace: traceView{ID: tr.TraceID, Configured: true, Problem: "Jaeger did not answer at http://127.0.0.1:1 within 3s"},
			want: []string{"cannot be shown here: Jaeger did not answer at http://127.0.0.1:1 within 3s."}},
		{name: "no trace", trace: traceView{}, want: []string{"This record carries no trace context."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &recordData{ID: "dscsa_x", Trace: c.trace}
			d.State.DLQID = "dscsa_x"
			var b strings.Builder
			if err := p.byName["record"].ExecuteTemplate(&b, "layout", &view{Title: "Record dscsa_x", Nav: "records", Data: d}); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("page has %q", w)
				}
			}
		})
	}
}
