package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/retry"
)

// RPC ports of the two goreman processes, on loopback:
// `GOREMAN_RPC_SERVER=127.0.0.1:8555 goreman run restart validator-1`
// restarts one service (goreman's client ignores -p).
const (
	ServicesRPCPort = 8555
	NodesRPCPort    = 8556
)

// stopTimeout bounds how long a goreman is given to stop its processes
// (goreman itself kills them after 10 s).
const stopTimeout = 20 * time.Second

// supervisor is one goreman process.
type supervisor struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

func startSupervisor(goreman, dir, procfile string, rpcPort int, out io.Writer) (*supervisor, error) {
	cmd := exec.Command(goreman, "-f", filepath.Join(dir, procfile), "-basedir", dir,
		"-p", strconv.Itoa(rpcPort), "-set-ports=false", "start")
	// goreman's RPC server (restart, stop a process) has no authentication
	// and listens on 0.0.0.0 unless told otherwise: loopback only.
	cmd.Env = append(os.Environ(), "GOREMAN_RPC_ADDR=127.0.0.1")
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: Ctrl-C reaches this process only, which stops
	// the services before the nodes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: start goreman (%s): %w", procfile, err)
	}
	s := &supervisor{name: procfile, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	return s, nil
}

// stop asks goreman to stop its processes (SIGINT) and waits; past
// stopTimeout it kills the whole group.
func (s *supervisor) stop(log *slog.Logger) {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		log.Warn("supervisor did not stop in time; killed", "procfile", s.name)
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// Run runs the plan until ctx ends: the nodes under one goreman, then
// (once every node reports healthy) provision, retried until the new
// cluster accepts it, then the services under a second goreman. It prints
// where to reach the cluster. When ctx ends, or either supervisor exits,
// it stops the services first, then the nodes.
func Run(ctx context.Context, p *Plan, goreman string, out io.Writer, log *slog.Logger) error {
	nodes, err := startSupervisor(goreman, p.Options.Dir, NodesProcfile, NodesRPCPort, out)
	if err != nil {
		return err
	}
	defer nodes.stop(log)
	if err := retry.Do(ctx, log, "nodes healthy", func(ctx context.Context) error {
		return healthy(ctx, p)
	}); err != nil {
		return err
	}
	if err := (retry.Policy{Attempt: 2 * time.Minute}).Do(ctx, log, "provision", func(ctx context.Context) error {
		return runProc(ctx, p.Provision, out)
	}); err != nil {
		return err
	}
	services, err := startSupervisor(goreman, p.Options.Dir, ServicesProcfile, ServicesRPCPort, out)
	if err != nil {
		return err
	}
	defer services.stop(log)
	printInfo(p, out)
	select {
	case <-ctx.Done():
		log.Info("stopping: services first, then nodes")
	case err := <-services.done:
		services.done <- err
		log.Error("the services' supervisor exited; stopping the nodes", "err", err)
	case err := <-nodes.done:
		nodes.done <- err
		log.Error("the nodes' supervisor exited; stopping the services", "err", err)
	}
	return nil
}

// healthy checks every node's /healthz.
func healthy(ctx context.Context, p *Plan) error {
	var errs []error
	for _, n := range p.Kit.Options.Nodes {
		url := "http://127.0.0.1:" + strconv.Itoa(n.HTTPPort) + "/healthz"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs = append(errs, fmt.Errorf("%s: /healthz %s", n.Name, resp.Status))
		}
	}
	return errors.Join(errs...)
}

func runProc(ctx context.Context, pr Proc, out io.Writer) error {
	cmd := exec.CommandContext(ctx, pr.Command[0], pr.Command[1:]...)
	cmd.Env = append(os.Environ(), pr.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", pr.Name, err)
	}
	return nil
}

func printInfo(p *Plan, out io.Writer) {
	fmt.Fprintf(out, "\n== deadletter cluster: %d nodes (R%d), %d service processes; Ctrl-C stops the services, then the nodes\n",
		len(p.Nodes), p.Kit.Options.Replicas, len(p.Services))
	fmt.Fprintf(out, "NATS_URL=%s\n", p.URLs)
	for _, n := range p.Kit.Options.Nodes {
		fmt.Fprintf(out, "  %s monitoring  http://127.0.0.1:%d/\n", n.Name, n.HTTPPort)
	}
	urls := p.MetricsURLs()
	names := make([]string, 0, len(urls))
	for n := range urls {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(out, "  %-13s %s\n", n, urls[n])
	}
	fmt.Fprintf(out, "nats contexts (one per user, in %s):\n", filepath.Dir(p.Context(access.Admin)))
	fmt.Fprintf(out, "  publish:  nats --context %s pub events.<domain>.<type> --header Nats-Msg-Id:<id> '<event>'\n", p.Context(string(access.RolePublisher)))
	fmt.Fprintf(out, "  admin:    nats --context %s stream info LEDGER\n", p.Context(access.Admin))
	fmt.Fprintf(out, "  operator: nats --context %s req %s '{}'\n", p.Context(access.DefaultPerson(access.RoleOperator)), api.AuditVerify)
	fmt.Fprintf(out, "restart one service: GOREMAN_RPC_SERVER=127.0.0.1:%d goreman run restart validator-1 (a node: port %d, n1)\n\n", ServicesRPCPort, NodesRPCPort)
}
