// Package jaeger runs a real Jaeger v2 (the binary `make jaeger` builds) for
// a test: in memory, every listener on a free 127.0.0.1 port, no batch
// processor (a span is queryable as soon as it is received), stopped at
// cleanup. It also reads traces back through Jaeger's HTTP query API.
package jaeger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/deadletter/deadletter/tests/internal/tools"
)

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLPHTTP is the OTLP/HTTP base URL ("http://127.0.0.1:<port>"), what
	// OTEL_EXPORTER_OTLP_ENDPOINT or telemetry.Config.Endpoint take.
	OTLPHTTP string
	// OTLPGRPC is the OTLP/gRPC address ("127.0.0.1:<port>").
	OTLPGRPC string
	// QueryURL is the base URL of the query API and UI.
	QueryURL string

	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
}

// config is deploy/jaeger/config.yaml with the ports as parameters.
var config = template.Must(template.New("config").Parse(`service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{{.Health}}
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{{.Query}}
    grpc:
      endpoint: 127.0.0.1:{{.QueryGRPC}}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{{.GRPC}}
      http:
        endpoint: 127.0.0.1:{{.HTTP}}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`))

// startAttempts bounds how often Start tries fresh ports: a port
// tools.FreePort found free may be taken by another test's server before
// Jaeger binds it.
const startAttempts = 3

// errPortTaken: Jaeger exited at start-up because a port was taken.
var errPortTaken = errors.New("jaeger: a port was taken before jaeger bound it")

// Start runs Jaeger on free loopback ports with a generated configuration
// and waits until it reports healthy; when another process took one of
// the ports first, it starts again on fresh ones (startAttempts). It is
// stopped (SIGTERM, then SIGKILL) at cleanup; its log is printed if the
// test failed.
func Start(tb testing.TB) *Jaeger {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		j, err := start(tb)
		if err == nil {
			return j
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			tb.Fatal(err)
		}
		tb.Logf("jaeger: start attempt %d: %v; again on fresh ports", attempt, err)
	}
}

// start is one attempt of Start.
func start(tb testing.TB) (*Jaeger, error) {
	tb.Helper()
	bin := tools.Jaeger(tb)
	ports := struct{ Health, Query, QueryGRPC, GRPC, HTTP int }{
		tools.FreePort(tb), tools.FreePort(tb), tools.FreePort(tb), tools.FreePort(tb), tools.FreePort(tb),
	}
	var cfg bytes.Buffer
	if err := config.Execute(&cfg, ports); err != nil {
		return nil, fmt.Errorf("jaeger: config: %w", err)
	}
	path := filepath.Join(tb.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, cfg.Bytes(), 0o600); err != nil {
		return nil, fmt.Errorf("jaeger: %w", err)
	}
	j := &Jaeger{
		OTLPHTTP: fmt.Sprintf("http://127.0.0.1:%d", ports.HTTP),
		OTLPGRPC: fmt.Sprintf("127.0.0.1:%d", ports.GRPC),
		QueryURL: fmt.Sprintf("http://127.0.0.1:%d", ports.Query),
		logs:     &syncBuffer{},
		exited:   make(chan struct{}),
	}
	j.cmd = exec.Command(bin, "--config", path)
	j.cmd.Stdout, j.cmd.Stderr = j.logs, j.logs
	setParentDeathSignal(j.cmd)
	if err := j.cmd.Start(); err != nil {
		return nil, fmt.Errorf("jaeger: start %s: %w", bin, err)
	}
	go func() {
		_ = j.cmd.Wait()
		close(j.exited)
	}()
	tb.Cleanup(func() {
		j.stop()
		if tb.Failed() {
			tb.Logf("jaeger log:\n%s", j.logs.String())
		}
	})
	health := fmt.Sprintf("http://127.0.0.1:%d/status", ports.Health)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-j.exited:
			if strings.Contains(j.logs.String(), "address already in use") {
				return nil, errPortTaken
			}
			return nil, fmt.Errorf("jaeger exited at start-up:\n%s", j.logs.String())
		default:
		}
		var st struct {
			Healthy bool `json:"healthy"`
		}
		err := getJSON(health, &st)
		if err == nil && st.Healthy {
			return j, nil
		}
		if time.Now().After(deadline) {
			j.stop()
			return nil, fmt.Errorf("jaeger not healthy after 30 s (%v):\n%s", err, j.logs.String())
		}
		select {
		case <-j.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop terminates Jaeger and waits for it.
func (j *Jaeger) stop() {
	select {
	case <-j.exited:
		return
	default:
	}
	_ = j.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-j.exited:
	case <-time.After(5 * time.Second):
		_ = j.cmd.Process.Kill()
		<-j.exited
	}
}

// Logs returns what Jaeger has written so far.
func (j *Jaeger) Logs() string { return j.logs.String() }

// Services lists the service names Jaeger has spans of.
func (j *Jaeger) Services() ([]string, error) {
	var r struct {
		Data []string `json:"data"`
	}
	err := getJSON(j.QueryURL+"/api/services", &r)
	return r.Data, err
}

// Traces returns the traces with a span of service (the query API's search:
// last hour, at most 1000).
func (j *Jaeger) Traces(service string) ([]Trace, error) {
	q := url.Values{"service": {service}, "lookback": {"1h"}, "limit": {"1000"}}
	var r struct {
		Data []Trace `json:"data"`
	}
	err := getJSON(j.QueryURL+"/api/traces?"+q.Encode(), &r)
	return r.Data, err
}

// Trace returns one trace by its hex id.
func (j *Jaeger) Trace(id string) (Trace, error) {
	var r struct {
		Data []Trace `json:"data"`
	}
	if err := getJSON(j.QueryURL+"/api/traces/"+id, &r); err != nil {
		return Trace{}, err
	}
	if len(r.Data) != 1 {
		return Trace{}, fmt.Errorf("jaeger: trace %s: %d results", id, len(r.Data))
	}
	return r.Data[0], nil
}

// Trace is a trace as Jaeger's query API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Process is the emitting service of spans.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Span is one span.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []KeyValue  `json:"tags"`
	Logs          []Log       `json:"logs"`
	ProcessID     string      `json:"processID"`
}

// Reference is a parent (CHILD_OF) or a link (FOLLOWS_FROM).
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag or a log field.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Log is a span event.
type Log struct {
	Timestamp int64      `json:"timestamp"`
	Fields    []KeyValue `json:"fields"`
}

// Service returns the service name of span s.
func (t Trace) Service(s Span) string { return t.Processes[s.ProcessID].ServiceName }

// Find returns the spans of service whose operation name starts with prefix.
func (t Trace) Find(service, prefix string) []Span {
	var out []Span
	for _, s := range t.Spans {
		if t.Service(s) == service && strings.HasPrefix(s.OperationName, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// Span returns the span with id, if the trace has it.
func (t Trace) Span(id string) (Span, bool) {
	for _, s := range t.Spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return Span{}, false
}

// Parent returns the span id of s's parent ("" for a root).
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// Tag returns the value of tag key as a string ("" when absent).
func (s Span) Tag(key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// HasEvent reports whether s recorded an event (a log with event=name).
func (s Span) HasEvent(name string) bool {
	for _, l := range s.Logs {
		for _, f := range l.Fields {
			if f.Key == "event" && fmt.Sprint(f.Value) == name {
				return true
			}
		}
	}
	return false
}

func getJSON(u string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jaeger: GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// syncBuffer is a bytes.Buffer safe for the process's writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
