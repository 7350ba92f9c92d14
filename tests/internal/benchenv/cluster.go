package benchenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/streams"
)

// ServeNodeFlag is the flag a bench's main must answer by calling
// ServeNode with the arguments after it (flag.Args()), for StartCluster.
const ServeNodeFlag = "serve-node"

// ServeNode is the child side of StartCluster: it runs one node of a
// cluster (args: name, store dir, client port, cluster port, the routes
// comma-separated, "sync" or "nosync"; no routes: a server on its own,
// with no cluster), prints its client URL on a line of its own, and runs
// until its standard input closes.
func ServeNode(args []string) error {
	if len(args) != 6 {
		return fmt.Errorf("benchenv: -%s takes name dir client-port cluster-port routes sync|nosync", ServeNodeFlag)
	}
	port, err1 := strconv.Atoi(args[2])
	cport, err2 := strconv.Atoi(args[3])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	o := &server.Options{
		ServerName: args[0], Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: args[1], SyncAlways: args[5] == "sync",
		Cluster: server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: cport},
		Routes:  server.RoutesFromStr(args[4]),
		NoSigs:  true,
	}
	if args[4] == "" {
		o.Cluster, o.Routes = server.ClusterOpts{}, nil
	}
	s, err := server.NewServer(o)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return errors.New("benchenv: node did not start")
	}
	serveUntilStdinCloses(s)
	return nil
}

// StartCluster starts a cluster of nodes servers on this machine, each in
// a child process of its own (this executable run with -serve-node, see
// ServeNodeFlag), fsyncing every write when syncAlways, and provisions the
// core streams and the WORM stores with nodes replicas, as Start does for
// one server. With nodes 1 it is one server on its own, in a process of
// its own, as a deployment runs it (Start embeds it in this process). The
// Env's CPUTime counts the nodes' CPU with this process's.
func StartCluster(ctx context.Context, nodes int, syncAlways bool) (*Env, error) {
	dir, err := os.MkdirTemp("", "deadletter-bench-cluster-")
	if err != nil {
		return nil, err
	}
	e := &Env{dir: dir, Options: streams.DefaultOptions()}
	e.Options.Replicas = nodes
	ports := make([][2]int, nodes)
	var routes []string
	for i := range ports {
		for k := range 2 {
			if ports[i][k], err = FreePort(); err != nil {
				e.Close()
				return nil, err
			}
		}
		if nodes > 1 {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i][1]))
		}
	}
	mode := "nosync"
	if syncAlways {
		mode = "sync"
	}
	self, err := os.Executable()
	if err != nil {
		e.Close()
		return nil, err
	}
	var urls []string
	for i := range ports {
		name := fmt.Sprintf("n%d", i+1)
		cmd := exec.Command(self, "-"+ServeNodeFlag, name, filepath.Join(dir, name), strconv.Itoa(ports[i][0]),
			strconv.Itoa(ports[i][1]), strings.Join(routes, ","), mode)
		url, stop, err := startChild(cmd)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		e.nodes = append(e.nodes, node{pid: cmd.Process.Pid, stop: stop})
		urls = append(urls, url)
	}
	e.url = strings.Join(urls, ",")
	if e.NC, err = nats.Connect(e.url); err != nil {
		e.Close()
		return nil, err
	}
	if e.JS, err = jetstream.New(e.NC); err != nil {
		e.Close()
		return nil, err
	}
	// The meta leader is elected after the nodes listen: poll until
	// JetStream answers.
	deadline := time.Now().Add(60 * time.Second)
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := e.JS.AccountInfo(actx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			e.Close()
			return nil, fmt.Errorf("benchenv: the cluster's JetStream never answered: %w", err)
		}
		time.Sleep(100 * time.Millisecond) // a poll: the meta leader is being elected
	}
	if err := e.provision(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// node is a cluster node's child process.
type node struct {
	pid  int
	stop func()
}

// CPUTime is the user+sys CPU time so far of this process and of the
// cluster nodes StartCluster started.
func (e *Env) CPUTime() time.Duration {
	t := CPUTime()
	for _, n := range e.nodes {
		t += ChildCPUTime(n.pid)
	}
	return t
}

// startChild starts cmd, which prints its client URL on its first line of
// output and stops when its standard input closes.
func startChild(cmd *exec.Cmd) (url string, stop func(), err error) {
	DieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("server did not start: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

// FreePort returns a loopback TCP port nobody listens on at the time of
// the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
