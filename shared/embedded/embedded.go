// Package embedded runs a NATS server with JetStream inside the current
// process: the single-machine deployment of `make run`, and the real broker
// behind every test. Production deployments use the same service binaries
// against an external NATS cluster instead.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config configures an embedded server.
type Config struct {
	// StoreDir is the JetStream file-store directory. Required.
	StoreDir string
	// Host is the client listen address. Default 127.0.0.1.
	Host string
	// Port is the client port; -1 picks a free one. Default 4222.
	Port int
	// ServerName names the server (stable across restarts of one store).
	// Default "deadletter".
	ServerName string
	// SyncAlways makes JetStream fsync every write before acknowledging it
	// (sync_interval: always). Without it an OS crash or power loss can
	// lose acknowledged writes.
	SyncAlways bool
	// MaxPayload is the largest message the server accepts. Default 8 MiB,
	// room for a quarantine record of the largest event EVENTS accepts.
	MaxPayload int32
	// ConfigText, when set, is nats-server configuration text holding
	// only an "accounts" block (access.ServerConfig: the accounts, users
	// and permissions of the trust boundary), rendered with the options
	// above into one configuration (File).
	ConfigText string
	// Security sets TLS and store encryption (a Host other than loopback
	// needs TLS); applied after ConfigText.
	Security Security
	// Log turns on the server's own log (to stderr).
	Log bool
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default 10 s.
	ReadyTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Port == 0 {
		c.Port = 4222
	}
	if c.ServerName == "" {
		c.ServerName = "deadletter"
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 10 * time.Second
	}
}

// ErrNotReady is returned when the server does not accept connections in time.
var ErrNotReady = errors.New("embedded: server not ready")

// ErrAddrInUse is returned when the client listen address is taken (the
// server would only fail to become ready); the error names the address.
var ErrAddrInUse = errors.New("already in use (another deadletter or nats-server?)")

// checkListen refuses a client address another process listens on: the
// server itself only logs that and never becomes ready.
func checkListen(host string, port int) error {
	if port <= 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is %w", addr, ErrAddrInUse)
	}
	if err != nil {
		return fmt.Errorf("embedded: listen on %s: %w", addr, err)
	}
	return l.Close()
}

// Start starts a server and waits until it accepts connections.
func Start(cfg Config) (*server.Server, error) {
	cfg.defaults()
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded: StoreDir is required")
	}
	if err := checkListen(cfg.Host, cfg.Port); err != nil {
		return nil, err
	}
	opts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if cfg.Log {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(cfg.ReadyTimeout) {
		s.Shutdown()
		s.WaitForShutdown()
		// Taken between the check and the server's own listen?
		if err := checkListen(cfg.Host, cfg.Port); errors.Is(err, ErrAddrInUse) {
			return nil, err
		}
		return nil, ErrNotReady
	}
	return s, nil
}

// options renders cfg into the server's options.
func (cfg Config) options() (*server.Options, error) {
	// The same renderer as a cluster's generated files (File): the
	// embedded server runs the configuration an operator would deploy.
	text, err := File{
		ServerName: cfg.ServerName, Host: cfg.Host, Port: cfg.Port,
		StoreDir: cfg.StoreDir, SyncAlways: cfg.SyncAlways, MaxPayload: cfg.MaxPayload,
		Accounts: cfg.ConfigText,
	}.Render()
	if err != nil {
		return nil, err
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(text); err != nil {
		return nil, fmt.Errorf("embedded: configuration: %w", err)
	}
	opts.NoLog = !cfg.Log
	opts.NoSigs = true
	if err := cfg.Security.Apply(opts, cfg.Host); err != nil {
		return nil, err
	}
	return opts, nil
}

// Reload applies cfg to the running server s, which Start started with the
// same cfg but for ConfigText (the accounts and users): the server's own
// configuration reload, which closes every connection the new
// configuration no longer authorizes (a disabled user, a rotated
// password). A Port of -1 or 0 is taken as the port s listens on.
func Reload(s *server.Server, cfg Config) error {
	if cfg.Port <= 0 {
		if a, ok := s.Addr().(*net.TCPAddr); ok {
			cfg.Port = a.Port
		}
	}
	cfg.defaults()
	opts, err := cfg.options()
	if err != nil {
		return err
	}
	if err := s.ReloadOptions(opts); err != nil {
		return fmt.Errorf("embedded: reload: %w", err)
	}
	return nil
}
