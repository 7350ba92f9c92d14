package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/deadletter/deadletter/services/deadletter/cluster"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// runCluster is `deadletter cluster` (`make cluster`): a 3-node nats-server
// cluster and every service as its own process under goreman, on this
// machine (package cluster), until Ctrl-C.
func runCluster(args []string, out io.Writer) error {
	o := cluster.DefaultOptions()
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.StringVar(&o.Dir, "dir", o.Dir, "directory of the kit, the stores, the anchors and the Procfiles (its secrets are reused)")
	fs.StringVar(&o.Bin, "bin", o.Bin, "directory of the service binaries and provision")
	fs.StringVar(&o.NATSServer, "nats-server", o.NATSServer, "the nats-server binary")
	goreman := fs.String("goreman", ".cache/bin/goreman", "the goreman binary")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "number of nodes")
	fs.IntVar(&o.ClientPort, "client-port", o.ClientPort, "client port of node 1 (node i adds i-1)")
	fs.IntVar(&o.ClusterPort, "cluster-port", o.ClusterPort, "cluster port of node 1")
	fs.IntVar(&o.HTTPPort, "http-port", o.HTTPPort, "monitoring port of node 1")
	fs.IntVar(&o.Validators, "validators", o.Validators, "validator processes")
	fs.IntVar(&o.Quarantiners, "quarantiners", o.Quarantiners, "quarantiner processes")
	fs.StringVar(&o.DownstreamURL, "downstream-url", o.DownstreamURL, "the validators' downstream system of record (empty: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(telemetry.NewLogHandler(os.Stderr, nil))
	p, err := cluster.Prepare(o)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cluster.Run(ctx, p, *goreman, out, log)
}
