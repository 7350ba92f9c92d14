package validator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// downstream posts committed events to an external system of record.
type downstream struct {
	url    string
	client *http.Client
	tr     telemetry.Tracer
}

// post sends one event. Timeouts, connection errors, 429, 500, 502, 503 and
// 504 are transient (DOWNSTREAM_UNAVAILABLE); any other non-2xx answer is
// structural (DOWNSTREAM_REJECTED). The downstream must treat a repeated
// Idempotency-Key as the same request.
func (d *downstream) post(ctx context.Context, env envelope.Envelope, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(data))
	if err != nil {
		return codes.Wrap(codes.DownstreamRejected, err, "cannot build downstream request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(envelope.DownstreamIdempotencyKey, env.IdempotencyKey)
	req.Header.Set("X-Deadletter-Domain", env.Domain)
	req.Header.Set("X-Deadletter-Event-Type", env.EventType)
	// A client span (no URL path or query: they may carry credentials),
	// its context sent as traceparent so the downstream can join the trace.
	ctx, span := d.tr.Tracer().Start(ctx, "POST", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodPost, semconv.ServerAddress(req.URL.Hostname())))
	defer span.End()
	d.tr.Propagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := d.client.Do(req)
	if err != nil {
		telemetry.Fail(span, codes.DownstreamUnavailable, telemetry.ClassTransient)
		return codes.Wrap(codes.DownstreamUnavailable, err, "downstream unreachable or timed out")
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil
	case s == http.StatusTooManyRequests, s == http.StatusInternalServerError, s == http.StatusBadGateway,
		s == http.StatusServiceUnavailable, s == http.StatusGatewayTimeout:
		telemetry.Fail(span, codes.DownstreamUnavailable, telemetry.ClassTransient)
		return codes.Errorf(codes.DownstreamUnavailable, "downstream answered HTTP %d", s)
	default:
		telemetry.Fail(span, codes.DownstreamRejected, string(record.ClassValidation))
		return codes.Errorf(codes.DownstreamRejected, "downstream answered HTTP %d", s)
	}
}

// String describes the downstream without credentials that a URL may carry.
func (d *downstream) String() string {
	req, err := http.NewRequest(http.MethodPost, d.url, nil)
	if err != nil {
		return "downstream"
	}
	return fmt.Sprintf("%s://%s", req.URL.Scheme, req.URL.Host)
}
