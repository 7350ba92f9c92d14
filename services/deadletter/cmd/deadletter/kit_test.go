package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/replica"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// natsServerEnv makes the test binary a nats-server process: nats-server's
// own command line (server.ConfigureOptions) with the arguments in the
// variable, separated by newlines. -t checks the configuration and exits,
// as `nats-server -t -c FILE` does; otherwise the server runs until its
// standard input closes.
const natsServerEnv = "DEADLETTER_KIT_NATS_SERVER"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(commandEnv); ok {
		os.Args = append([]string{"deadletter"}, strings.FieldsFunc(args, func(r rune) bool { return r == '\n' })...)
		main()
		return
	}
	if args := os.Getenv(natsServerEnv); args != "" {
		if err := natsServer(strings.Split(args, "\n")); err != nil {
			fmt.Fprintln(os.Stderr, "nats-server:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// natsServer is nats-server's main (nats-server/v2 main.go) without its
// signal handling.
func natsServer(args []string) error {
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	o, err := server.ConfigureOptions(fs, args, server.PrintServerAndExit, fs.Usage, server.PrintTLSHelpAndDie)
	if err != nil {
		return err
	}
	if o.CheckConfig {
		fmt.Printf("nats-server: configuration file %s is valid (%s)\n", o.ConfigFile, o.ConfigDigest())
		return nil
	}
	o.NoSigs = true
	s, err := server.NewServer(o)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(60 * time.Second) {
		return errors.New("not ready")
	}
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// natsServerCmd is the test binary as nats-server with args.
func natsServerCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), natsServerEnv+"="+strings.Join(args, "\n"))
	return cmd
}

// startNATS runs nats-server -c conf in a process of its own until the
// test ends.
func startNATS(t *testing.T, conf string) {
	t.Helper()
	cmd := natsServerCmd("-c", conf)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("nats-server -c %s:\n%s", conf, log.String())
		}
	})
}

// portBlock returns the first of n consecutive ports that are all free
// now on 127.0.0.1 (a kit's nodes take theirs at fixed steps). It looks
// below the kernel's ephemeral range (32768 and up), where the other
// tests' servers, which listen on port 0, never take a port meanwhile.
func portBlock(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(12000-n)
		free := true
		for p := base; p < base+n && free; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				free = false
				continue
			}
			_ = l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestKitCommandRuns generates kits with `deadletter kit`, checks every
// generated server file with nats-server's own -t, starts every server
// from its file as a process, and, with --replica, creates the backup
// account's mirrors and the replica's mirrors of them and sees the
// records reach the replica.
func TestKitCommandRuns(t *testing.T) {
	natstest.Long(t, "a cluster of server processes from the generated kit")
	for _, tc := range []struct {
		name    string
		nodes   int
		replica bool
	}{
		{"one node", 1, false}, // no cluster: it rendered "routes": null, which nats-server refused
		{"one node and a replica", 1, true},
		{"three nodes and a replica", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "kit")
			// One block of free ports: with --port-step 3, node i's client,
			// cluster and HTTP ports are b, b+1, b+2 plus 3i, its leaf port
			// b+3n plus 3i, and the replica's come after them.
			n := tc.nodes
			b := portBlock(t, 6*n+2)
			args := []string{"--out", out, "--nodes", strconv.Itoa(n), "--hosts", strings.TrimSuffix(strings.Repeat("127.0.0.1,", n), ","),
				"--listen-host", "127.0.0.1", "--client-port", strconv.Itoa(b), "--cluster-port", strconv.Itoa(b + 1),
				"--http-port", strconv.Itoa(b + 2), "--port-step", "3", "--store-dir", filepath.Join(dir, "store", "{node}")}
			rClient, rHTTP, leaf := b+6*n, b+6*n+1, b+3*n
			if tc.replica {
				args = append(args, "--replica", "dr1", "--replica-host", "127.0.0.1", "--replica-client-port", strconv.Itoa(rClient),
					"--replica-http-port", strconv.Itoa(rHTTP), "--leaf-port", strconv.Itoa(leaf))
			}
			var stdout bytes.Buffer
			if err := runKit(args, &stdout); err != nil {
				t.Fatalf("deadletter kit %s: %v", strings.Join(args, " "), err)
			}
			m, err := kit.LoadManifest(out)
			if err != nil {
				t.Fatal(err)
			}
			var confs []string
			for _, n := range m.Options.Nodes {
				confs = append(confs, filepath.Join(out, kit.NodesDir, n.Name, kit.ServerConfFile))
			}
			if tc.replica {
				if m.Options.Replica == nil || m.Options.Replica.ClientPort != rClient || m.Options.Replica.LeafPort != leaf ||
					m.Options.Replica.StoreDir != filepath.Join(dir, "store", "dr1") {
					t.Fatalf("the manifest's replica: %+v", m.Options.Replica)
				}
				if !strings.Contains(stdout.String(), kit.ReplicaConfPath(out, "dr1")) {
					t.Errorf("the command does not name the replica's file:\n%s", stdout.String())
				}
				confs = append(confs, kit.ReplicaConfPath(out, "dr1"))
			}
			for _, c := range confs {
				b, err := natsServerCmd("-t", "-c", c).CombinedOutput()
				if err != nil || !strings.Contains(string(b), "is valid") {
					t.Fatalf("nats-server -t -c %s: %v\n%s", c, err, b)
				}
			}
			for _, c := range confs {
				startNATS(t, c)
			}

			dial := func(user, url string) *nats.Conn {
				var nc *nats.Conn
				natstest.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
					var err error
					nc, err = kit.ConnectContext(filepath.Join(out, kit.ContextsDir, user+".json"), url, nats.MaxReconnects(-1))
					return err
				})
				t.Cleanup(nc.Close)
				return nc
			}
			retry := func(what string, fn func(ctx context.Context) error) {
				t.Helper()
				natstest.CheckFor(t, 90*time.Second, 500*time.Millisecond, func() error {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if err := fn(ctx); err != nil {
						return fmt.Errorf("%s: %w", what, err)
					}
					return nil
				})
			}
			admin, err := jetstream.New(dial(access.Admin, ""))
			if err != nil {
				t.Fatal(err)
			}
			so := streams.DefaultOptions()
			so.Replicas = m.Options.Replicas
			retry("provision", func(ctx context.Context) error {
				if err := streams.EnsureCore(ctx, admin, so); err != nil {
					return err
				}
				return streams.EnsureWORM(ctx, admin, so)
			})
			const records = 20
			for i := range records {
				subject := subjects.Quarantine("pharmacy", fmt.Sprintf("pharmacy_kit%04d", i))
				body := fmt.Appendf(nil, `{"dlq_id":"pharmacy_kit%04d","party":"Müller & Söhne <Großhandel>","note":"\"quoted\""}`, i)
				retry("publish", func(ctx context.Context) error { _, err := admin.Publish(ctx, subject, body); return err })
			}
			if !tc.replica {
				return
			}
			bak := dial(access.BackupAdmin, "")
			retry("the backup account's mirrors", func(ctx context.Context) error { return backup.EnsureMirrors(ctx, bak) })
			drURL := fmt.Sprintf("nats://127.0.0.1:%d", rClient)
			dr := dial(access.Admin, drURL)
			retry("the replica's mirrors", func(ctx context.Context) error {
				_, err := replica.EnsureFromBackup(ctx, dr, m.Options.Replica.PrimaryDomain, 1)
				return err
			})
			djs, err := jetstream.New(dr)
			if err != nil {
				t.Fatal(err)
			}
			natstest.CheckFor(t, 90*time.Second, 200*time.Millisecond, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s, err := djs.Stream(ctx, subjects.QuarantineStream)
				if err != nil {
					return err
				}
				info, err := s.Info(ctx)
				if err != nil {
					return err
				}
				if info.Config.Mirror == nil || info.State.Msgs != records || info.State.LastSeq != records {
					return fmt.Errorf("the replica's QUARANTINE: mirror %v, %d messages up to %d, want %d", info.Config.Mirror, info.State.Msgs, info.State.LastSeq, records)
				}
				return nil
			})
		})
	}
}

// TestKitCommandRefuses: replica options without --replica, and stray
// arguments, are refused (one row each).
func TestKitCommandRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"replica host without a replica", []string{"--replica-host", "dr.example.com"}, "--replica-host without --replica"},
		{"leaf port without a replica", []string{"--leaf-port", "7423"}, "--leaf-port without --replica"},
		{"a stray argument", []string{"three"}, "unexpected arguments"},
		{"a replica named as a node", []string{"--replica", "n1", "--hosts", "127.0.0.1", "--nodes", "1", "--listen-host", "127.0.0.1", "--replica-host", "127.0.0.1"}, "a primary node's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--out", filepath.Join(t.TempDir(), "kit")}, tc.args...)
			var out bytes.Buffer
			err := runKit(args, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("deadletter kit %s: %v, want %q", strings.Join(args, " "), err, tc.want)
			}
		})
	}
}
