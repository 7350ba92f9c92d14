// Command deadletter runs the whole system in one process on an embedded
// NATS server: `make run`. Configuration comes from flags and DEADLETTER_*
// environment variables (see the README).
//
// `deadletter kit --nodes 3 --out deploy/generated` generates the
// deployment kit of a cluster instead (deploy/README.md); `deadletter
// cluster` runs a 3-node cluster and every service as its own process on
// this machine (`make cluster`, package cluster). `deadletter downstream
// --port 8080` serves a stand-in downstream system of record on loopback,
// taken down and brought back with POST /down and /up (package downstream).
// `deadletter people ls|add|grant|disable|enable|rotate` manages the people of a
// data directory or a kit (docs/operations/people.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/deadletter/deadletter/services/console"
	"github.com/deadletter/deadletter/services/deadletter/demo"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/runner"
	"github.com/deadletter/deadletter/shared/telemetry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "deadletter:", err)
		os.Exit(1)
	}
}

// jaegerOTLP is where `make jaeger-run` (or Jaeger's image or release
// binary) receives OTLP/HTTP spans, and jaegerQuery its query API.
const (
	jaegerOTLP  = "127.0.0.1:4318"
	jaegerQuery = "http://127.0.0.1:16686"
)

// exportToLocalJaeger points tracing at a Jaeger running on this machine
// when no OTLP endpoint is configured, so `make run` is traced whenever
// `make jaeger-run` is up, and reports whether it did.
func exportToLocalJaeger() bool {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		return false
	}
	c, err := net.DialTimeout("tcp", jaegerOTLP, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	_ = os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+jaegerOTLP)
	return true
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "kit" {
		return runKit(os.Args[2:], os.Stdout)
	}
	if len(os.Args) > 1 && os.Args[1] == "cluster" {
		return runCluster(os.Args[2:], os.Stdout)
	}
	if len(os.Args) > 1 && os.Args[1] == "people" {
		return runPeople(os.Args[2:], os.Stdout)
	}
	if len(os.Args) > 1 && os.Args[1] == "downstream" {
		return runDownstream(os.Args[2:], os.Stdout)
	}
	runner.TuneGC(runner.DefaultGCPercent)
	cfg := stack.DefaultConfig()
	env := config.NewEnv(nil)
	cfg.LoadEnv(env)
	if err := env.Err(); err != nil {
		return err
	}
	flag.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "JetStream store directory (env DEADLETTER_DATA_DIR)")
	flag.StringVar(&cfg.AnchorDir, "anchor-dir", cfg.AnchorDir, "the auditor's signing key and exported checkpoints, outside the data directory (env DEADLETTER_ANCHOR_DIR)")
	flag.StringVar(&cfg.Host, "host", cfg.Host, "NATS listen host; other than loopback it needs --tls-cert and --tls-key (env DEADLETTER_HOST)")
	flag.StringVar(&cfg.Security.TLSCert, "tls-cert", cfg.Security.TLSCert, "NATS server TLS certificate, PEM (env DEADLETTER_TLS_CERT)")
	flag.StringVar(&cfg.Security.TLSKey, "tls-key", cfg.Security.TLSKey, "NATS server TLS private key, PEM (env DEADLETTER_TLS_KEY)")
	flag.StringVar(&cfg.Security.CipherKeyFile, "store-key-file", cfg.Security.CipherKeyFile, "file (mode 0600) holding the JetStream store encryption key; takes precedence over env DEADLETTER_STORE_KEY (env DEADLETTER_STORE_KEY_FILE)")
	flag.StringVar(&cfg.Security.Cipher, "store-cipher", cfg.Security.Cipher, "store cipher with a store key: chacha (default) or aes (env DEADLETTER_STORE_CIPHER)")
	flag.IntVar(&cfg.Port, "port", cfg.Port, "NATS client port, -1 for a free one (env DEADLETTER_PORT)")
	flag.BoolVar(&cfg.SyncAlways, "sync-always", cfg.SyncAlways, "fsync every JetStream write before acknowledging (env DEADLETTER_SYNC_ALWAYS)")
	flag.StringVar(&cfg.Validator.DownstreamURL, "downstream-url", cfg.Validator.DownstreamURL, "downstream system of record (env DEADLETTER_DOWNSTREAM_URL)")
	if cfg.ConsoleAddr == "" {
		cfg.ConsoleAddr = console.DefaultConfig().Listen
	}
	flag.StringVar(&cfg.ConsoleAddr, "console-addr", cfg.ConsoleAddr, "address of the web console; empty disables; other than loopback it needs a TLS certificate (env DEADLETTER_CONSOLE_ADDR)")
	flag.StringVar(&cfg.Console.TLSCert, "console-tls-cert", cfg.Console.TLSCert, "web console HTTPS certificate, PEM (env DEADLETTER_CONSOLE_TLS_CERT)")
	flag.StringVar(&cfg.Console.TLSKey, "console-tls-key", cfg.Console.TLSKey, "web console HTTPS private key, PEM (env DEADLETTER_CONSOLE_TLS_KEY)")
	flag.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "address of /metrics; empty disables (env DEADLETTER_METRICS_ADDR)")
	runDemo := flag.Bool("demo", false, "run the outage demo on a temporary embedded server, print the story and exit")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	log := slog.New(telemetry.NewLogHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Out = os.Stdout
	if exportToLocalJaeger() && cfg.Console.JaegerURL == "" {
		// The console's record pages draw the traces of that Jaeger.
		cfg.Console.JaegerURL = jaegerQuery
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runDemo {
		_, err := demo.Run(ctx, demo.Config{Out: os.Stdout})
		return err
	}
	s, err := stack.New(cfg, log)
	if err != nil {
		return err
	}
	err = s.Run(ctx)
	log.Info("deadletter stopped")
	return err
}
