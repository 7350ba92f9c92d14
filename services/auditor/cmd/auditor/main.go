// Command auditor runs one auditor instance against an external NATS server
// or cluster (NATS_URL or --nats-url), serving /metrics on --metrics-addr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "auditor:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := auditor.DefaultConfig()
	conn := config.ConnFlags(flag.CommandLine)
	metricsAddr := flag.String("metrics-addr", envOr("DEADLETTER_METRICS_ADDR", "127.0.0.1:9464"), "where /metrics is served; empty disables (env DEADLETTER_METRICS_ADDR)")
	flag.Parse()
	env := config.NewEnv(nil)
	cfg.LoadEnv(env)
	if err := env.Err(); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registerer = reg
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *metricsAddr != "" {
		srv := &http.Server{Addr: *metricsAddr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server failed", "err", err)
			}
		}()
		defer func() { _ = srv.Close() }()
	}
	nc, err := conn.Connect("deadletter-auditor")
	if err != nil {
		return err
	}
	defer nc.Drain()
	a, err := auditor.New(nc, cfg, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
