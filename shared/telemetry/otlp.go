package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// otlpExporter exports spans as OTLP/HTTP protobuf (an
// ExportTraceServiceRequest POSTed to <endpoint>/v1/traces), encoding them
// straight from the SDK's read-only spans into the wire format. The OTLP
// exporter of opentelemetry-go first copies every span into generated
// protobuf structs and then marshals those by reflection: on an ingest
// that traces every event, that was a third of what tracing cost. The wire
// format is the OTLP specification's (opentelemetry-proto, trace/v1);
// TestOTLPEncoding decodes it with the generated types and compares every
// field.
//
// Retries follow the OTLP/HTTP specification: 429, 502, 503 and 504 (and
// requests that time out) are retried with exponential back-off (honouring
// Retry-After) for at most retryFor; other failures are returned to the
// batch processor, which reports them and drops the batch.
type otlpExporter struct {
	url     string
	headers map[string]string
	gzip    bool
	client  *http.Client

	mu      sync.Mutex // one export at a time: the encoder's buffers
	enc     encoder
	stopped bool
}

// Retry schedule of an export refused with a retryable status.
const (
	retryFirst = 5 * time.Second
	retryMax   = 30 * time.Second
	retryFor   = time.Minute
)

var errExporterStopped = errors.New("telemetry: exporter is shut down")

// ExportSpans sends spans in one request.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errExporterStopped
	}
	body := e.enc.request(spans)
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		body = buf.Bytes()
	}
	start := time.Now()
	wait := retryFirst
	for {
		retry, after, err := e.post(ctx, body)
		if !retry {
			return err
		}
		if after <= 0 {
			after = wait/2 + rand.N(wait/2+1) // ±50 % jitter, as the exporters do
			wait = min(2*wait, retryMax)
		}
		if time.Since(start)+after > retryFor {
			return fmt.Errorf("telemetry: export gave up after %s: %w", time.Since(start).Round(time.Second), err)
		}
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("telemetry: export: %w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// post sends body once; retry reports a retryable refusal, with the wait
// the server asked for (Retry-After) if any.
func (e *otlpExporter) post(ctx context.Context, body []byte) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// A timed-out request is retried; a refused or reset connection
		// (no collector there) fails the batch at once, as the SDK's
		// exporter does, so that a missing collector never holds a
		// shutdown for the retry period.
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil, 0, fmt.Errorf("telemetry: export: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return false, 0, nil
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return true, after, fmt.Errorf("telemetry: export: collector answered %s", resp.Status)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, 0, nil
	}
	return false, 0, fmt.Errorf("telemetry: export: collector answered %s", resp.Status)
}

// Shutdown stops exporting; the batch processor has flushed before it.
func (e *otlpExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	return ctx.Err()
}

// newOTLPExporter returns the exporter for cfg and the environment, or
// ok false when the environment asks for something it does not do (a
// collector URL that is not http(s)); then the SDK's exporter is used.
func newOTLPExporter(cfg Config, client *http.Client) (exp *otlpExporter, ok bool) {
	u := tracesURL(cfg)
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, false
	}
	return &otlpExporter{
		url:     u,
		headers: envHeaders(),
		gzip:    strings.EqualFold(strings.TrimSpace(envTraces("COMPRESSION")), "gzip"),
		client:  client,
	}, true
}

// tracesURL is where spans are posted: cfg.Endpoint or
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended, unless
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT gives the whole URL.
func tracesURL(cfg Config) string {
	if cfg.Endpoint != "" {
		return strings.TrimRight(cfg.Endpoint, "/") + "/v1/traces"
	}
	if v := strings.TrimSpace(os.Getenv(EnvTracesEndpoint)); v != "" {
		return v
	}
	return strings.TrimRight(strings.TrimSpace(os.Getenv(EnvEndpoint)), "/") + "/v1/traces"
}

// envTraces returns OTEL_EXPORTER_OTLP_TRACES_<name>, else
// OTEL_EXPORTER_OTLP_<name>.
func envTraces(name string) string {
	if v, ok := os.LookupEnv("OTEL_EXPORTER_OTLP_TRACES_" + name); ok {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_" + name)
}

// envHeaders parses OTEL_EXPORTER_OTLP_[TRACES_]HEADERS: comma-separated
// key=value pairs, values URL-encoded. A malformed pair is skipped.
func envHeaders() map[string]string {
	h := map[string]string{}
	for _, pair := range strings.Split(envTraces("HEADERS"), ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if dv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			h[k] = dv
		}
	}
	return h
}

// encoder writes ExportTraceServiceRequest messages into buffers it keeps.
type encoder struct {
	req, rs, ss, span, tmp []byte
	// resources caches each resource's encoded Resource message.
	resources map[*resource.Resource][]byte
}

// OTLP field numbers (opentelemetry/proto/trace/v1/trace.proto,
// common/v1/common.proto, resource/v1/resource.proto,
// collector/trace/v1/trace_service.proto).
const (
	fRequestResourceSpans = 1

	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3

	fResourceAttributes = 1
	fResourceDropped    = 2

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3

	fScopeName       = 1
	fScopeVersion    = 2
	fScopeAttributes = 3

	fSpanTraceID      = 1
	fSpanSpanID       = 2
	fSpanTraceState   = 3
	fSpanParentSpanID = 4
	fSpanName         = 5
	fSpanKind         = 6
	fSpanStart        = 7
	fSpanEnd          = 8
	fSpanAttributes   = 9
	fSpanDroppedAttrs = 10
	fSpanEvents       = 11
	fSpanDroppedEvts  = 12
	fSpanLinks        = 13
	fSpanDroppedLinks = 14
	fSpanStatus       = 15
	fSpanFlags        = 16

	fEventTime       = 1
	fEventName       = 2
	fEventAttributes = 3
	fEventDropped    = 4

	fLinkTraceID    = 1
	fLinkSpanID     = 2
	fLinkTraceState = 3
	fLinkAttributes = 4
	fLinkDropped    = 5
	fLinkFlags      = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fListValues = 1 // ArrayValue.values and KeyValueList.values

	// Span flags: the low 8 bits are the W3C trace flags.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// request encodes spans, grouped by resource and instrumentation scope in
// the order they first appear. The result is valid until the next call.
func (e *encoder) request(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeGroup struct {
		scope instrumentation.Scope
		spans []sdktrace.ReadOnlySpan
	}
	type resourceGroup struct {
		key    attribute.Distinct
		res    *resource.Resource
		scopes []scopeGroup
	}
	var groups []resourceGroup
	for _, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		key := res.Equivalent()
		gi := -1
		for i := range groups {
			if groups[i].key == key {
				gi = i
				break
			}
		}
		if gi < 0 {
			groups = append(groups, resourceGroup{key: key, res: res})
			gi = len(groups) - 1
		}
		g := &groups[gi]
		si := -1
		for i := range g.scopes {
			if g.scopes[i].scope == scope {
				si = i
				break
			}
		}
		if si < 0 {
			g.scopes = append(g.scopes, scopeGroup{scope: scope})
			si = len(g.scopes) - 1
		}
		g.scopes[si].spans = append(g.scopes[si].spans, s)
	}
	e.req = e.req[:0]
	for _, g := range groups {
		e.rs = appendMessage(e.rs[:0], fResourceSpansResource, e.resource(g.res))
		for _, sg := range g.scopes {
			e.ss = e.ss[:0]
			e.tmp = appendScope(e.tmp[:0], sg.scope)
			e.ss = appendMessage(e.ss, fScopeSpansScope, e.tmp)
			for _, s := range sg.spans {
				e.span = appendSpan(e.span[:0], s)
				e.ss = appendMessage(e.ss, fScopeSpansSpans, e.span)
			}
			e.ss = appendString(e.ss, fScopeSpansSchemaURL, sg.scope.SchemaURL)
			e.rs = appendMessage(e.rs, fResourceSpansScopeSpans, e.ss)
		}
		if g.res != nil {
			e.rs = appendString(e.rs, fResourceSpansSchemaURL, g.res.SchemaURL())
		}
		e.req = appendMessage(e.req, fRequestResourceSpans, e.rs)
	}
	return e.req
}

// resource returns the encoded Resource message of r, cached.
func (e *encoder) resource(r *resource.Resource) []byte {
	if b, ok := e.resources[r]; ok {
		return b
	}
	var b []byte
	if r != nil {
		for _, kv := range r.Attributes() {
			b = appendKeyValue(b, fResourceAttributes, kv)
		}
	}
	if e.resources == nil {
		e.resources = map[*resource.Resource][]byte{}
	}
	if len(e.resources) > 64 { // resources are per provider: never many
		clear(e.resources)
	}
	e.resources[r] = b
	return b
}

func appendScope(b []byte, s instrumentation.Scope) []byte {
	b = appendString(b, fScopeName, s.Name)
	b = appendString(b, fScopeVersion, s.Version)
	for _, kv := range s.Attributes.ToSlice() {
		b = appendKeyValue(b, fScopeAttributes, kv)
	}
	return b
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	b = appendString(b, fSpanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = protowire.AppendTag(b, fSpanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, psid[:])
	}
	b = appendString(b, fSpanName, s.Name())
	if k := spanKind(s.SpanKind()); k != 0 {
		b = protowire.AppendTag(b, fSpanKind, protowire.VarintType)
		b = protowire.AppendVarint(b, k)
	}
	b = appendTime(b, fSpanStart, s.StartTime())
	b = appendTime(b, fSpanEnd, s.EndTime())
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b = appendCount(b, fSpanDroppedAttrs, s.DroppedAttributes())
	for _, ev := range s.Events() {
		b = appendEvent(b, ev)
	}
	b = appendCount(b, fSpanDroppedEvts, s.DroppedEvents())
	for _, l := range s.Links() {
		b = appendLink(b, l)
	}
	b = appendCount(b, fSpanDroppedLinks, s.DroppedLinks())
	// Status is always present, as the SDK's exporter writes it.
	st := s.Status()
	var code uint64
	switch st.Code {
	case codes.Ok:
		code = 1
	case codes.Error:
		code = 2
	}
	stSize := 0
	if st.Description != "" {
		stSize += sizeString(fStatusMessage, st.Description)
	}
	if code != 0 {
		stSize += 1 + protowire.SizeVarint(code)
	}
	b = protowire.AppendTag(b, fSpanStatus, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(stSize))
	b = appendString(b, fStatusMessage, st.Description)
	if code != 0 {
		b = protowire.AppendTag(b, fStatusCode, protowire.VarintType)
		b = protowire.AppendVarint(b, code)
	}
	b = protowire.AppendTag(b, fSpanFlags, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, spanFlags(sc.TraceFlags(), parent))
}

// spanKind maps a span kind to OTLP's SpanKind (the same numbers; 0 for an
// unknown kind).
func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer:
		return uint64(k)
	}
	return 0
}

// spanFlags are the W3C trace flags plus whether the parent (or a link's
// span) is remote.
func spanFlags(tf trace.TraceFlags, other trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if other.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func appendEvent(b []byte, ev sdktrace.Event) []byte {
	var body []byte
	body = appendTime(body, fEventTime, ev.Time)
	body = appendString(body, fEventName, ev.Name)
	for _, kv := range ev.Attributes {
		body = appendKeyValue(body, fEventAttributes, kv)
	}
	body = appendCount(body, fEventDropped, ev.DroppedAttributeCount)
	return appendMessage(b, fSpanEvents, body)
}

func appendLink(b []byte, l sdktrace.Link) []byte {
	var body []byte
	tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
	body = protowire.AppendTag(body, fLinkTraceID, protowire.BytesType)
	body = protowire.AppendBytes(body, tid[:])
	body = protowire.AppendTag(body, fLinkSpanID, protowire.BytesType)
	body = protowire.AppendBytes(body, sid[:])
	body = appendString(body, fLinkTraceState, l.SpanContext.TraceState().String())
	for _, kv := range l.Attributes {
		body = appendKeyValue(body, fLinkAttributes, kv)
	}
	body = appendCount(body, fLinkDropped, l.DroppedAttributeCount)
	body = protowire.AppendTag(body, fLinkFlags, protowire.Fixed32Type)
	body = protowire.AppendFixed32(body, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
	return appendMessage(b, fSpanLinks, body)
}

// appendMessage appends field num holding the encoded message body.
func appendMessage(b []byte, num protowire.Number, body []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// appendString appends field num unless s is empty (proto3's default).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func sizeString(num protowire.Number, s string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// appendTime appends a fixed64 Unix-nanosecond time (0 before 1970).
func appendTime(b []byte, num protowire.Number, t time.Time) []byte {
	ns := t.UnixNano()
	if ns <= 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, uint64(ns))
}

// appendCount appends a uint32 count unless it is 0.
func appendCount(b []byte, num protowire.Number, n int) []byte {
	if n <= 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(min(n, math.MaxUint32)))
}

// appendKeyValue appends field num holding a KeyValue. Scalar values, all a
// span of deadletter carries, are written without an intermediate buffer.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	var nested []byte // the AnyValue body of a list or map
	v := kv.Value
	var anySize int
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.BOOL:
		anySize = protowire.SizeTag(fAnyBool) + 1
	case attribute.INT64:
		anySize = protowire.SizeTag(fAnyInt) + protowire.SizeVarint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		anySize = protowire.SizeTag(fAnyDouble) + 8
	case attribute.STRING:
		anySize = sizeString(fAnyString, v.AsString())
	default:
		nested = appendAnyValue(nil, v)
		anySize = len(nested)
	}
	kvSize := protowire.SizeTag(fKeyValueValue) + protowire.SizeBytes(anySize)
	if kv.Key != "" {
		kvSize += sizeString(fKeyValueKey, string(kv.Key))
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(kvSize))
	b = appendString(b, fKeyValueKey, string(kv.Key))
	b = protowire.AppendTag(b, fKeyValueValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(anySize))
	if nested != nil {
		return append(b, nested...)
	}
	return appendAnyValue(b, v)
}

// appendAnyValue appends the body of the AnyValue of v. A oneof member is
// written even when it holds its type's zero value.
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		var list []byte
		for _, kv := range v.AsMap() {
			list = appendKeyValue(list, fListValues, kv)
		}
		return appendMessage(b, fAnyKVList, list)
	}
	return b // EMPTY: an AnyValue with no value
}

// appendArray appends the AnyValue field holding an ArrayValue of xs, each
// made an attribute value by val.
func appendArray[T any](b []byte, xs []T, val func(T) attribute.Value) []byte {
	var list []byte
	for _, x := range xs {
		list = appendMessage(list, fListValues, appendAnyValue(nil, val(x)))
	}
	return appendMessage(b, fAnyArray, list)
}
