// Package runner runs one deadletter service as a process of its own, the
// way production runs them against a NATS cluster: it reads the connection
// flags and the environment, logs JSON to stderr, sets up tracing and a
// /metrics endpoint, connects to NATS, runs the service until SIGINT or
// SIGTERM, then flushes. Each service's main is a few lines around Main.
package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Deps is what a service is built from.
type Deps struct {
	// NC is the service's NATS connection (drained at exit).
	NC *nats.Conn
	// Log is the JSON logger.
	Log *slog.Logger
	// Env reads DEADLETTER_* variables; its errors stop the start.
	Env *config.Env
	// TracerProvider exports spans when OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT
	// is set; a no-op otherwise.
	TracerProvider trace.TracerProvider
	// Registerer is the process's metrics registry, served on /metrics.
	Registerer prometheus.Registerer
}

// Service is a built service.
type Service interface {
	Run(ctx context.Context) error
}

// Option changes how Main runs a service.
type Option func(*options)

type options struct {
	gcPercent int
}

// GCPercent sets the service's garbage-collector target (default
// DefaultGCPercent; GOGC still wins): a service whose live heap is large
// trades some CPU for memory with a lower one.
func GCPercent(p int) Option { return func(o *options) { o.gcPercent = p } }

// Main runs the service name (e.g. "validator") built by build, and exits
// with status 1 on error.
func Main(name, version string, build func(Deps) (Service, error), opts ...Option) {
	o := options{gcPercent: DefaultGCPercent}
	for _, f := range opts {
		f(&o)
	}
	TuneGC(o.gcPercent)
	if err := run(name, version, build); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(name, version string, build func(Deps) (Service, error)) error {
	env := config.NewEnv(nil)
	conn := config.ConnFlags(flag.CommandLine)
	metricsAddr := flag.String("metrics-addr", envOr("DEADLETTER_METRICS_ADDR", config.DefaultMetricsAddr(name, env.InstanceIndex())),
		"where /metrics is served; empty disables (env DEADLETTER_METRICS_ADDR; default per service and DEADLETTER_INSTANCE_INDEX)")
	flag.Parse()
	log := slog.New(telemetry.NewLogHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tp, shutdown, err := telemetry.Setup(ctx, telemetry.Config{
		ServiceName: telemetry.ServiceName("deadletter-" + name), ServiceVersion: version,
	})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("spans not flushed", "err", err)
		}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	if conn.InboxPrefix == "" {
		// Each user may subscribe only to its own inbox (package access).
		conn.InboxPrefix = access.InboxPrefix(name)
	}
	nc, err := conn.Connect("deadletter-" + name)
	if err != nil {
		return err
	}
	defer func() {
		// Drain returns at once; wait until the connection is closed, so
		// the service's last publishes are flushed before the process exits.
		if err := Drain(DefaultDrainTimeout, nc); err != nil {
			log.Warn("connection not drained", "err", err)
		}
	}()
	svc, err := build(Deps{NC: nc, Log: log, Env: env, TracerProvider: tp, Registerer: reg})
	if err := errors.Join(env.Err(), err); err != nil {
		return err
	}
	return svc.Run(ctx)
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
