package telemetry

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

// ScopeName is the instrumentation scope of deadletter's spans.
const ScopeName = "github.com/deadletter/deadletter"

// Attribute keys deadletter adds to the OpenTelemetry conventions. None ever
// holds a payload value.
const (
	// DLQIDKey is the quarantine chain id of the event.
	DLQIDKey = attribute.Key("deadletter.dlq_id")
	// DomainKey is the event's domain (pharmacy, dscsa, fsma, unknown).
	DomainKey = attribute.Key("deadletter.domain")
	// FailureClassKey is validation, exhausted, poison, or transient for
	// an attempt that will be retried.
	FailureClassKey = attribute.Key("deadletter.failure_class")
	// ErrorCodeKey is the failure's code (shared/codes).
	ErrorCodeKey = attribute.Key("deadletter.error_code")
	// RedriveCountKey is the replay's number (0 for the original).
	RedriveCountKey = attribute.Key("deadletter.redrive_count")
	// OriginalTraceIDKey, on a redrive, is the trace id of the original
	// event's trace (also a span link).
	OriginalTraceIDKey = attribute.Key("deadletter.original_trace_id")
	// OutcomeKey is what a step did: committed, duplicate, structural,
	// transient, exhausted, quarantined, already_quarantined, ...
	OutcomeKey = attribute.Key("deadletter.outcome")
	// StageKey is where a failure happened: validate, commit, redrive.
	StageKey = attribute.Key("deadletter.stage")
	// LinkKey names what a span link points at: original, drain, advisory.
	LinkKey = attribute.Key("deadletter.link")
	// LedgerSequenceKey is the LEDGER sequence an event was committed at,
	// on a validate span that stands for its commit too (no downstream).
	LedgerSequenceKey = attribute.Key("deadletter.ledger_seq")

	// JetStream positions. The messaging conventions have no NATS
	// attributes; these follow their messaging.<system>.* pattern.
	StreamKey        = attribute.Key("messaging.nats.jetstream.stream")
	SequenceKey      = attribute.Key("messaging.nats.jetstream.sequence")
	DeliveryCountKey = attribute.Key("messaging.nats.jetstream.delivery_count")
	DuplicateKey     = attribute.Key("messaging.nats.jetstream.duplicate")
)

// Failure classes for FailureClassKey besides record.Class*.
const ClassTransient = "transient"

// Span event names.
const (
	// FailureEvent is recorded by Fail: code, class and stage, no detail.
	FailureEvent = "deadletter.failure"
)

// messagingSystem is messaging.system=nats (not a well-known value of the
// conventions, which allow others).
var messagingSystem = semconv.MessagingSystemKey.String("nats")

// Propagator returns the W3C trace-context propagator (traceparent,
// tracestate): what deadletter's headers carry.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Tracer starts deadletter's spans and moves their context in and out of
// NATS headers. Build one per service with NewTracer; the zero value is not
// usable.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// NewTracer returns a Tracer on tp (nil: the global provider, a no-op until
// otel.SetTracerProvider) propagating with prop (nil: Propagator()). With a
// no-op provider the incoming trace context still passes through: what a
// service consumed with a traceparent, it publishes with the same one.
func NewTracer(tp trace.TracerProvider, prop propagation.TextMapPropagator) Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = Propagator()
	}
	return Tracer{tracer: tp.Tracer(ScopeName), prop: prop}
}

// Propagator returns the Tracer's propagator (e.g. to inject into HTTP
// headers with propagation.HeaderCarrier).
func (t Tracer) Propagator() propagation.TextMapPropagator { return t.prop }

// Tracer returns the underlying OpenTelemetry tracer, for internal spans.
func (t Tracer) Tracer() trace.Tracer { return t.tracer }

// Start starts an internal span (e.g. the commit of an event).
func (t Tracer) Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	if len(attrs) > 0 && span.IsRecording() {
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// Inject writes the span context of ctx into h (traceparent, tracestate).
func (t Tracer) Inject(ctx context.Context, h nats.Header) {
	t.prop.Inject(ctx, Carrier(h))
}

// Extract returns ctx carrying the remote span context found in h, if any.
func (t Tracer) Extract(ctx context.Context, h map[string][]string) context.Context {
	return t.prop.Extract(ctx, Carrier(h))
}

// SpanContext returns the span context carried by h (invalid when none).
func (t Tracer) SpanContext(h map[string][]string) trace.SpanContext {
	return trace.SpanContextFromContext(t.Extract(context.Background(), h))
}

// Option adjusts a span started by StartPublish, StartConsume,
// StartRequest or StartRedrive.
type Option func(*options)

type options struct {
	op       string
	template string
	msgID    string
	parent   trace.SpanContext
	root     *eventRoot
	links    []trace.Link
	attrs    []attribute.KeyValue
	start    time.Time
}

// Operation sets messaging.operation.name and the first word of the span
// name ("validate events.pharmacy.dispense"). Defaults: "send" for
// publishes, "process" for consumes.
func Operation(name string) Option { return func(o *options) { o.op = name } }

// DestinationTemplate names the destination in the span name instead of the
// subject, for subjects with a high-cardinality token
// ("quarantine.{domain}.{dlq_id}"); it is also messaging.destination.template.
func DestinationTemplate(tpl string) Option { return func(o *options) { o.template = tpl } }

// MessageID sets messaging.message.id on a publish (the Nats-Msg-Id the
// caller is about to use; only deadletter-made ids, never a publisher's).
func MessageID(id string) Option { return func(o *options) { o.msgID = id } }

// Parent makes a consume span continue sc's trace instead of the message's
// own; the message's own context, when valid and different, becomes a span
// link. The quarantiner uses it on the advisory path: the span continues
// the original event's trace and links the advisory.
func Parent(sc trace.SpanContext) Option { return func(o *options) { o.parent = sc } }

// Link adds a span link.
func Link(l trace.Link) Option { return func(o *options) { o.links = append(o.links, l) } }

// Attributes adds attributes to the span at its start (visible to samplers).
func Attributes(kv ...attribute.KeyValue) Option {
	return func(o *options) { o.attrs = append(o.attrs, kv...) }
}

// StartTime backdates the span's start (when the parent is known only after
// some work, e.g. fetching the original of an advisory).
func StartTime(t time.Time) Option { return func(o *options) { o.start = t } }

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// spanOptions are the start options but the attributes: those are only built
// and set once the span is known to record (setAttributes), so tracing off
// costs next to nothing. (No sampler of deadletter's looks at attributes.)
func (o options) spanOptions(kind trace.SpanKind) []trace.SpanStartOption {
	so := make([]trace.SpanStartOption, 1, 4)
	so[0] = trace.WithSpanKind(kind)
	if len(o.links) > 0 {
		so = append(so, trace.WithLinks(o.links...))
	}
	if !o.start.IsZero() {
		so = append(so, trace.WithTimestamp(o.start))
	}
	return so
}

// setAttributes sets build()'s attributes and Attributes' on a recording
// span, in one call (each SetAttributes call may grow the span's attribute
// slice again). build appends to a pooled buffer: the SDK copies the
// attributes, so the buffer is reused.
func (o options) setAttributes(span trace.Span, build func([]attribute.KeyValue) []attribute.KeyValue) {
	if !span.IsRecording() {
		return
	}
	bp := attrPool.Get().(*[]attribute.KeyValue)
	attrs := append(build((*bp)[:0]), o.attrs...)
	span.SetAttributes(attrs...)
	clear(attrs)
	*bp = attrs[:0]
	attrPool.Put(bp)
}

// attrPool holds attribute buffers for setAttributes.
var attrPool = sync.Pool{New: func() any {
	b := make([]attribute.KeyValue, 0, 16)
	return &b
}}

// name is "<operation> <template or destination>".
func (o options) name(def, dest string) string {
	op := o.op
	if op == "" {
		op = def
	}
	if o.template != "" {
		dest = o.template
	}
	return op + " " + dest
}

func (o options) messaging(attrs []attribute.KeyValue, def, dest string, opType attribute.KeyValue, size int) []attribute.KeyValue {
	op := o.op
	if op == "" {
		op = def
	}
	attrs = append(attrs, messagingSystem, semconv.MessagingDestinationName(dest), opType, semconv.MessagingOperationName(op))
	if size > 0 {
		attrs = append(attrs, semconv.MessagingMessageBodySize(size))
	}
	if o.template != "" {
		attrs = append(attrs, semconv.MessagingDestinationTemplate(o.template))
	}
	if o.msgID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(o.msgID))
	}
	return attrs
}

// redriveAttrs returns the deadletter attributes of a redriven message's
// headers (none for an original event).
func redriveAttrs(attrs []attribute.KeyValue, h map[string][]string) []attribute.KeyValue {
	c := Carrier(h)
	id := c.Get(envelope.DLQID)
	if id == "" {
		return attrs
	}
	n, _ := strconv.Atoi(c.Get(envelope.RedriveCount))
	return append(attrs, DLQIDKey.String(id), RedriveCountKey.Int(n))
}

// StartPublish starts the producer span of a publish of msg, child of the
// span in ctx, and injects its context into msg's headers (creating them).
// End the span once the publish is acknowledged (RecordAck) or failed
// (span.SetStatus / Fail).
func (t Tracer) StartPublish(ctx context.Context, msg *nats.Msg, opts ...Option) (context.Context, trace.Span) {
	o := collect(opts)
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	ctx, span := t.tracer.Start(ctx, o.name("send", msg.Subject), o.spanOptions(trace.SpanKindProducer)...)
	o.setAttributes(span, func(attrs []attribute.KeyValue) []attribute.KeyValue {
		attrs = o.messaging(attrs, "send", msg.Subject, semconv.MessagingOperationTypeSend, len(msg.Data))
		return redriveAttrs(attrs, msg.Header)
	})
	t.Inject(ctx, msg.Header)
	return ctx, span
}

// StartConsume starts the consumer span processing a JetStream message: its
// parent is the context in the message's headers (or Parent's); without
// one it is a root of the event's derived trace (EventTraceID of the
// message's stream position, or EventRoot's), so that every delivery of an
// untraced event is in one trace with its quarantine. It
// carries the messaging attributes, the JetStream stream, sequence, delivery
// count and consumer, and for a redriven event its dlq id and redrive count.
// messaging.message.id is "<stream>/<sequence>": a publisher's Nats-Msg-Id is
// not recorded, since publishers may derive it from payload values.
func (t Tracer) StartConsume(ctx context.Context, msg jetstream.Msg, opts ...Option) (context.Context, trace.Span) {
	o := collect(opts)
	h := msg.Headers()
	own := t.SpanContext(h)
	parent := own
	if o.parent.IsValid() {
		parent = o.parent
		if own.IsValid() && !own.Equal(o.parent) {
			o.links = append(o.links, trace.Link{SpanContext: own, Attributes: []attribute.KeyValue{LinkKey.String("message")}})
		}
	}
	so := o.spanOptions(trace.SpanKindConsumer)
	sctx := ctx
	if parent.IsValid() {
		sctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		// No trace context: a root of the event's derived trace (see
		// EventTraceID), shared by every delivery and the quarantine.
		root := o.root
		if root == nil {
			root = &eventRoot{msg: msg}
		}
		sctx = withEventRoot(ctx, root)
		so = append(so, trace.WithNewRoot())
	}
	// Named by the subject as published (the consumer's span matches the
	// publisher's); the destination attribute keeps the stored subject,
	// which names the publisher.
	_, span := t.tracer.Start(sctx, o.name("process", subjects.AsPublished(msg.Subject())), so...)
	if !span.IsRecording() {
		return trace.ContextWithSpan(ctx, span), span
	}
	bp := attrPool.Get().(*[]attribute.KeyValue)
	// No body size: it is the producer span's (the same bytes), and every
	// attribute costs per consumed message.
	attrs := o.messaging((*bp)[:0], "process", msg.Subject(), semconv.MessagingOperationTypeProcess, 0)
	if meta, err := msg.Metadata(); err == nil {
		attrs = append(attrs,
			semconv.MessagingConsumerGroupName(meta.Consumer),
			semconv.MessagingMessageID(meta.Stream+"/"+strconv.FormatUint(meta.Sequence.Stream, 10)),
			StreamKey.String(meta.Stream),
			SequenceKey.Int64(int64(meta.Sequence.Stream)),
			DeliveryCountKey.Int64(int64(meta.NumDelivered)))
	}
	*bp = append(redriveAttrs(attrs, h), o.attrs...)
	ds := &deferredSpan{Span: span, attrs: bp}
	return trace.ContextWithSpan(ctx, ds), ds
}

// deferredSpan keeps a span's attributes until End and sets them in one
// call: the SDK copies the attribute slice again on every SetAttributes
// that outgrows it, and a consume span gains its outcome attributes only
// at its end. Status, events and everything else go to the span at once.
type deferredSpan struct {
	trace.Span
	mu    sync.Mutex
	attrs *[]attribute.KeyValue // pooled; nil once ended
}

// SetAttributes keeps kv for End.
func (s *deferredSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attrs == nil {
		s.Span.SetAttributes(kv...) // ended: the span ignores it
		return
	}
	*s.attrs = append(*s.attrs, kv...)
}

// End sets the attributes kept, then ends the span.
func (s *deferredSpan) End(opts ...trace.SpanEndOption) {
	s.mu.Lock()
	bp := s.attrs
	s.attrs = nil
	s.mu.Unlock()
	if bp != nil {
		s.Span.SetAttributes(*bp...)
		clear(*bp)
		*bp = (*bp)[:0]
		attrPool.Put(bp)
	}
	s.Span.End(opts...)
}

// StartRequest starts the server span of a request-reply endpoint (a NATS
// micro handler: pass the request's subject and nats.Header(r.Headers())),
// child of the caller's context in the request headers.
func (t Tracer) StartRequest(ctx context.Context, subject string, h map[string][]string, opts ...Option) (context.Context, trace.Span) {
	o := collect(opts)
	name := subject
	if o.op != "" {
		name = o.op + " " + subject
	}
	ctx = t.Extract(ctx, h)
	ctx, span := t.tracer.Start(ctx, name, o.spanOptions(trace.SpanKindServer)...)
	o.setAttributes(span, func(attrs []attribute.KeyValue) []attribute.KeyValue {
		attrs = append(attrs, messagingSystem, semconv.MessagingDestinationName(subject), semconv.MessagingOperationTypeProcess)
		if o.op != "" {
			attrs = append(attrs, semconv.MessagingOperationName(o.op))
		}
		return attrs
	})
	return ctx, span
}

// Redrive describes the replay of a quarantined event, for StartRedrive.
type Redrive struct {
	// DLQID, Domain and Count are the chain, its domain and the replay's
	// number (the Deadletter-Redrive-Count header).
	DLQID  string
	Domain string
	Count  int
	// OriginalTraceID and OriginalSpanID are the record's trace_id and
	// span_id (the original event's trace); empty when it had none.
	OriginalTraceID string
	OriginalSpanID  string
}

// StartRedrive starts the producer span of the re-publish of a quarantined
// event to EVENTS: the root of a NEW trace (a redrive happens days later and
// is its own story), linked to the original event's trace and, when ctx
// holds one, to the span that caused it (a drain); it carries the
// original's trace id as deadletter.original_trace_id, so both traces are
// found from the dlq id. Its context is injected into msg's headers, so the
// validator's processing of the replay joins the new trace. Set the
// Deadletter-Dlq-Id and Deadletter-Redrive-Count headers before calling.
func (t Tracer) StartRedrive(ctx context.Context, msg *nats.Msg, r Redrive, opts ...Option) (context.Context, trace.Span) {
	o := collect(opts)
	if o.op == "" {
		o.op = "redrive"
	}
	o.linkOriginal(ctx, r)
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	so := append(o.spanOptions(trace.SpanKindProducer), trace.WithNewRoot())
	ctx, span := t.tracer.Start(ctx, o.name("send", msg.Subject), so...)
	o.setAttributes(span, func(attrs []attribute.KeyValue) []attribute.KeyValue {
		return o.messaging(attrs, "send", msg.Subject, semconv.MessagingOperationTypeSend, len(msg.Data))
	})
	t.Inject(ctx, msg.Header)
	return ctx, span
}

// linkOriginal adds r's attributes (dlq id, domain, redrive count, the
// original's trace id) before o's own, a span link to the original event's
// span, and one to the span in ctx (what caused this step: a drain).
func (o *options) linkOriginal(ctx context.Context, r Redrive) {
	attrs := []attribute.KeyValue{DLQIDKey.String(r.DLQID), DomainKey.String(r.Domain), RedriveCountKey.Int(r.Count)}
	if r.OriginalTraceID != "" {
		attrs = append(attrs, OriginalTraceIDKey.String(r.OriginalTraceID))
	}
	if sc, ok := OriginalSpanContext(r.OriginalTraceID, r.OriginalSpanID); ok {
		o.links = append(o.links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{LinkKey.String("original")}})
	}
	if cause := trace.SpanContextFromContext(ctx); cause.IsValid() {
		o.links = append(o.links, trace.Link{SpanContext: cause, Attributes: []attribute.KeyValue{LinkKey.String("drain")}})
	}
	o.attrs = append(attrs, o.attrs...)
}

// StartLifecycle starts the internal span of an operator's step on a
// quarantined event other than a replay (name: "correct", "release"): like
// StartRedrive, the root of a new trace linked to the original event's
// (r's ids) and to the span in ctx, carrying deadletter.original_trace_id,
// dlq id, domain and redrive count. The record the step writes names this
// trace (inject it into the append request), so from the record the
// original is one link away.
func (t Tracer) StartLifecycle(ctx context.Context, name string, r Redrive, opts ...Option) (context.Context, trace.Span) {
	o := collect(opts)
	o.linkOriginal(ctx, r)
	so := append(o.spanOptions(trace.SpanKindInternal), trace.WithNewRoot())
	ctx, span := t.tracer.Start(ctx, name, so...)
	o.setAttributes(span, func(attrs []attribute.KeyValue) []attribute.KeyValue { return attrs })
	return ctx, span
}

// OriginalSpanContext builds the (remote, sampled) span context named by a
// record's trace_id and span_id, for a span link; ok is false when they are
// not valid W3C ids.
func OriginalSpanContext(traceID, spanID string) (trace.SpanContext, bool) {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

// RecordAck adds a JetStream publish acknowledgement's stream and sequence
// (and duplicate flag) to a publish span.
func RecordAck(span trace.Span, ack *jetstream.PubAck, attrs ...attribute.KeyValue) {
	if !span.IsRecording() {
		return
	}
	if ack == nil {
		span.SetAttributes(attrs...)
		return
	}
	all := make([]attribute.KeyValue, 0, 3+len(attrs))
	all = append(all, StreamKey.String(ack.Stream), SequenceKey.Int64(int64(ack.Sequence)))
	if ack.Duplicate {
		all = append(all, DuplicateKey.Bool(true))
	}
	span.SetAttributes(append(all, attrs...)...)
}

// Fail marks span as failed: status Error with the code as its message,
// deadletter.error_code and deadletter.failure_class attributes, and a
// FailureEvent with the code, the class and attrs (e.g. the stage). The
// error detail is deliberately left out: spans leave the compliance
// boundary, the detail stays in the sealed record.
func Fail(span trace.Span, code codes.Code, class string, attrs ...attribute.KeyValue) {
	if !span.IsRecording() {
		return
	}
	kv := []attribute.KeyValue{ErrorCodeKey.String(string(code))}
	if class != "" {
		kv = append(kv, FailureClassKey.String(class))
	}
	span.SetAttributes(kv...)
	span.AddEvent(FailureEvent, trace.WithAttributes(append(kv, attrs...)...))
	span.SetStatus(otelcodes.Error, string(code))
}

// Error marks span as failed for a reason without an error code (e.g. a
// store that could not be reached): status Error with msg, which must not
// hold a payload value.
func Error(span trace.Span, msg string) {
	span.SetStatus(otelcodes.Error, msg)
}

// IDs returns the hex trace and span ids of the span in ctx, or two empty
// strings when it has no valid span context.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}
