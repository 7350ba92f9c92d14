package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// An event whose publisher sent no trace context (`nats pub`, most
// producers) still has one story: every delivery of it, its quarantine and
// its record write share the trace id EventTraceID derives from the
// event's place in its stream. Each service derives the same id on its own,
// so nothing has to carry it: the validator from the delivery's metadata,
// the quarantiner from the failure's source stream, sequence and publish
// time. The spans are roots (there is no parent to point at) of that one
// trace: the tracer provider's IDGenerator (Setup installs it) takes the
// trace id from the context StartConsume prepares. A root sampler that
// decides by trace id (TraceIDRatioBased, the parentbased_* samplers'
// root) makes the same decision for every span of the story.

// EventTraceID returns the trace id of the story of the event stored in
// stream at sequence seq, published (stored) at published, when its
// publisher sent no trace context: the first 16 bytes of a SHA-256 of a
// version tag, the stream, the sequence and the publish time in
// nanoseconds. The time tells apart events that take the same sequence of a
// stream deleted and made again; a zero time (an original that could no
// longer be read) hashes as zero. No payload value goes in.
func EventTraceID(stream string, seq uint64, published time.Time) trace.TraceID {
	var ns int64
	if !published.IsZero() {
		ns = published.UnixNano()
	}
	h := sha256.New()
	h.Write([]byte("deadletter/event-trace/v1\x00"))
	h.Write([]byte(stream))
	var b [17]byte
	binary.BigEndian.PutUint64(b[1:9], seq)
	binary.BigEndian.PutUint64(b[9:], uint64(ns))
	h.Write(b[:])
	var id trace.TraceID
	copy(id[:], h.Sum(nil))
	if !id.IsValid() {
		id[15] = 1 // all zeros is not a valid id (a 2^-128 chance)
	}
	return id
}

// EventRoot makes a consume span whose message (and Parent) carry no valid
// trace context a root of EventTraceID(stream, seq, published) instead of
// the message's own position: the quarantiner uses it on the advisory path,
// whose message is the server's advisory, not the event. Without it,
// StartConsume derives the id from the consumed message's metadata.
func EventRoot(stream string, seq uint64, published time.Time) Option {
	return func(o *options) { o.root = &eventRoot{stream: stream, seq: seq, published: published} }
}

// eventRoot names the event a root span's trace id is derived from: given
// (stream, seq, published), or the metadata of msg. It is derived only
// when the provider asks (IDGenerator), so with tracing off it costs
// nothing but the context value.
type eventRoot struct {
	msg       jetstream.Msg
	stream    string
	seq       uint64
	published time.Time
}

// traceID returns the derived id; ok is false when msg has no metadata.
func (r *eventRoot) traceID() (trace.TraceID, bool) {
	if r.msg == nil {
		return EventTraceID(r.stream, r.seq, r.published), true
	}
	meta, err := r.msg.Metadata()
	if err != nil {
		return trace.TraceID{}, false
	}
	return EventTraceID(meta.Stream, meta.Sequence.Stream, meta.Timestamp), true
}

type eventRootKey struct{}

// withEventRoot returns ctx asking IDGenerator for r's trace id.
func withEventRoot(ctx context.Context, r *eventRoot) context.Context {
	return context.WithValue(ctx, eventRootKey{}, r)
}

// IDGenerator returns the span id generator of deadletter's tracer
// providers (Setup installs it; pass it to sdktrace.WithIDGenerator in a
// provider of your own): random ids, except the trace id of a root span
// started by StartConsume for an event without trace context, which is
// EventTraceID's. Without it, each such span is a trace of its own.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

// NewIDs returns the derived trace id when ctx names an event, else a
// random one, and a random span id.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if r, ok := ctx.Value(eventRootKey{}).(*eventRoot); ok {
		if id, ok := r.traceID(); ok {
			return id, newSpanID()
		}
	}
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

// NewSpanID returns a random span id.
func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
