// Package telemetry is deadletter's OpenTelemetry tracing: the tracer
// provider set up from the standard OTEL_* environment (Setup), the W3C trace
// context carried in NATS message headers (Carrier), and the span helpers
// every service uses so that one event's story (published, validated,
// committed or failed, quarantined, redriven) is one trace in Jaeger, with
// the OpenTelemetry messaging semantic conventions and deadletter.*
// attributes (Tracer.StartPublish, Tracer.StartConsume, Tracer.StartRedrive,
// Tracer.StartLifecycle, Fail). An event published without trace context
// gets a trace id derived from its stream position (EventTraceID), so its
// story is one trace all the same.
//
// No span attribute or event ever carries a payload value: only subjects,
// stream positions, codes, classes, ids and hashes.
//
// Setup is a no-op, with no exporter and no goroutine, when no OTLP endpoint
// is configured, so `make run` works without Jaeger. The exporter is OTLP over
// HTTP (protobuf): it needs no gRPC stack, and Jaeger, the collector and
// every OTLP backend accept it on 4318. The SDK's tracer provider, sampler
// and batch span processor are used as they are; the exporter is this
// package's (otlp.go), which writes the spans straight into the OTLP wire
// format, at a fifth of the SDK exporter's CPU per span, except when the
// environment configures TLS certificates (then it is the SDK's).
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Environment variables Setup reads (the OpenTelemetry SDK specification's).
// The SDK itself also reads OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG,
// OTEL_BSP_* and OTEL_RESOURCE_ATTRIBUTES, and the exporter
// OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, _TIMEOUT and _COMPRESSION (gzip or
// none).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
)

// DefaultServiceName is the service.name when neither Config.ServiceName nor
// OTEL_SERVICE_NAME names one.
const DefaultServiceName = "deadletter"

// DefaultMaxQueueSize is the batch span processor's queue unless
// OTEL_BSP_MAX_QUEUE_SIZE says otherwise: four times the SDK's 2048, since a
// validator pulls events in bursts of hundreds and a full queue drops spans.
const DefaultMaxQueueSize = 8192

// ErrUnsupported reports an OTEL_* setting this package cannot honour (an
// exporter other than otlp or none, a protocol other than http/protobuf).
var ErrUnsupported = errors.New("telemetry: unsupported setting")

// Config configures Setup. The zero value reads everything from the
// environment.
type Config struct {
	// ServiceName is the service.name resource attribute, under which Jaeger
	// lists the spans. Empty: OTEL_SERVICE_NAME, else DefaultServiceName.
	// A process that hosts several services (the all-in-one stack) sets one
	// provider per service with a fixed name; a standalone service passes
	// ServiceName(<its default>) so that OTEL_SERVICE_NAME still overrides.
	ServiceName string
	// ServiceVersion and InstanceID are the service.version and
	// service.instance.id resource attributes (omitted when empty).
	ServiceVersion string
	InstanceID     string
	// Endpoint is an OTLP/HTTP base URL ("http://127.0.0.1:4318"; the
	// exporter posts to <Endpoint>/v1/traces) that overrides the
	// environment. Empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL)
	// or OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); none of the three set
	// means tracing is off.
	Endpoint string
	// Sampler overrides OTEL_TRACES_SAMPLER (whose default is
	// parentbased_always_on). Nil: the environment's.
	Sampler sdktrace.Sampler
	// Synchronous exports every span as it ends instead of batching (tests:
	// spans are queryable at once). Production uses the batch processor.
	Synchronous bool
	// MaxQueueSize is the batch span processor's queue: the spans that may
	// wait for export before new ones are dropped. 0:
	// OTEL_BSP_MAX_QUEUE_SIZE, else DefaultMaxQueueSize. A process that
	// ends spans in bursts larger than that (a bulk publisher) sets more.
	MaxQueueSize int
}

// ServiceName returns OTEL_SERVICE_NAME when it is set, else def: what a
// standalone service passes as Config.ServiceName.
func ServiceName(def string) string {
	if v := strings.TrimSpace(os.Getenv(EnvServiceName)); v != "" {
		return v
	}
	return def
}

// Shutdown flushes the spans not yet exported and stops the exporter. It is
// safe to call more than once.
type Shutdown func(context.Context) error

// Setup returns the tracer provider described by cfg and the environment,
// and the Shutdown that flushes it. Tracing is off (a no-op provider: no
// exporter, no goroutine, spans cost next to nothing) when no endpoint is
// configured, when OTEL_SDK_DISABLED=true or when OTEL_TRACES_EXPORTER=none.
// Setup does not connect: an unreachable collector costs dropped spans and
// logged export errors, never a failed start. It does not touch the global
// provider; pass the result to each service's Config.TracerProvider (or call
// otel.SetTracerProvider yourself).
func Setup(ctx context.Context, cfg Config) (trace.TracerProvider, Shutdown, error) {
	off := func(context.Context) error { return nil }
	if !Enabled(cfg) {
		return noop.NewTracerProvider(), off, nil
	}
	if v := strings.TrimSpace(os.Getenv(EnvTracesExporter)); v != "" && v != "otlp" {
		return nil, nil, fmt.Errorf("%w: %s=%q (only otlp or none)", ErrUnsupported, EnvTracesExporter, v)
	}
	proto := os.Getenv(EnvTracesProtocol)
	if proto == "" {
		proto = os.Getenv(EnvProtocol)
	}
	if proto = strings.TrimSpace(proto); proto != "" && proto != "http/protobuf" {
		return nil, nil, fmt.Errorf("%w: OTLP protocol %q (only http/protobuf, port 4318)", ErrUnsupported, proto)
	}

	// deadletter's exporter (otlp.go) unless the environment configures
	// certificates, which only the SDK's exporter applies, or a collector
	// URL ours does not take. The SDK's shared default transport keeps idle
	// connections (and their goroutines) for 90 s after Shutdown; ours is
	// closed by Shutdown.
	var (
		exp       sdktrace.SpanExporter
		transport *http.Transport
		client    *http.Client
	)
	if !tlsFromEnv() {
		transport = newTransport()
		client = &http.Client{Transport: transport, Timeout: exportTimeout()}
		if own, ok := newOTLPExporter(cfg, client); ok {
			exp = own
		}
	}
	if exp == nil {
		var opts []otlptracehttp.Option
		if client != nil {
			opts = append(opts, otlptracehttp.WithHTTPClient(client))
		}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(cfg)))
		}
		sdkExp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
		}
		exp = sdkExp
	}
	res, err := newResource(cfg)
	if err != nil {
		return nil, nil, err
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithIDGenerator(IDGenerator())}
	if cfg.Synchronous {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(exp))
	} else {
		var bsp []sdktrace.BatchSpanProcessorOption
		switch {
		case cfg.MaxQueueSize > 0:
			bsp = append(bsp, sdktrace.WithMaxQueueSize(cfg.MaxQueueSize))
		case os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE") == "":
			bsp = append(bsp, sdktrace.WithMaxQueueSize(DefaultMaxQueueSize))
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp, bsp...))
	}
	if cfg.Sampler != nil {
		tpOpts = append(tpOpts, sdktrace.WithSampler(cfg.Sampler))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	return tp, func(ctx context.Context) error {
		err := tp.Shutdown(ctx)
		if transport != nil {
			transport.CloseIdleConnections()
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("telemetry: spans not flushed: %w", err)
		}
		return err
	}, nil
}

// Enabled reports whether Setup(cfg) would export spans: an endpoint is
// configured and the SDK is not disabled.
func Enabled(cfg Config) bool {
	if b, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(EnvSDKDisabled))); b {
		return false
	}
	if strings.TrimSpace(os.Getenv(EnvTracesExporter)) == "none" {
		return false
	}
	return cfg.Endpoint != "" || strings.TrimSpace(os.Getenv(EnvTracesEndpoint)) != "" ||
		strings.TrimSpace(os.Getenv(EnvEndpoint)) != ""
}

func newResource(cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = ServiceName(DefaultServiceName)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	if cfg.InstanceID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(cfg.InstanceID))
	}
	// Default carries the SDK, OTEL_RESOURCE_ATTRIBUTES and
	// OTEL_SERVICE_NAME; ours is merged last and wins.
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// tlsFromEnv reports whether the environment configures certificates, which
// only the exporter's own HTTP client applies.
func tlsFromEnv() bool {
	for _, k := range []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		if os.Getenv("OTEL_EXPORTER_OTLP_"+k) != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_"+k) != "" {
			return true
		}
	}
	return false
}

// exportTimeout is OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT (milliseconds),
// default 10 s, which the exporter ignores once given an HTTP client.
func exportTimeout() time.Duration {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"} {
		if ms, err := strconv.Atoi(strings.TrimSpace(os.Getenv(k))); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return 10 * time.Second
}

// newTransport is http.DefaultTransport's configuration, owned by one
// provider.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
