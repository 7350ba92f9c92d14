// Package stack runs the whole of deadletter in one process: an embedded
// NATS server with JetStream, the provisioning of every stream, and all the
// services, each on its own connection as it would be in production. It is
// what `make run` starts.
package stack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/services/console"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/runner"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Config configures the all-in-one stack.
type Config struct {
	// DataDir holds the JetStream store. Default "data".
	DataDir string
	// Host and Port are the NATS client listen address. Defaults
	// 127.0.0.1 and 4222; Port -1 picks a free port.
	Host string
	Port int
	// SyncAlways fsyncs every JetStream write before acknowledging it.
	// Default true: a compliance store must not lose acknowledged writes.
	SyncAlways bool
	// Streams sizes the streams.
	Streams streams.Options
	// Validator configures the validator.
	Validator validator.Config
	// Quarantiner configures the quarantiner.
	Quarantiner quarantiner.Config
	// Redriver configures the redriver.
	Redriver redriver.Config
	// Auditor configures the auditor.
	Auditor auditor.Config
	// Security sets the server's TLS and the store's at-rest encryption. A
	// Host other than loopback refuses to start without TLS.
	Security embedded.Security
	// AnchorDir holds the auditor's signing key (an nkeys seed, mode 0600)
	// and the export of its signed checkpoints (checkpoints.jsonl), the
	// anchor `verify --anchor` checks the store against. It must live
	// outside DataDir: whoever can rewrite the store must not hold them.
	// Default "anchors".
	AnchorDir string
	// PasswordCost is the bcrypt cost of the people's and the admin's
	// password hashes. Default access.PasswordHashCost (the lowest: the
	// passwords are 192 random bits; a wrong one costs the server about a
	// millisecond). A data directory of an earlier version, hashed at a
	// higher cost, is hashed again at start (same passwords).
	PasswordCost int
	// MetricsAddr is where /metrics is served (Prometheus text format), one
	// registry for every service of the process. Default 127.0.0.1:9464;
	// empty disables it.
	MetricsAddr string
	// ConsoleAddr is where the web console listens (package console; it
	// needs TLS off loopback). Default "": no console (`make run` sets
	// 127.0.0.1:8090). Console configures the rest of it; its NATS URL
	// and TLS trust are the stack's own server's.
	ConsoleAddr string
	Console     console.Config
	// Out receives the start-up banner. Default: discarded.
	Out io.Writer
	// CloseTimeout bounds the wait at shutdown for the services'
	// connections to drain and close (0: runner.DefaultDrainTimeout); a
	// connection still open then is closed.
	CloseTimeout time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		DataDir:     "data",
		Host:        "127.0.0.1",
		Port:        4222,
		SyncAlways:  true,
		Streams:     streams.DefaultOptions(),
		Validator:   validator.DefaultConfig(),
		Quarantiner: quarantiner.DefaultConfig(),
		Redriver:    redriver.DefaultConfig(),
		Auditor:     auditor.DefaultConfig(),
		Console:     console.DefaultConfig(),
		MetricsAddr: "127.0.0.1:9464",
		AnchorDir:   "anchors",
		Out:         io.Discard,
	}
}

// LoadEnv overrides cfg from the environment: DEADLETTER_DATA_DIR,
// DEADLETTER_HOST, DEADLETTER_PORT, DEADLETTER_SYNC_ALWAYS,
// DEADLETTER_CONSOLE_ADDR, and every service's own variables.
func (c *Config) LoadEnv(env *config.Env) {
	env.String("DEADLETTER_DATA_DIR", &c.DataDir)
	env.String("DEADLETTER_HOST", &c.Host)
	env.Int("DEADLETTER_PORT", &c.Port)
	env.Bool("DEADLETTER_SYNC_ALWAYS", &c.SyncAlways)
	env.String("DEADLETTER_METRICS_ADDR", &c.MetricsAddr)
	env.String("DEADLETTER_ANCHOR_DIR", &c.AnchorDir)
	env.String("DEADLETTER_CONSOLE_ADDR", &c.ConsoleAddr)
	c.Security.LoadEnv(env)
	env.Int("DEADLETTER_REPLICAS", &c.Streams.Replicas)
	c.Console.LoadEnv(env)
	env.Retention(&c.Streams.Retention)
	c.Validator.LoadEnv(env)
	c.Quarantiner.LoadEnv(env)
	c.Redriver.LoadEnv(env)
	c.Auditor.LoadEnv(env)
}

func (c Config) validate() error {
	if c.DataDir == "" {
		return errors.New("stack: data directory is required")
	}
	if c.AnchorDir == "" {
		return errors.New("stack: an anchor directory is required")
	}
	if inside(c.AnchorDir, c.DataDir) {
		return fmt.Errorf("stack: the anchor directory %s must be outside the data directory %s", c.AnchorDir, c.DataDir)
	}
	if c.Streams.Replicas != 1 {
		return errors.New("stack: the embedded server is a single node: replicas must be 1")
	}
	return c.Streams.Validate()
}

// inside reports whether path is dir or below it.
func inside(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Files of the anchor directory.
const (
	// SigningKeyFile is the auditor's signing seed (mode 0600).
	SigningKeyFile = "audit-signing.nk"
	// ExportFile receives every signed checkpoint, one JSON line each.
	ExportFile = "checkpoints.jsonl"
)

// CredentialsFile is the name, in the data directory, of the file that keeps
// every NATS user's secret across restarts (mode 0600): the services' nkey
// seeds, the admin's and the people's passwords (access.Secrets).
const CredentialsFile = "credentials.json"

// ContextsDir is the directory, in the data directory, of the natscli
// context files written for each person (mode 0600): `nats --context
// data/contexts/amara.okafor.json ...` connects as Amara Okafor, an operator.
const ContextsDir = "contexts"

// Stack is a running all-in-one deployment.
type Stack struct {
	cfg Config
	log *slog.Logger
	srv *server.Server
	// ready is closed once every service is consuming.
	ready chan struct{}
	// reg is the one metrics registry of the process.
	reg *prometheus.Registry
	// metricsURL is where /metrics is served, once Ready.
	metricsURL string
	// Validator is the running validator (for tests and stats).
	Validator *validator.Service
	// Quarantiner is the running quarantiner.
	Quarantiner *quarantiner.Service
	// Redriver is the running redriver.
	Redriver *redriver.Service
	// Auditor is the running auditor.
	Auditor *auditor.Service
	// Console is the running web console (nil without ConsoleAddr).
	Console *console.Console
	// earlier is set when the store began empty beside the anchors of an
	// earlier store (checkEarlierAnchors).
	earlier *earlierStore
	// auditKey is the auditor's public signing key; exportFile receives its
	// signed checkpoints.
	auditKey, exportFile string
	// creds are the NATS users' secrets, kept in the data directory;
	// credsMu guards it (the people are reloaded while running).
	credsMu sync.Mutex
	creds   *access.Secrets
	// embCfg is the embedded server's configuration (reloaded with new
	// people, see watchPeople).
	embCfg embedded.Config
	// loadedHook, when set (tests), runs in each reload of the people
	// between reading the file and applying it.
	loadedHook func()
	// unregistered is set while the people's records in AUDIT may lag
	// the people applied (registerPeople failed): watchPeople tries again.
	unregistered atomic.Bool
}

// New prepares a stack; Run starts it.
func New(cfg Config, log *slog.Logger) (*Stack, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	cfg.Streams.SyncAlways = cfg.SyncAlways // the embedded server's, which the services' batchers follow
	cfg.Validator.Streams = cfg.Streams
	cfg.Quarantiner.Streams = cfg.Streams
	cfg.Redriver.Streams = cfg.Streams
	if cfg.Auditor.Retention == nil {
		cfg.Auditor.Retention = cfg.Streams.Retention // the one retention of the stack
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Validator.Registerer = reg
	cfg.Quarantiner.Registerer = reg
	cfg.Redriver.Registerer = reg
	cfg.Auditor.Registerer = reg
	return &Stack{cfg: cfg, log: log, ready: make(chan struct{}), reg: reg}, nil
}

// Ready is closed once the server runs and every service has started.
func (s *Stack) Ready() <-chan struct{} { return s.ready }

// ClientURL is the NATS URL clients connect to (valid once Ready).
func (s *Stack) ClientURL() string { return s.srv.ClientURL() }

// MetricsURL is the URL of /metrics (valid once Ready; empty when disabled).
func (s *Stack) MetricsURL() string { return s.metricsURL }

// Registry is the process's metrics registry.
func (s *Stack) Registry() *prometheus.Registry { return s.reg }

// serveMetrics serves /metrics until ctx is done.
func (s *Stack) serveMetrics(ctx context.Context) (func(), error) {
	if s.cfg.MetricsAddr == "" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("stack: metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.metricsURL = "http://" + l.Addr().String() + "/metrics"
	go func() { _ = srv.Serve(l) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// Run starts the server, provisions the streams, runs every service until
// ctx is done, then shuts down in order: services drain their consumers and
// finish the work in flight, their connections flush, and only then does the
// server stop.
func (s *Stack) Run(ctx context.Context) error {
	// The trust boundary of package access: the services' account (one
	// nkey user per service, the break-glass admin), an account per person
	// role; every connection authenticates.
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("stack: data directory: %w", err)
	}
	var secOpts []access.Option
	if s.cfg.PasswordCost > 0 {
		secOpts = append(secOpts, access.WithBcryptCost(s.cfg.PasswordCost))
	}
	credsFile := filepath.Join(s.cfg.DataDir, CredentialsFile)
	creds, loaded, err := s.loadPeople(credsFile, secOpts)
	if err != nil {
		return err
	}
	s.creds = creds
	text, err := access.ServerConfig(creds)
	if err != nil {
		return err
	}
	s.embCfg = embedded.Config{
		StoreDir: s.cfg.DataDir, Host: s.cfg.Host, Port: s.cfg.Port, SyncAlways: s.cfg.SyncAlways,
		ConfigText: text, Security: s.cfg.Security,
	}
	srv, err := embedded.Start(s.embCfg)
	if errors.Is(err, embedded.ErrAddrInUse) {
		return fmt.Errorf("%w; use --port (env DEADLETTER_PORT)", err)
	}
	if err != nil {
		return err
	}
	s.srv = srv
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		s.log.Info("nats server stopped")
	}()
	if err := s.provision(ctx); err != nil {
		return err
	}
	// Every person's registry record (roles, state, decision keys) in
	// AUDIT, where signed decisions are checked: a store begun before
	// people signed gets its people now.
	if err := s.registerPeople(ctx, creds); err != nil {
		return err
	}
	if err := s.writeContexts(); err != nil {
		return err
	}
	if err := s.writeApplied(creds, loaded); err != nil {
		return err
	}
	stopMetrics, err := s.serveMetrics(ctx)
	if err != nil {
		return err
	}
	defer stopMetrics()

	var conns []*nats.Conn
	defer func() {
		if err := runner.Drain(s.cfg.CloseTimeout, conns...); err != nil {
			s.log.Warn("connections not drained", "err", err)
		}
	}()
	connect := func(user string) (*nats.Conn, error) {
		opts := append([]nats.Option{nats.Name("deadletter-" + user), nats.MaxReconnects(-1)}, creds.NATSOptions(user)...)
		nc, err := s.dial(opts...)
		if err == nil {
			conns = append(conns, nc)
		}
		return nc, err
	}

	// One tracer provider per service, so Jaeger lists each under its own
	// name; a no-op (no exporter, no goroutine) when no OTLP endpoint is set.
	var flushes []telemetry.Shutdown
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, f := range flushes {
			_ = f(fctx)
		}
	}()
	tracing := func(service, version string) (trace.TracerProvider, error) {
		tp, flush, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "deadletter-" + service, ServiceVersion: version})
		if err != nil {
			return nil, err
		}
		flushes = append(flushes, flush)
		return tp, nil
	}

	vnc, err := connect(access.Validator)
	if err != nil {
		return err
	}
	vcfg := s.cfg.Validator
	vcfg.Provision, vcfg.CreateConsumer = false, false
	if vcfg.Publishers == nil && vcfg.PublishersFile == "" {
		// The parties of the publishers of the credentials file.
		vcfg.Publishers = access.PublisherTable(creds.People)
	}
	if vcfg.TracerProvider == nil {
		if vcfg.TracerProvider, err = tracing("validator", validator.Version); err != nil {
			return err
		}
	}
	v, err := validator.New(vnc, vcfg, s.log)
	if err != nil {
		return err
	}
	s.Validator = v

	qnc, err := connect(access.Quarantiner)
	if err != nil {
		return err
	}
	qcfg := s.cfg.Quarantiner
	qcfg.Provision, qcfg.CreateConsumer = false, false
	if qcfg.TracerProvider == nil {
		if qcfg.TracerProvider, err = tracing("quarantiner", quarantiner.Version); err != nil {
			return err
		}
	}
	q, err := quarantiner.New(qnc, qcfg, s.log)
	if err != nil {
		return err
	}
	s.Quarantiner = q

	rnc, err := connect(access.Redriver)
	if err != nil {
		return err
	}
	rcfg := s.cfg.Redriver
	rcfg.Provision = false
	if len(rcfg.ReplaySecret) == 0 && rcfg.ReplaySecretFile == "" {
		if rcfg.ReplaySecret, err = hex.DecodeString(creds.ReplaySecret); err != nil {
			return fmt.Errorf("stack: replay secret: %w", err)
		}
	}
	if rcfg.TracerProvider == nil {
		if rcfg.TracerProvider, err = tracing("redriver", redriver.Version); err != nil {
			return err
		}
	}
	r, err := redriver.New(rnc, rcfg, s.log)
	if err != nil {
		return err
	}
	s.Redriver = r

	anc, err := connect(access.Auditor)
	if err != nil {
		return err
	}
	acfg := s.cfg.Auditor
	if acfg.SigningKeyFile == "" {
		acfg.SigningKeyFile = filepath.Join(s.cfg.AnchorDir, SigningKeyFile)
		if err := os.MkdirAll(s.cfg.AnchorDir, 0o700); err != nil {
			return fmt.Errorf("stack: anchor directory: %w", err)
		}
		if _, err := os.Stat(acfg.SigningKeyFile); errors.Is(err, os.ErrNotExist) {
			if _, err := auditor.NewSigningKey(acfg.SigningKeyFile); err != nil {
				return err
			}
		}
	}
	acfg.ExportFile = s.exportPath()
	if s.auditKey, err = auditor.SigningPublicKey(acfg.SigningKeyFile); err != nil {
		return err
	}
	s.exportFile = acfg.ExportFile
	a, err := auditor.New(anc, acfg, s.log)
	if err != nil {
		return err
	}
	s.Auditor = a

	// The console holds no connection of its own: each person who logs
	// in gets one, with their own credentials.
	if s.cfg.ConsoleAddr != "" {
		ccfg := s.cfg.Console
		ccfg.Listen = s.cfg.ConsoleAddr
		ccfg.NATSURL = srv.ClientURL()
		ccfg.TraceURLBase = traceLinks(ccfg.TraceURLBase, ccfg.JaegerURL)
		s.cfg.Console.TraceURLBase = ccfg.TraceURLBase
		if s.cfg.Security.TLSCert != "" {
			// A self-signed server certificate is its own CA.
			ccfg.NATSTLSCA = absOrEmpty(s.cfg.Security.TLSCert)
		}
		if s.Console, err = console.New(ccfg, s.log); err != nil {
			return err
		}
	}

	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return v.Run(gctx) })
	g.Go(func() error { return q.Run(gctx) })
	g.Go(func() error { return r.Run(gctx) })
	g.Go(func() error { return a.Run(gctx) })
	if s.Console != nil {
		g.Go(func() error { return s.Console.Run(gctx) })
	}
	g.Go(func() error { s.watchPeople(gctx, credsFile, secOpts, loaded); return nil })
	err = s.waitStarted(gctx)
	if err == nil && s.Console != nil {
		select {
		case <-s.Console.Ready():
		case <-gctx.Done():
			err = gctx.Err()
		}
	}
	if err == nil {
		close(s.ready)
		s.banner()
	} else if gctx.Err() == nil {
		// Not ready and nothing stopped: say so instead of waiting forever.
		stopAll()
		return errors.Join(fmt.Errorf("stack: services did not start: %w", err), g.Wait())
	}
	return g.Wait()
}

// provision creates or checks every stream, QUARANTINE included, and the
// services' durable consumers: the administrator's step, done here because
// this process owns the server.
func (s *Stack) provision(ctx context.Context) error {
	nc, err := s.dial(append([]nats.Option{nats.Name("deadletter-admin")}, s.Secrets().NATSOptions(access.Admin)...)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := streams.EnsureCore(ctx, js, s.cfg.Streams); err != nil {
		return err
	}
	if err := streams.EnsureWORM(ctx, js, s.cfg.Streams); err != nil {
		return err
	}
	if err := s.checkEarlierAnchors(ctx, js); err != nil {
		return err
	}
	return ProvisionConsumers(ctx, js, s.cfg.Validator, s.cfg.Quarantiner)
}

// exportPath is the auditor's export file, its own anchor: the
// configured one, or ExportFile in the anchor directory.
func (s *Stack) exportPath() string {
	if s.cfg.Auditor.ExportFile != "" {
		return s.cfg.Auditor.ExportFile
	}
	return filepath.Join(s.cfg.AnchorDir, ExportFile)
}

// earlierStore is what the anchor file says of the store it was written
// for, when the store this stack runs on holds no AUDIT record: a store
// begun empty beside an earlier store's anchors.
type earlierStore struct {
	file string
	// cp is the newest checkpoint of the file; zero when it does not
	// parse (the auditor says why).
	cp api.ExportedCheckpoint
}

// checkEarlierAnchors notes (s.earlier) a store begun empty beside the
// anchors of an earlier one, before the auditor starts: AUDIT holds
// nothing while the anchor file holds a checkpoint. The auditor still
// refuses to checkpoint over it (a deleted store is never taken for a new
// one); the banner and the log say so and name the two ways out.
func (s *Stack) checkEarlierAnchors(ctx context.Context, js jetstream.JetStream) error {
	file := s.exportPath()
	if file == "-" {
		return nil
	}
	st, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		return fmt.Errorf("stack: %s: %w", subjects.AuditStream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("stack: %s: %w", subjects.AuditStream, err)
	}
	if info.State.LastSeq > 0 {
		return nil
	}
	line, err := anchor.LastLine(file, anchor.MaxLine)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(line) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stack: anchor file: %w", err)
	}
	s.earlier = &earlierStore{file: file}
	if a, err := anchor.ParseLine(line, "", false); err == nil {
		s.earlier.cp = a.CP
	}
	s.log.Warn("STORE_NEW_BESIDE_ANCHORS", "export_file", file, "anchor_audit_seq", s.earlier.cp.AuditSeq,
		"anchor_last_seq", s.earlier.cp.LastSeq, "anchor_at", s.earlier.cp.At,
		"ways_out", "restore the store from its backup, or deadletter anchors rotate")
	return nil
}

// earlierState is the banner's block for a store begun empty beside an
// earlier store's anchors (empty otherwise).
func (s *Stack) earlierState() string {
	e := s.earlier
	if e == nil {
		return ""
	}
	what := "checkpoints"
	if e.cp.AuditSeq > 0 {
		what = fmt.Sprintf("checkpoints (the newest written %s, covering QUARANTINE 1..%d, at AUDIT sequence %d)",
			e.cp.At.UTC().Format("2006-01-02 15:04Z"), e.cp.LastSeq, e.cp.AuditSeq)
	}
	return fmt.Sprintf(`
  NEW STORE:   this store began empty, but %s holds the %s
               of an earlier store. The auditor writes no checkpoint and no export
               over them (a deleted store is never taken for a new one). Either:
               - restore the earlier store from its backup (make restore; docs/operations/backup.md), or
               - begin a new store on purpose: stop, run deadletter anchors rotate --anchor-dir %s
                 (the earlier anchors are moved aside and kept), and start again.
`, e.file, what, s.cfg.AnchorDir)
}

// ProvisionConsumers creates or updates the durable consumers of the
// validator and the quarantiner from their configurations: the
// administrator's step (no service may create a consumer).
func ProvisionConsumers(ctx context.Context, js jetstream.JetStream, v validator.Config, q quarantiner.Config) error {
	if err := streams.EnsureConsumer(ctx, js, subjects.EventsStream, v.ConsumerConfig()); err != nil {
		return err
	}
	if err := streams.EnsureConsumer(ctx, js, subjects.FailuresStream, q.FailuresConsumerConfig()); err != nil {
		return err
	}
	return streams.EnsureConsumer(ctx, js, subjects.AdvisoriesStream, q.AdvisoriesConsumerConfig())
}

// Secrets are the NATS users' secrets (valid once Ready; replaced, never
// changed, when the people are reloaded).
func (s *Stack) Secrets() *access.Secrets {
	s.credsMu.Lock()
	defer s.credsMu.Unlock()
	return s.creds
}

// ConnectAs connects to the stack's server as user (a person or a service
// user), with its private inbox prefix (see dial).
// A person's password is checked against its bcrypt hash, which on a
// loaded machine takes longer than nats.go's 2 s connect timeout: the
// default here is 30 s (opts may set another).
func (s *Stack) ConnectAs(user string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.Timeout(30 * time.Second)}, s.Secrets().NATSOptions(user)...)
	return s.dial(append(all, opts...)...)
}

// dial connects to the stack's own server: over loopback TCP when the
// server has no TLS, in process when it has (no certificate to trust, no
// encryption inside one process). Not in process without TLS: nats.go's
// in-process connection is a net.Pipe, unbuffered, which cost about 12 %
// more CPU per ingested event than loopback TCP (tests/bench/stack, CPU
// per event, 4 interleaved rounds each: 211.7 µs in process, 186.5 µs
// over TCP).
func (s *Stack) dial(opts ...nats.Option) (*nats.Conn, error) {
	if s.cfg.Security.TLSCert == "" {
		return nats.Connect(s.srv.ClientURL(), opts...)
	}
	return nats.Connect("", append(opts, nats.InProcessServer(s.srv))...)
}

// writeContexts writes a natscli context per person into the data
// directory, so that the commands of the banner work as printed.
func (s *Stack) writeContexts() error {
	creds := s.Secrets()
	for _, p := range creds.People {
		if p.Disabled {
			// A disabled person cannot connect: no context is left for it.
			if err := os.Remove(s.ContextFile(p.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		// A self-signed server certificate is its own CA.
		c, err := creds.Context(p.Name, access.ContextDescription(p), s.srv.ClientURL(), absOrEmpty(s.cfg.Security.TLSCert))
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		if err := access.WriteFile(s.ContextFile(p.Name), append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// ContextFile is the natscli context file of a person.
func (s *Stack) ContextFile(person string) string {
	return filepath.Join(s.cfg.DataDir, ContextsDir, person+".json")
}

// waitStarted polls until every service answers discovery pings (asked as
// a person, a viewer when there is one, through the role account's import
// of $SRV.>).
func (s *Stack) waitStarted(ctx context.Context) error {
	nc, err := s.ConnectAs(s.askingPerson())
	if err != nil {
		return err
	}
	defer nc.Close()
	for _, svc := range []string{access.Validator, access.Quarantiner, access.Redriver, access.Auditor} {
		if err := endpoint.WaitServing(ctx, nc, 50*time.Millisecond, svc, access.ServiceEndpoints(svc)...); err != nil {
			return err
		}
	}
	return nil
}

// askingPerson is who waitStarted asks as: the first active viewer, else
// the first active person, else the admin.
func (s *Stack) askingPerson() string {
	people := s.Secrets().People
	for _, r := range []access.Role{access.RoleViewer, ""} {
		for _, p := range people {
			if p.Active() && (r == "" || p.Role == r) {
				return p.Name
			}
		}
	}
	return access.Admin
}

func (s *Stack) banner() {
	url := s.srv.ClientURL()
	pub, op, view := s.ContextFile(access.DefaultPerson(access.RolePublisher)), s.ContextFile(access.DefaultPerson(access.RoleOperator)), s.ContextFile(access.DefaultPerson(access.RoleViewer))
	fmt.Fprintf(s.cfg.Out, `deadletter is running.%s
  NATS:        %s   (store: %s)
  Services:    validator, quarantiner, redriver, auditor
  People:      %s
               (one NATS user each; deadletter people ls|add|disable|enable|rotate --data-dir %s)
  Publishers:  %s
  Contexts:    %s/<person>.json (natscli contexts with each person's credentials)
  Credentials: %s (every user authenticates; services with nkeys)
  Anchors:     %s (signed checkpoints; keep a copy elsewhere)
  Audit key:   %s (verify --anchor FILE --pubkey KEY)
  Metrics:     %s
  Tracing:     %s
  Console:     %s

Try it (the nats CLI: go install github.com/nats-io/natscli/nats@v0.5.0):
  nats --context %s pub events.pharmacy.dispense "$(cat schemas/testdata/pharmacy/valid/dispense-schedule-ii.json)"
  nats --context %s pub events.pharmacy.dispense '{"not": "valid"}'
  nats --context %s req validator.check.dscsa.commissioning "$(cat schemas/testdata/dscsa/valid/commissioning-sgtin.json)"
  nats --context %s req audit.groups '{"open_only":true}'
  nats --context %s req drain.start '{"dry_run":true}'
  nats --context %s micro ls

Press Ctrl-C to stop: consumers drain, work in flight finishes, then the server stops.
`, s.earlierState(), url, s.cfg.DataDir, s.people(), s.cfg.DataDir, s.publishers(), filepath.Join(s.cfg.DataDir, ContextsDir), filepath.Join(s.cfg.DataDir, CredentialsFile),
		s.exportFile, s.auditKey,
		orNone(s.metricsURL), s.tracingState(), s.consoleState(), pub, pub, pub, view, op, view)
}

// people lists the active people who are not publishers, with their
// roles ("amara.okafor, jonas.mueller (operator); ...").
func (s *Stack) people() string {
	var out []string
	for _, r := range access.Roles {
		var names []string
		for _, p := range s.Secrets().People {
			if p.Role == r && r != access.RolePublisher && p.Active() {
				names = append(names, p.Name)
			}
		}
		if len(names) > 0 {
			out = append(out, strings.Join(names, ", ")+" ("+string(r)+")")
		}
	}
	return orNone(strings.Join(out, "; "))
}

// publishers lists the publishers and the parties each may publish for
// (from the credentials file, as the server and the validator have them).
func (s *Stack) publishers() string {
	var out []string
	for _, p := range s.Secrets().People {
		if p.Role != access.RolePublisher || !p.Active() {
			continue
		}
		var parties []string
		for _, d := range slices.Sorted(maps.Keys(p.Parties)) {
			parties = append(parties, d+": "+strings.Join(p.Parties[d], " "))
		}
		out = append(out, p.Name+" ("+orNone(strings.Join(parties, "; "))+")")
	}
	return strings.Join(out, ", ")
}

// consoleState says where the console is and who can log in.
func (s *Stack) consoleState() string {
	if s.Console == nil {
		return "(disabled)"
	}
	var people []string
	for _, p := range s.Secrets().People {
		if p.Role != access.RolePublisher && p.Active() {
			people = append(people, p.Name)
		}
	}
	// Shown at localhost: a passkey is made for a name, never an IP
	// address, and decisions are signed with passkeys.
	url := strings.Replace(s.Console.URL(), "://127.0.0.1:", "://localhost:", 1)
	return url + "   (log in as " + strings.Join(people, ", ") + "; passwords in " + filepath.Join(s.cfg.DataDir, CredentialsFile) + ")"
}

func orNone(s string) string {
	if s == "" {
		return "(disabled)"
	}
	return s
}

// tracingState says where spans go and where a person reads them, from
// the environment and the console's configuration, and whether a Jaeger
// UI answers where the console's "open in Jaeger" links go
// (probeJaegerUI).
func (s *Stack) tracingState() string {
	t := tracing{}
	if telemetry.Enabled(telemetry.Config{}) {
		t.Endpoint = strings.TrimSpace(os.Getenv(telemetry.EnvTracesEndpoint))
		if t.Endpoint == "" {
			t.Endpoint = strings.TrimSpace(os.Getenv(telemetry.EnvEndpoint))
		}
	}
	if s.Console != nil {
		t.Console = true
		t.RecordPage = strings.Replace(s.Console.URL(), "://127.0.0.1:", "://localhost:", 1)
		t.RecordPage = strings.TrimSuffix(t.RecordPage, "/") + "/records/<dlq id>"
		t.JaegerQuery = s.cfg.Console.JaegerURL
		base := traceLinks(s.cfg.Console.TraceURLBase, t.JaegerQuery)
		t.TraceLinks = telemetry.TraceURL(base, "<trace id>")
		if t.Endpoint != "" && t.JaegerQuery != "" {
			t.UI = probeJaegerUI(telemetry.TraceURL(base, "x"), jaegerUIProbeTimeout)
		}
	}
	return t.describe()
}

// traceLinks is where the console's "open in Jaeger" links go: base
// when configured, else (base the default) the trace view of the Jaeger
// whose query API the console reads, which serves its UI, if it has one,
// on the same address; the default without one.
func traceLinks(base, jaegerQuery string) string {
	if (base == "" || base == telemetry.DefaultTraceURLBase) && jaegerQuery != "" {
		return strings.TrimRight(jaegerQuery, "/") + "/trace/"
	}
	return base
}

// tracing is what the banner's Tracing line says.
type tracing struct {
	// Endpoint is the OTLP endpoint spans go to ("" when tracing is off).
	Endpoint string
	// Console is whether the console runs; RecordPage is its record page
	// address, where a record's trace is drawn.
	Console    bool
	RecordPage string
	// JaegerQuery is the Jaeger query API the console reads traces from
	// ("" for none).
	JaegerQuery string
	// TraceLinks is where the console's "open in Jaeger" links go (the
	// trace view, TraceURLBase, with a placeholder id).
	TraceLinks string
	// UI is what answers at TraceLinks' origin.
	UI jaegerUI
}

// jaegerUI is what answers where the "open in Jaeger" links go.
type jaegerUI int

const (
	// uiNone: nothing answers (no Jaeger runs there), or something that
	// is not Jaeger's UI.
	uiNone jaegerUI = iota
	// uiPlaceholder: a Jaeger built from its Go module (make
	// jaeger-run's), whose UI is a page saying it is not the UI.
	uiPlaceholder
	// uiRunning: Jaeger's UI.
	uiRunning
)

// jaegerUIProbeTimeout bounds the banner's look at the trace links'
// origin.
const jaegerUIProbeTimeout = 500 * time.Millisecond

// probeJaegerUI asks the origin of the trace links base for its home
// page, within timeout, and says what answered: Jaeger's UI (its page is
// titled "Jaeger UI"), the placeholder of a Jaeger built without the UI
// assets, or nothing of the kind.
func probeJaegerUI(base string, timeout time.Duration) jaegerUI {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return uiNone
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.Scheme+"://"+u.Host+"/", nil)
	if err != nil {
		return uiNone
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return uiNone
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode != http.StatusOK:
		return uiNone
	case bytes.Contains(page, []byte("not the Jaeger UI")):
		return uiPlaceholder
	case bytes.Contains(page, []byte("<title>Jaeger UI</title>")):
		return uiRunning
	}
	return uiNone
}

// describe is the banner's Tracing line: off, or the OTLP endpoint spans
// go to (as configured, never assumed), then how to read a trace: the
// console's record page, which draws it from the Jaeger query API, and
// where its "open in Jaeger" links go, saying when no Jaeger UI answers
// there (make jaeger-run's Jaeger, built from its Go module, has none:
// the console's trace view is the way to read its traces).
func (t tracing) describe() string {
	if t.Endpoint == "" {
		return "off (set OTEL_EXPORTER_OTLP_ENDPOINT to an OTLP/HTTP collector to trace)"
	}
	const indent = "\n               "
	out := "OTLP to " + t.Endpoint
	switch {
	case !t.Console:
		return out + " (the console is disabled: read traces in the collector's own UI, if it has one)"
	case t.JaegerQuery == "":
		return out + indent + "the console draws no traces: set DEADLETTER_CONSOLE_JAEGER_URL to the collector's Jaeger query API"
	}
	out += indent + "read a trace on the console's record pages (" + t.RecordPage + "), drawn from the Jaeger query API at " + t.JaegerQuery
	switch t.UI {
	case uiRunning:
		return out + indent + "or in Jaeger's UI: the pages' \"open in Jaeger\" links go to " + t.TraceLinks
	case uiPlaceholder:
		return out + indent + "the pages' \"open in Jaeger\" links go to " + t.TraceLinks + ", where this Jaeger has no UI" +
			indent + "(make jaeger-run's, built from its Go module): use the console's trace view"
	}
	return out + indent + "the pages' \"open in Jaeger\" links go to " + t.TraceLinks + ", where no Jaeger UI answers" +
		indent + "(none runs, or one built from its Go module, as make jaeger-run's, which has no UI): use the console's trace view"
}

// peopleReloadInterval is how often watchPeople looks at the credentials
// file.
const peopleReloadInterval = time.Second

// AppliedFile is the name, in the data directory, of what the running
// server enforces of the people (access.Applied, mode 0600), written after
// each (re)load: `deadletter people ls` marks a change not applied yet.
const AppliedFile = "people-applied.json"

// loadPeople loads the credentials file at path (creating it, and adding
// the named people to an earlier version's), holding its lock, and
// returns them with the digest of the file as read before loading: a
// change written after that read is seen as a change by the next look.
func (s *Stack) loadPeople(path string, opts []access.Option) (*access.Secrets, string, error) {
	unlock, err := access.LockFile(path)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	raw, rerr := os.ReadFile(path)
	creds, err := access.LoadOrCreate(path, access.DefaultPeople(), opts...)
	if err != nil {
		return nil, "", err
	}
	// A data directory of an earlier version has one user per role: it
	// gets the named people too, and its role users keep working until
	// disabled (`deadletter people disable operator`).
	migrated, err := creds.MigrateLegacy(opts...)
	if err != nil {
		return nil, "", err
	}
	// Hashes of an earlier version, at bcrypt's default cost: every
	// connect, a failed one too, cost the server ~0.1 s (issue #38, E11).
	rehashed, err := creds.Rehash(opts...)
	if err != nil {
		return nil, "", err
	}
	if rehashed {
		if err := creds.Save(path); err != nil {
			return nil, "", err
		}
		s.log.Info("people's password hashes made again at the current cost (same passwords)")
	}
	// make run's example people sign their decisions with dlqctl keys
	// kept beside their contexts (ExampleKeys).
	keyed, err := s.exampleKeys(creds)
	if err != nil {
		return nil, "", err
	}
	if keyed {
		if err := creds.Save(path); err != nil {
			return nil, "", err
		}
		s.log.Info("gave make run's example people their dlqctl signing keys, beside their contexts", "dir", filepath.Join(s.cfg.DataDir, ContextsDir))
	}
	if migrated {
		if err := creds.Save(path); err != nil {
			return nil, "", err
		}
		s.log.Info("added the named example people beside the role users of an earlier version; disable those with `deadletter people disable <role>`")
	}
	if rerr != nil {
		// Created here, under the lock: the file is what was loaded.
		return creds, fileDigest(path), nil
	}
	return creds, access.FileDigest(raw), nil
}

// writeApplied records that the server enforces creds, loaded from a
// file of digest (AppliedFile).
func (s *Stack) writeApplied(creds *access.Secrets, digest string) error {
	return access.WriteApplied(filepath.Join(s.cfg.DataDir, AppliedFile), access.AppliedOf(creds, digest, time.Now()))
}

// watchPeople reloads the people when the credentials file changes
// (`deadletter people add|grant|disable|enable|rotate`), until ctx is
// done. loaded is the digest of the file as last loaded: a change written
// while a reload runs differs from the digest that reload read, and is
// applied by the next.
func (s *Stack) watchPeople(ctx context.Context, path string, opts []access.Option, loaded string) {
	t := time.NewTicker(peopleReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.unregistered.Load() {
			_ = s.registerPeople(ctx, s.Secrets())
		}
		cur := fileDigest(path)
		if cur == loaded {
			continue
		}
		d, err := s.reloadPeople(path, opts)
		if err != nil {
			s.log.Warn("people not reloaded: the server keeps the previous users", "err", err)
			// Tried again when the file changes again.
			loaded = cur
			continue
		}
		loaded = d
	}
}

// ErrRestartNeeded is returned by a reload whose credentials changed more
// than the people: a service's secret, the replay secret or the approval
// key, which the running services hold.
var ErrRestartNeeded = errors.New("stack: the services' secrets changed: restart")

// reloadPeople loads the credentials file at path and applies its people
// to the running server (a configuration reload, which closes the
// connections of a disabled person and of a rotated password), records
// what the server now enforces (AppliedFile) and rewrites the people's
// contexts. It returns the digest of the file as it read it (loadPeople).
// A new publisher's parties reach the validator only at the next start.
func (s *Stack) reloadPeople(path string, opts []access.Option) (string, error) {
	next, digest, err := s.loadPeople(path, opts)
	if err != nil {
		return "", err
	}
	if s.loadedHook != nil {
		s.loadedHook()
	}
	cur := s.Secrets()
	for _, name := range access.ServiceNames() {
		if next.Users[name] != cur.Users[name] {
			return "", fmt.Errorf("%w (user %s)", ErrRestartNeeded, name)
		}
	}
	if next.ReplaySecret != cur.ReplaySecret {
		return "", ErrRestartNeeded
	}
	text, err := access.ServerConfig(next)
	if err != nil {
		return "", err
	}
	cfg := s.embCfg
	// A file rewritten with what the server already enforces (the same
	// accounts, users and permissions) is not reloaded: a reload swaps
	// the server's options, which nats-server 2.15.3 reads unlocked on
	// every direct get without max_bytes (nats.go's KV and last-message
	// gets send none), a data race for nothing.
	if text != cfg.ConfigText {
		cfg.ConfigText = text
		if err := embedded.Reload(s.srv, cfg); err != nil {
			return "", err
		}
	}
	s.credsMu.Lock()
	s.creds, s.embCfg = next, cfg
	s.credsMu.Unlock()
	active := 0
	for _, p := range next.People {
		if p.Active() {
			active++
		}
	}
	s.log.Info("people reloaded", "people", len(next.People), "active", active, "digest", digest)
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.registerPeople(rctx, next) // tried again by watchPeople
	if err := s.writeApplied(next, digest); err != nil {
		return digest, err
	}
	return digest, s.writeContexts()
}

// registerPeople writes to AUDIT, as the admin (no service may), the
// registry record (api.PersonKeys) of each person of creds whose last
// record says otherwise: what every signed decision is checked against.
// A failure is logged and left for watchPeople to try again.
func (s *Stack) registerPeople(ctx context.Context, creds *access.Secrets) error {
	err := func() error {
		nc, err := s.dial(append([]nats.Option{nats.Name("deadletter-registrar")}, creds.NATSOptions(access.Admin)...)...)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		stored, err := decision.NewRegistry(js).Sync(ctx, creds.PersonKeys())
		for _, pk := range stored {
			s.log.Info("person registered in AUDIT", "person", pk.Person, "event", pk.Event, "keys", len(pk.Keys), "disabled", pk.Disabled)
		}
		return err
	}()
	s.unregistered.Store(err != nil)
	if err != nil {
		s.log.Error("people's records not written to AUDIT: decisions with a new key or role are refused until they are (tried again)", "err", err)
	}
	return err
}

// KeyFile is the dlqctl signing key of person beside the people's
// contexts (make run's example people; dlqctl looks for <person>.key
// beside its --context file).
func (s *Stack) KeyFile(person string) string {
	return filepath.Join(s.cfg.DataDir, ContextsDir, person+".key")
}

// exampleKeys gives each of make run's example people (access's
// DefaultPeople, not publishers) who never had a decision key one: an
// ed25519 key kept unencrypted beside their context (KeyFile; their
// password is there in clear too), its public key registered in creds
// as `deadletter people key add` would. A person with a key, or whose
// key was revoked, is left alone; a person added by an administrator
// makes their own (dlqctl key init). It reports whether creds changed.
func (s *Stack) exampleKeys(creds *access.Secrets) (bool, error) {
	changed := false
	for _, d := range access.DefaultPeople() {
		p, ok := creds.Person(d.Name)
		if !ok || p.Role == access.RolePublisher || p.Disabled || len(p.Keys) > 0 {
			continue
		}
		path := s.KeyFile(p.Name)
		kf, err := decision.ReadKeyFile(path)
		if errors.Is(err, os.ErrNotExist) {
			if kf, _, err = decision.NewKeyFile(p.Name, nil); err == nil {
				err = decision.WriteKeyFile(path, kf)
			}
		}
		if err != nil {
			return changed, fmt.Errorf("stack: %s's signing key: %w", p.Name, err)
		}
		key, err := kf.Key()
		if err != nil {
			return changed, err
		}
		key.Label = "make run example key (" + path + ")"
		if err := creds.AddKey(p.Name, key, "make run"); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// fileDigest is the SHA-256 of the file at path ("" when unreadable).
func fileDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
