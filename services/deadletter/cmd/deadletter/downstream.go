package main

import (
	"context"
	"flag"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/deadletter/deadletter/services/deadletter/downstream"
)

// runDownstream is `deadletter downstream [--port 8080] [--down]`: a
// stand-in downstream system of record on loopback for `make run`, taken
// down and brought back with POST /down and POST /up (package downstream).
func runDownstream(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("deadletter downstream", flag.ContinueOnError)
	port := fs.Int("port", 8080, "loopback port to serve the downstream API on")
	down := fs.Bool("down", false, "start down (answering 503)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, err := downstream.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return downstream.Serve(ctx, l, downstream.New(!*down), out)
}
