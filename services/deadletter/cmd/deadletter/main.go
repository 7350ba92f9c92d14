// Command deadletter runs the whole system in one process on an embedded
// NATS server when asked to: `deadletter run` (`make run`). Configuration
// comes from flags after `run` and DEADLETTER_* environment variables (see
// the README). `deadletter demo` (`make demo`, or `deadletter run --demo`)
// runs the outage demo on a temporary embedded server. Without a command,
// with `help`, -h or an unknown word it prints its usage and touches
// nothing on disk.
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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
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
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// usage lists the commands; it is printed for `help`, -h, --help, no
// command and an unknown one.
const usage = `usage: deadletter COMMAND [FLAGS]

commands:
  run          run the whole system on an embedded NATS server (store in ./data;
               make run); deadletter run -h lists its flags
  demo         the outage story on a temporary embedded server, then exit (make demo)
  people       ls|add|grant|disable|enable|rotate the people of a data directory or a kit
  anchors      rotate: move an earlier store's checkpoints aside to begin a new store on purpose
  rebuild      compare HOLDS, APPROVALS, DRAINS and IDEMPOTENCY with their write-once sources and restore them
  kit          generate the deployment kit of a cluster (--nodes 3 --out deploy/generated)
  cluster      a cluster and every service as its own process on this machine (make cluster)
  downstream   a stand-in downstream system of record on loopback (--port 8080)
  help         this text
`

// exit codes of dispatch: a command that failed, and a command line that
// names no command or a wrong one (nothing was done).
const (
	exitFailed = 1
	exitUsage  = 2
)

// dispatch runs the command args name and returns the process's exit
// code. Only `run` and `demo` start a server; a command line naming no
// known command prints the usage and touches nothing.
func dispatch(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(errOut, "deadletter: no command (a server starts only with `deadletter run`)\n\n"+usage)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(out, usage)
		return 0
	case "run":
		err = runServer(rest, out, errOut, false)
	case "demo":
		err = runServer(rest, out, errOut, true)
	case "anchors":
		err = runAnchors(rest, out, time.Now)
	case "kit":
		err = runKit(rest, out)
	case "cluster":
		err = runCluster(rest, out)
	case "people":
		err = runPeople(rest, out)
	case "downstream":
		err = runDownstream(rest, out)
	case "rebuild":
		err = runRebuild(rest, out)
	default:
		if strings.HasPrefix(cmd, "-") {
			fmt.Fprintf(errOut, "deadletter: %s before a command: flags follow the command (deadletter run %s)\n\n%s", cmd, strings.Join(args, " "), usage)
		} else {
			fmt.Fprintf(errOut, "deadletter: unknown command %q\n\n%s", cmd, usage)
		}
		return exitUsage
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFlags):
		return exitUsage
	}
	fmt.Fprintln(errOut, "deadletter:", err)
	return exitFailed
}

// errFlags is returned for flags `run` cannot parse; the flag set has
// already said why.
var errFlags = errors.New("bad flags")

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

// runServer is `deadletter run` (demo false) and `deadletter demo`: it
// parses the flags, then runs the whole system until SIGINT or SIGTERM, or
// the demo (also `run --demo`) on a temporary server.
func runServer(args []string, out, errOut io.Writer, demoOnly bool) error {
	cfg := stack.DefaultConfig()
	env := config.NewEnv(nil)
	cfg.LoadEnv(env)
	if err := env.Err(); err != nil {
		return err
	}
	name := "deadletter run"
	if demoOnly {
		name = "deadletter demo"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "JetStream store directory (env DEADLETTER_DATA_DIR)")
	fs.StringVar(&cfg.AnchorDir, "anchor-dir", cfg.AnchorDir, "the auditor's signing key and exported checkpoints, outside the data directory (env DEADLETTER_ANCHOR_DIR)")
	fs.StringVar(&cfg.Host, "host", cfg.Host, "NATS listen host; other than loopback it needs --tls-cert and --tls-key (env DEADLETTER_HOST)")
	fs.StringVar(&cfg.Security.TLSCert, "tls-cert", cfg.Security.TLSCert, "NATS server TLS certificate, PEM (env DEADLETTER_TLS_CERT)")
	fs.StringVar(&cfg.Security.TLSKey, "tls-key", cfg.Security.TLSKey, "NATS server TLS private key, PEM (env DEADLETTER_TLS_KEY)")
	fs.StringVar(&cfg.Security.CipherKeyFile, "store-key-file", cfg.Security.CipherKeyFile, "file (mode 0600) holding the JetStream store encryption key; takes precedence over env DEADLETTER_STORE_KEY (env DEADLETTER_STORE_KEY_FILE)")
	fs.StringVar(&cfg.Security.Cipher, "store-cipher", cfg.Security.Cipher, "store cipher with a store key: chacha (default) or aes (env DEADLETTER_STORE_CIPHER)")
	fs.IntVar(&cfg.Port, "port", cfg.Port, "NATS client port, -1 for a free one (env DEADLETTER_PORT)")
	fs.BoolVar(&cfg.SyncAlways, "sync-always", cfg.SyncAlways, "fsync every JetStream write before acknowledging (env DEADLETTER_SYNC_ALWAYS)")
	fs.StringVar(&cfg.Validator.DownstreamURL, "downstream-url", cfg.Validator.DownstreamURL, "downstream system of record (env DEADLETTER_DOWNSTREAM_URL)")
	if cfg.ConsoleAddr == "" {
		cfg.ConsoleAddr = console.DefaultConfig().Listen
	}
	fs.StringVar(&cfg.ConsoleAddr, "console-addr", cfg.ConsoleAddr, "address of the web console; empty disables; other than loopback it needs a TLS certificate (env DEADLETTER_CONSOLE_ADDR)")
	fs.StringVar(&cfg.Console.TLSCert, "console-tls-cert", cfg.Console.TLSCert, "web console HTTPS certificate, PEM (env DEADLETTER_CONSOLE_TLS_CERT)")
	fs.StringVar(&cfg.Console.TLSKey, "console-tls-key", cfg.Console.TLSKey, "web console HTTPS private key, PEM (env DEADLETTER_CONSOLE_TLS_KEY)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, "address of /metrics; empty disables (env DEADLETTER_METRICS_ADDR)")
	runDemo := fs.Bool("demo", demoOnly, "run the outage demo on a temporary embedded server, print the story and exit (deadletter demo)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errFlags
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errOut, "%s: unexpected %q (flags only)\n", name, fs.Arg(0))
		fs.Usage()
		return errFlags
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return err
	}
	runner.TuneGC(runner.DefaultGCPercent)
	log := slog.New(telemetry.NewLogHandler(errOut, &slog.HandlerOptions{Level: level}))
	cfg.Out = out
	if exportToLocalJaeger() && cfg.Console.JaegerURL == "" {
		// The console's record pages draw the traces of that Jaeger.
		cfg.Console.JaegerURL = jaegerQuery
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runDemo {
		_, err := demo.Run(ctx, demo.Config{Out: out})
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
