// Command redriver runs one redriver instance against an external NATS
// server or cluster (NATS_URL or --nats-url).
package main

import (
	"time"

	"context"
	"flag"
	"fmt"
	"github.com/deadletter/deadletter/shared/telemetry"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/shared/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "redriver:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := redriver.DefaultConfig()
	conn := config.ConnFlags(flag.CommandLine)
	flag.Parse()
	env := config.NewEnv(nil)
	cfg.LoadEnv(env)
	if err := env.Err(); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Tracing from OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT; off without one.
	tp, shutdown, err := telemetry.Setup(ctx, telemetry.Config{
		ServiceName: telemetry.ServiceName("deadletter-redriver"), ServiceVersion: redriver.Version,
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
	cfg.TracerProvider = tp
	nc, err := conn.Connect("deadletter-redriver")
	if err != nil {
		return err
	}
	defer nc.Drain()
	r, err := redriver.New(nc, cfg, log)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}
