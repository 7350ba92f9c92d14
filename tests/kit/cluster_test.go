// Package kit tests the generated deployment kit (deadletter kit) on a real
// 3-node cluster: the servers run the generated files, the admin provisions
// R3 streams, the validator and the quarantiner run with their generated
// nkey seeds, and provision --check tells a matching cluster from one whose
// node runs another configuration.
package kit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ls []net.Listener
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

// cluster is a running cluster of the generated files.
type cluster struct {
	dir     string
	sec     *access.Secrets
	opts    kit.Options
	servers []*server.Server
}

// generate writes a 3-node kit on loopback ports into a temporary directory.
func generate(tb testing.TB) *cluster {
	tb.Helper()
	dir := tb.TempDir()
	o := kit.Cluster(3)
	o.ListenHost, o.HTTPHost = "127.0.0.1", "127.0.0.1"
	ports := freePorts(tb, 9)
	for i := range o.Nodes {
		n := &o.Nodes[i]
		n.Host = "127.0.0.1"
		n.ClientPort, n.ClusterPort, n.HTTPPort = ports[3*i], ports[3*i+1], ports[3*i+2]
		n.StoreDir = filepath.Join(dir, "store", n.Name)
		n.Zone = "az-" + string(rune('a'+i)) // a failure domain each: R3 streams span the three
	}
	// Cheap password hashes: the servers check them under the race detector.
	sec, err := kit.LoadSecrets(dir, access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := kit.Generate(dir, sec, o); err != nil {
		tb.Fatal(err)
	}
	return &cluster{dir: dir, sec: sec, opts: o}
}

func (c *cluster) confPath(node string) string {
	return filepath.Join(c.dir, kit.NodesDir, node, kit.ServerConfFile)
}

// start runs every node from its generated file, in process, and waits
// until JetStream answers the admin.
func (c *cluster) start(tb testing.TB) {
	tb.Helper()
	for _, n := range c.opts.Nodes {
		opts, err := server.ProcessConfigFile(c.confPath(n.Name))
		if err != nil {
			tb.Fatalf("%s: %v", n.Name, err)
		}
		opts.NoSigs, opts.NoLog = true, true
		s, err := server.NewServer(opts)
		if err != nil {
			tb.Fatalf("%s: %v", n.Name, err)
		}
		go s.Start()
		c.servers = append(c.servers, s)
		tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	}
	for _, s := range c.servers {
		if !s.ReadyForConnections(20 * time.Second) {
			tb.Fatal("a node did not start")
		}
	}
	js := c.js(tb, access.Admin)
	natstest.CheckFor(tb, 60*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err
	})
}

// connect connects as user with its generated credentials: a service with
// the nkey seed file the kit wrote, a person or the admin with its context.
func (c *cluster) connect(tb testing.TB, user string) *nats.Conn {
	tb.Helper()
	var nc *nats.Conn
	var err error
	if access.Lookupable(user) && user != access.Admin {
		var o nats.Option
		if o, err = nats.NkeyOptionFromSeed(filepath.Join(c.dir, kit.ServicesDir, user+".nk")); err != nil {
			tb.Fatal(err)
		}
		nc, err = nats.Connect(c.opts.ClientURLs(), o, nats.CustomInboxPrefix(access.InboxPrefix(user)), nats.MaxReconnects(-1))
	} else {
		nc, err = kit.ConnectContext(filepath.Join(c.dir, kit.ContextsDir, user+".json"), "")
	}
	if err != nil {
		tb.Fatalf("connect as %s: %v", user, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

func (c *cluster) js(tb testing.TB, user string) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(c.connect(tb, user))
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// provisionBinary builds the provision command once per test.
func provisionBinary(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "provision")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/deadletter/deadletter/services/deadletter/cmd/provision")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build provision: %v\n%s", err, out)
	}
	return bin
}

// check runs provision --check on the kit and returns its exit code and
// output.
func (c *cluster) check(tb testing.TB, bin string) (int, string) {
	tb.Helper()
	cmd := exec.Command(bin, "--check", "--kit", c.dir, "--replicas", "3")
	cmd.Env = append(os.Environ(), "DEADLETTER_REPLICAS=3")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	tb.Fatalf("provision --check: %v", err)
	return 0, ""
}

// TestClusterFromGeneratedFiles runs the pipeline on a 3-node R3 cluster
// started from the kit's files.
func TestClusterFromGeneratedFiles(t *testing.T) {
	natstest.Long(t, "a cluster of server processes")
	bin := provisionBinary(t)
	c := generate(t)
	c.start(t)

	so := streams.DefaultOptions()
	so.Replicas = 3
	vcfg, qcfg := validator.DefaultConfig(), quarantiner.DefaultConfig()
	vcfg.Streams, qcfg.Streams = so, so
	vcfg.Provision, vcfg.CreateConsumer = false, false
	qcfg.Provision, qcfg.CreateConsumer = false, false
	{
		js := c.js(t, access.Admin)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := streams.EnsureCore(ctx, js, so); err != nil {
			t.Fatal(err)
		}
		if err := streams.EnsureWORM(ctx, js, so); err != nil {
			t.Fatal(err)
		}
		if err := stack.ProvisionConsumers(ctx, js, vcfg, qcfg); err != nil {
			t.Fatal(err)
		}
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(down.Close)
	vcfg.DownstreamURL = down.URL
	log := slog.New(slog.DiscardHandler)
	v, err := validator.New(c.connect(t, access.Validator), vcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	q, err := quarantiner.New(c.connect(t, access.Quarantiner), qcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{v.Run, q.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				t.Errorf("service: %v", err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	valid, err := fs.ReadFile(schemas.FS, "testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		t.Fatal(err)
	}
	pub := c.js(t, string(access.RolePublisher))
	for _, data := range [][]byte{valid, []byte(`{"not": "valid"}`)} {
		pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := pub.Publish(pctx, "events.pharmacy.dispense", data)
		pcancel()
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	admin := c.js(t, access.Admin)
	for _, tc := range []struct{ name, stream string }{
		{"the valid event commits", subjects.LedgerStream},
		{"the malformed event is quarantined", subjects.QuarantineStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
				ictx, icancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer icancel()
				s, err := admin.Stream(ictx, tc.stream)
				if err != nil {
					return err
				}
				info := s.CachedInfo()
				if info.Config.Replicas != 3 {
					t.Fatalf("%s has %d replicas", tc.stream, info.Config.Replicas)
				}
				if info.State.Msgs != 1 {
					return fmt.Errorf("%s holds %d messages", tc.stream, info.State.Msgs)
				}
				return nil
			})
		})
	}

	t.Run("provision --check passes on the generated cluster", func(t *testing.T) {
		if code, out := c.check(t, bin); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("provision --check names a node whose configuration changed", func(t *testing.T) {
		path := c.confPath("n2")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		orig := slices.Clone(b)
		// A hand edit: a reloadable setting, applied by a reload.
		edited := bytes.Replace(b, []byte(`"max_payload"`), []byte(`"max_connections": 1000, "max_payload"`), 1)
		if err := os.WriteFile(path, edited, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := c.servers[1].Reload(); err != nil {
			t.Fatal(err)
		}
		// The kit's own file is the source: restore it so the drift is
		// between the source and the server, as in production.
		if err := os.WriteFile(path, orig, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out := c.check(t, bin)
		if code != 1 || !strings.Contains(out, "server n2: config_digest is") || strings.Contains(out, "server n1") || strings.Contains(out, "server n3") {
			t.Fatalf("exit %d, want 1 naming n2 only:\n%s", code, out)
		}
		t.Log(out)
	})
	t.Run("provision --check names a stream that drifted", func(t *testing.T) {
		ictx, icancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer icancel()
		cfg := streams.Failures(so)
		cfg.MaxBytes /= 2
		if _, err := admin.UpdateStream(ictx, cfg); err != nil {
			t.Fatal(err)
		}
		code, out := c.check(t, bin)
		if code != 1 || !strings.Contains(out, "stream FAILURES: max bytes is") {
			t.Fatalf("exit %d, want 1 naming FAILURES:\n%s", code, out)
		}
	})
}
