package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The record page draws a failure's trace itself, from Jaeger's query API
// (GET <JaegerURL>/api/traces/<trace id>), so an operator sees which
// services handled the event, how long each step took and where it failed
// without leaving the console. Spans carry ids, classes and codes, never
// payload values (shared/telemetry); the page escapes them like any text.

// Bounds of the trace fetch.
const (
	// traceTimeout bounds the fetch: the page renders without the trace
	// rather than wait on a slow Jaeger.
	traceTimeout = 3 * time.Second
	// traceMaxBytes bounds the answer read.
	traceMaxBytes = 8 << 20
	// traceMaxSpans bounds the rows drawn.
	traceMaxSpans = 300
)

// Trace errors, and how the page states them.
var (
	errTraceUnreachable = errors.New("jaeger: no answer")
	errTraceNotFound    = errors.New("jaeger: no such trace")
	errTraceBadAnswer   = errors.New("jaeger: unreadable answer")
)

const (
	problemUnreachable = "Jaeger did not answer"
	problemNotFound    = "Jaeger has no such trace (not exported, or older than its retention)"
	problemBadAnswer   = "Jaeger's answer could not be read"
)

// traceIDRe is a W3C/Jaeger trace id.
var traceIDRe = regexp.MustCompile(`^[0-9a-f]{16,32}$`)

// traceView is the trace section of the record page.
type traceView struct {
	// ID is the trace id ("" for a record without trace context).
	ID string
	// Configured is false when the console has no Jaeger query URL.
	Configured bool
	// Source is the Jaeger query URL the trace was read from.
	Source string
	// Problem says why no trace is drawn ("" when it is).
	Problem string
	// Services are the services of the trace, in order of appearance.
	Services []string
	// Total is the trace's span from first start to last end.
	Total time.Duration
	// Spans are the rows, parents before children, siblings by start.
	Spans []spanRow
	// More counts the spans beyond traceMaxSpans, not drawn.
	More int
	// Errors counts the spans whose status is Error.
	Errors int
}

// spanRow is one span of the drawing.
type spanRow struct {
	Service, Name string
	// Depth is the span's depth under its root (0 for a root).
	Depth int
	// Offset is the start after the trace's start; Duration its length.
	Offset, Duration time.Duration
	// Code is the span's deadletter.error_code (the failure's code, also
	// on the spans that carry the failed event on); Failed is its status
	// Error.
	Code   string
	Failed bool
	// X and W place the bar on a 0..1000 scale of the trace.
	X, W float64
}

// Indent is the span name's indentation (non-breaking spaces).
func (s spanRow) Indent() string { return strings.Repeat("\u00a0\u00a0", s.Depth) }

// jaegerTrace is the part of Jaeger's /api/traces/<id> answer drawn.
type jaegerTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		StartTime int64 `json:"startTime"` // µs since the epoch
		Duration  int64 `json:"duration"`  // µs
		Tags      []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
		ProcessID string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// traceOf reads trace id from the console's Jaeger and draws it; the
// view says why when it cannot.
func (p *recordPages) traceOf(ctx context.Context, id string) traceView {
	v := traceView{ID: id, Configured: p.jaegerURL != "", Source: p.jaegerURL}
	switch {
	case id == "":
		return v
	case !v.Configured:
		v.Problem = "no Jaeger query URL is configured (DEADLETTER_CONSOLE_JAEGER_URL)"
		return v
	case !traceIDRe.MatchString(id):
		v.Problem = "the record's trace id is not a trace id"
		return v
	}
	t, err := fetchTrace(ctx, p.jaegerURL, id)
	if err != nil {
		p.log.Warn("trace not read", "trace_id", id, "err", err)
		where := p.jaegerURL
		if u, perr := url.Parse(where); perr == nil {
			where = u.Redacted()
		}
		switch {
		case errors.Is(err, errTraceNotFound):
			v.Problem = problemNotFound
		case errors.Is(err, errTraceBadAnswer):
			v.Problem = problemBadAnswer + " (" + where + ")"
		default:
			v.Problem = problemUnreachable + " at " + where + " within " + traceTimeout.String()
		}
		return v
	}
	draw(&v, t)
	return v
}

// fetchTrace GETs base/api/traces/id within traceTimeout.
func fetchTrace(ctx context.Context, base, id string) (jaegerTrace, error) {
	ctx, cancel := context.WithTimeout(ctx, traceTimeout)
	defer cancel()
	u, err := url.JoinPath(base, "api", "traces", id)
	if err != nil {
		return jaegerTrace{}, fmt.Errorf("%w: %w", errTraceUnreachable, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return jaegerTrace{}, fmt.Errorf("%w: %w", errTraceUnreachable, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return jaegerTrace{}, fmt.Errorf("%w: %w", errTraceUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return jaegerTrace{}, fmt.Errorf("%w: HTTP 404", errTraceNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return jaegerTrace{}, fmt.Errorf("%w: HTTP %d", errTraceUnreachable, resp.StatusCode)
	}
	var r struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, traceMaxBytes)).Decode(&r); err != nil {
		return jaegerTrace{}, fmt.Errorf("%w: %w", errTraceBadAnswer, err)
	}
	if len(r.Data) == 0 || len(r.Data[0].Spans) == 0 {
		return jaegerTrace{}, fmt.Errorf("%w: no spans", errTraceNotFound)
	}
	return r.Data[0], nil
}

// draw fills v with t's spans: each root then its children depth first,
// siblings by start time, bars on the trace's time scale.
func draw(v *traceView, t jaegerTrace) {
	spans := t.Spans
	byID := map[string]int{}
	for i, s := range spans {
		byID[s.SpanID] = i
	}
	children := map[string][]int{}
	var roots []int
	start, end := spans[0].StartTime, spans[0].StartTime+spans[0].Duration
	for i, s := range spans {
		start, end = min(start, s.StartTime), max(end, s.StartTime+s.Duration)
		parent := ""
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
				parent = r.SpanID
			}
		}
		if _, ok := byID[parent]; ok && parent != s.SpanID {
			children[parent] = append(children[parent], i)
		} else {
			roots = append(roots, i)
		}
	}
	byStart := func(a, b int) int {
		if c := spans[a].StartTime - spans[b].StartTime; c != 0 {
			return int(max(-1, min(1, c)))
		}
		return strings.Compare(spans[a].SpanID, spans[b].SpanID)
	}
	slices.SortFunc(roots, byStart)
	total := float64(max(end-start, 1))
	v.Total = time.Duration(end-start) * time.Microsecond
	seen := map[int]bool{}
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if seen[i] {
			return
		}
		seen[i] = true
		s := spans[i]
		row := spanRow{
			Service: t.Processes[s.ProcessID].ServiceName, Name: s.OperationName, Depth: min(depth, 12),
			Offset: time.Duration(s.StartTime-start) * time.Microsecond, Duration: time.Duration(s.Duration) * time.Microsecond,
			X: 1000 * float64(s.StartTime-start) / total, W: max(2, 1000*float64(s.Duration)/total),
		}
		for _, kv := range s.Tags {
			switch {
			case kv.Key == "deadletter.error_code":
				row.Code = fmt.Sprint(kv.Value)
			case kv.Key == "error" && fmt.Sprint(kv.Value) == "true",
				kv.Key == "otel.status_code" && fmt.Sprint(kv.Value) == "ERROR":
				row.Failed = true
			}
		}
		if row.Failed {
			v.Errors++
		}
		if !slices.Contains(v.Services, row.Service) {
			v.Services = append(v.Services, row.Service)
		}
		if len(v.Spans) < traceMaxSpans {
			v.Spans = append(v.Spans, row)
		} else {
			v.More++
		}
		kids := children[s.SpanID]
		slices.SortFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
}

// ms writes a duration in milliseconds for people ("0.42 ms", "1250.0 ms").
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	if f < 10 {
		return fmt.Sprintf("%.2f ms", f)
	}
	return fmt.Sprintf("%.1f ms", f)
}

// Took is the span's duration for people.
func (s spanRow) Took() string { return ms(s.Duration) }

// At is the span's start after the trace's start, for people.
func (s spanRow) At() string { return "+" + ms(s.Offset) }

// TotalText is the trace's length for people.
func (v traceView) TotalText() string { return ms(v.Total) }
