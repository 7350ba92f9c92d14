// Package natstest starts real embedded NATS servers for tests: a random
// port, a t.TempDir() store, and shutdown registered with t.Cleanup. It also
// provides polling helpers, so tests wait for conditions instead of sleeping.
package natstest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/streams"
)

// Server is a running test server and the directory of its store.
type Server struct {
	*server.Server
	tb       testing.TB
	StoreDir string
	cfg      embedded.Config
}

// Start starts a server with JetStream on a random port and a fresh store.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartConfig(tb, embedded.Config{StoreDir: tb.TempDir()})
}

// StartConfig starts a server with cfg (port forced random, store dir
// defaulting to a temp dir).
func StartConfig(tb testing.TB, cfg embedded.Config) *Server {
	tb.Helper()
	cfg.Port = -1
	if cfg.StoreDir == "" {
		cfg.StoreDir = tb.TempDir()
	}
	s, err := embedded.Start(cfg)
	if err != nil {
		tb.Fatalf("natstest: start server: %v", err)
	}
	// A restart reuses the port, so clients with reconnect enabled come back.
	cfg.Port = s.Addr().(*net.TCPAddr).Port
	ts := &Server{Server: s, tb: tb, StoreDir: cfg.StoreDir, cfg: cfg}
	tb.Cleanup(ts.Stop)
	return ts
}

// Secured is a test server that enforces deadletter's trust boundary
// (access.ServerConfig): the services' account with JetStream, an account
// per person role, every user authenticated.
type Secured struct {
	*Server
	// Secrets are the users' credentials.
	Secrets *access.Secrets
}

// StartSecured starts a server with the access table's accounts and users
// (the default people, one per role) and provisions, as the admin, every
// stream and bucket with o.
func StartSecured(tb testing.TB, o streams.Options) *Secured {
	tb.Helper()
	// Cheap password hashes: the server checks them under the race detector.
	sec, err := access.NewSecrets(access.DefaultPeople(), access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		tb.Fatalf("natstest: secrets: %v", err)
	}
	text, err := access.ServerConfig(sec)
	if err != nil {
		tb.Fatalf("natstest: server config: %v", err)
	}
	s := &Secured{Server: StartConfig(tb, embedded.Config{ConfigText: text}), Secrets: sec}
	js, err := jetstream.New(s.ConnectAs(tb, access.Admin))
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		tb.Fatalf("natstest: provision: %v", err)
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		tb.Fatalf("natstest: provision WORM: %v", err)
	}
	return s
}

// ConnectAs opens a connection as user (a service user, the admin or a
// person), with its private inbox prefix, closed at cleanup.
func (s *Secured) ConnectAs(tb testing.TB, user string, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	return s.Connect(tb, append(s.Secrets.NATSOptions(user), append(opts, nats.Name("test-"+user))...)...)
}

// Stop shuts the server down and waits for it to finish.
func (s *Server) Stop() {
	if s.Server == nil {
		return
	}
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// Restart stops the server and starts a new one on the same store and port,
// as a crashed-and-restarted broker would come back.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	n, err := embedded.Start(s.cfg)
	if err != nil {
		s.tb.Fatalf("natstest: restart server: %v", err)
	}
	s.Server = n
}

// Connect opens a connection closed at cleanup.
func (s *Server) Connect(tb testing.TB, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		tb.Fatalf("natstest: connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new connection.
func (s *Server) JetStream(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(s.Connect(tb))
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

// Provision creates the core streams and QUARANTINE with test-friendly options.
func (s *Server) Provision(tb testing.TB, o streams.Options) {
	tb.Helper()
	js := s.JetStream(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		tb.Fatalf("natstest: provision: %v", err)
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		tb.Fatalf("natstest: provision quarantine: %v", err)
	}
}

// CheckFor polls fn every interval until it returns nil or total (scaled
// by Patience, the one place waits are derived from) elapses, then fails
// the test with fn's last error.
func CheckFor(tb testing.TB, total, interval time.Duration, fn func() error) {
	tb.Helper()
	total = Patience(tb, total)
	deadline := time.Now().Add(total)
	var err error
	for {
		if err = fn(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: condition not met after %s: %v", total, err)
		}
		time.Sleep(interval)
	}
}
