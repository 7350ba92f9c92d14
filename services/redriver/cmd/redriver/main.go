// Command redriver runs one redriver instance against an external NATS
// server or cluster (NATS_URL or --nats-url).
package main

import (
	"context"
	"flag"
	"fmt"
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
