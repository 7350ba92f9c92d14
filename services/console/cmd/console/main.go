// Command console runs deadletter's web triage console against an
// external NATS server or cluster (--nats-url / NATS_URL). It holds no
// credentials of its own: each person logs in with their own NATS user.
// Flags override DEADLETTER_CONSOLE_* variables (package console).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/deadletter/deadletter/services/console"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/telemetry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := console.DefaultConfig()
	env := config.NewEnv(nil)
	cfg.LoadEnv(env)
	if err := env.Err(); err != nil {
		return err
	}
	flag.StringVar(&cfg.Listen, "listen", cfg.Listen, "HTTP listen address; other than loopback it needs --tls-cert and --tls-key (env DEADLETTER_CONSOLE_LISTEN)")
	flag.StringVar(&cfg.TLSCert, "tls-cert", cfg.TLSCert, "HTTPS certificate, PEM (env DEADLETTER_CONSOLE_TLS_CERT)")
	flag.StringVar(&cfg.TLSKey, "tls-key", cfg.TLSKey, "HTTPS private key, PEM (env DEADLETTER_CONSOLE_TLS_KEY)")
	flag.StringVar(&cfg.NATSURL, "nats-url", cfg.NATSURL, "NATS server URL(s), comma separated (env NATS_URL)")
	flag.StringVar(&cfg.NATSTLSCA, "tlsca", cfg.NATSTLSCA, "CA of the NATS servers' certificates")
	flag.StringVar(&cfg.NATSTLSCert, "tlscert", cfg.NATSTLSCert, "NATS TLS client certificate")
	flag.StringVar(&cfg.NATSTLSKey, "tlskey", cfg.NATSTLSKey, "NATS TLS client key")
	flag.DurationVar(&cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "close sessions idle this long (env DEADLETTER_CONSOLE_IDLE_TIMEOUT)")
	flag.StringVar(&cfg.TraceURLBase, "trace-url", cfg.TraceURLBase, "Jaeger UI base URL for trace links (env DEADLETTER_CONSOLE_TRACE_URL)")
	flag.StringVar(&cfg.JaegerURL, "jaeger-url", cfg.JaegerURL, "Jaeger query API the record page draws traces from, e.g. http://127.0.0.1:16686 (env DEADLETTER_CONSOLE_JAEGER_URL)")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	log := slog.New(telemetry.NewLogHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := console.New(cfg, log)
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-c.Ready():
			fmt.Printf("deadletter console: %s\n", c.URL())
		case <-ctx.Done():
		}
	}()
	return c.Run(ctx)
}
