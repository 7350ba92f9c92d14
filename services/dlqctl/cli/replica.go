package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/shared/replica"
	"github.com/deadletter/deadletter/shared/subjects"
)

// replicaCommand is `dlqctl replica`: the second copy (package replica,
// the kit's replica server), run against the replica server.
func (a *app) replicaCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replica",
		Short: "The second copy on the replica server: create its mirrors, report or export their lag, promote them after a failover (docs/operations/failover.md)",
	}
	var credsFile, domain string
	var replicas int
	admin := func(cmd *cobra.Command) {
		cmd.Flags().StringVar(&credsFile, "credentials", "", "connect as the break-glass admin of this credentials file (the kit's secrets.json)")
	}
	mirrors := &cobra.Command{
		Use:   "mirrors",
		Short: "Create, on the replica server (as its admin), a mirror of each of the primary's backup-account mirrors that is not there yet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.asAdmin(credsFile); err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			names, err := replica.EnsureFromBackup(cmd.Context(), c.Conn(), domain, replicas)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.io.Out, "mirrors of the primary (JetStream domain %s): %v\n", domain, names)
			return nil
		},
	}
	admin(mirrors)
	mirrors.Flags().StringVar(&domain, "primary-domain", "deadletter", "the primary cluster's JetStream domain (the kit's replica.primary_domain)")
	mirrors.Flags().IntVar(&replicas, "replicas", 0, "replicas of each mirror (default the origin's; 1 on a single replica server)")
	promote := &cobra.Command{
		Use:   "promote",
		Short: "After the primary is lost: make every mirror of the replica server its origin stream (subjects, limits, WORM flags back; records kept at their sequences)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.asAdmin(credsFile); err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			start := time.Now()
			names, err := replica.PromoteAll(cmd.Context(), c.Conn())
			if err != nil {
				return err
			}
			fmt.Fprintf(a.io.Out, "promoted %v in %s; now provision the replica (the work queues and the services' consumers) and point the services at it\n",
				names, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	admin(promote)
	resume := &cobra.Command{
		Use:   "resume",
		Short: "After promote and provisioning: set the validator's consumer on the replica to the first event without an outcome (no commit in IDEMPOTENCY, no QUARANTINE record), before the services start",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.asAdmin(credsFile); err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			js, err := jetstream.New(c.Conn())
			if err != nil {
				return err
			}
			at, err := replica.Resume(cmd.Context(), js)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.io.Out, "the validator resumes at EVENTS sequence %d; start the services\n", at)
			return nil
		},
	}
	admin(resume)
	var listen string
	metrics := &cobra.Command{
		Use:   "metrics",
		Short: "Serve /metrics with deadletter_replica_lag_messages{stream} read from the replica server (connect as a reader: the auditor's nkey)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			reg := prometheus.NewRegistry()
			js, err := jetstream.New(c.Conn())
			if err != nil {
				return err
			}
			reg.MustRegister(replica.NewCollector(js, LagStreams()))
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			fmt.Fprintf(a.io.Out, "serving http://%s/metrics\n", l.Addr())
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	metrics.Flags().StringVar(&listen, "listen", "127.0.0.1:9468", "address of /metrics")
	lag := &cobra.Command{
		Use:   "lag",
		Short: "Print how many messages each mirror of the replica server is behind (connect as a reader: the auditor's nkey)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			js, err := jetstream.New(c.Conn())
			if err != nil {
				return err
			}
			out, err := replica.Lag(cmd.Context(), js, LagStreams())
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(out)
			}
			t := newTable(a.io.Out)
			t.row("STREAM", "LAG")
			for _, name := range LagStreams() {
				t.row(name, strconv.FormatUint(out[name], 10))
			}
			t.flush()
			return nil
		},
	}
	cmd.AddCommand(mirrors, promote, resume, metrics, lag)
	return group(cmd)
}

// LagStreams are the replica's mirrors whose lag dlqctl replica reports:
// the evidence and the system of record, which the auditor (the reader
// these commands connect as) may read.
func LagStreams() []string {
	return []string{subjects.QuarantineStream, subjects.AuditStream, subjects.LedgerStream, subjects.EventsStream}
}
