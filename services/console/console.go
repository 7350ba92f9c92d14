// Package console is deadletter's web triage console: server-rendered
// pages (html/template, enhanced by a vendored htmx, live progress by
// server-sent events) for the people who resolve quarantined failures.
//
// The console has no NATS connection of its own and no table of users or
// roles. A person logs in with their own NATS user and password (the
// users of package access); the console opens a connection as that
// person, asks audit.whoami which role the server authenticated, and
// keeps the connection in a server-side session. Every page and action is
// a request on that connection, so it reaches the services as that person
// and the server's import table (package access) decides what the role
// may do; the console only hides what the role cannot use.
//
// Sessions are random 256-bit ids in a Secure, HttpOnly, SameSite=Strict
// cookie, expire when idle (their connection closed), and carry a CSRF
// token that every POST must present (form field or X-CSRF-Token header).
// Logins are rate limited per client address, then per user name, in
// bounded maps; a person keeps at most MaxSessionsPerPerson sessions. The
// console listens on loopback unless it is given a TLS certificate.
//
// Governance pages: a correction is edited only after a reveal with a
// reason, checked by the validator's dry run (validator.check) with a line
// diff against the original before it is submitted; an action the
// redriver answers APPROVAL_REQUIRED shows as sent for approval. Drains
// take a canary, an auto-pause threshold and a ramp; a paused drain shows
// why and offers Resume with a reason; the progress chart is an SVG drawn
// from the samples the console takes while it shows the drain. The Audit
// page lists the access audit and streams inspection exports (CSV, XLSX,
// JSONL) written with package exportsheet and the auditor's JSONL writer.
//
// Approvals and holds: the Approvals page is the inbox of approval.list
// (pending first, no values); an approval's page is approval.get, which
// shows the corrected payload, the identity diff and a drain's plan only
// to the roles the redriver shows them to (recording the review in the
// access audit). Approving asks for the meaning and the person's password
// again, sent once to approval.approve (the redriver re-authenticates it
// against the server) and never logged, kept or written back into a page;
// rejecting asks for a meaning. Every decision (approve, reject,
// release, dismiss, a hold's lift) is signed in the browser by the
// person's passkey and sent as the request's Signed (sign.go); the
// Passkeys page makes a passkey and shows its registration text for
// `deadletter people key add` (passkeys.go). The Holds page lists hold.list with the
// records each holds and places a party hold; the Record page places a
// hold on its record and lifts the holds its chain carries. The Record
// timeline shows an approved record's signature (approver, signing time,
// meaning, requester) and a hold record's hold and case; a refusal such as
// HELD or REAUTH_FAILED shows as the service's code.
package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Version is the console's version.
const Version = "0.1.0"

// Config configures the console.
type Config struct {
	// Listen is the HTTP listen address. Default 127.0.0.1:8090. An
	// address that is not loopback needs TLSCert and TLSKey.
	Listen string
	// TLSCert and TLSKey are the HTTPS certificate and key (PEM files);
	// both or neither.
	TLSCert, TLSKey string
	// NATSURL is the NATS server URL(s), comma separated. Default
	// nats.DefaultURL.
	NATSURL string
	// NATSTLSCA, NATSTLSCert and NATSTLSKey are the deployment's NATS TLS
	// options (a CA to trust, a client certificate and key), applied to
	// every person's connection.
	NATSTLSCA, NATSTLSCert, NATSTLSKey string
	// IdleTimeout closes a session (and its connection) unused this long.
	// Default 15 min.
	IdleTimeout time.Duration
	// LoginRate and LoginBurst are the token bucket of failed logins, one
	// bucket per user name and one per client address. Defaults: one
	// every 12 s, burst 5.
	LoginRate  rate.Limit
	LoginBurst int
	// LoginBuckets is the most failed-login buckets kept per kind
	// (addresses, user names); beyond it the least recently used is
	// forgotten. Default 10,000 (about 2 MB).
	LoginBuckets int
	// MaxSessionsPerPerson is the most sessions one person keeps: a login
	// beyond it ends the person's oldest session (and closes its NATS
	// connection). Default 5.
	MaxSessionsPerPerson int
	// MaxSessions is the most sessions of everyone together: a person
	// without a session is refused a login while they are all in use.
	// Default 200.
	MaxSessions int
	// TraceURLBase is Jaeger's trace view, for the trace links of a
	// record (base followed by the trace id, telemetry.TraceURL). Default
	// telemetry.DefaultTraceURLBase.
	TraceURLBase string
	// JaegerURL is Jaeger's query API (e.g. http://127.0.0.1:16686): the
	// record page draws the failure's trace from it (trace.go). Empty:
	// the page says traces are not configured.
	JaegerURL string
	// CallTimeout bounds each request to a service. Default 30 s.
	CallTimeout time.Duration
	// ConnectTimeout bounds a login's NATS connect (the server checks the
	// password's bcrypt hash). Default 20 s.
	ConnectTimeout time.Duration
	// Name prefixes the NATS connection names (default "console").
	Name string
	// Origin is the console's origin as people's browsers show it
	// ("https://console.pharma.example"): the origin and relying party id
	// (its host name) of the passkeys that sign decisions. Empty: the
	// origin each request names (its Host). Passkeys need a name, not an
	// IP address.
	Origin string
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Listen:               "127.0.0.1:8090",
		NATSURL:              nats.DefaultURL,
		IdleTimeout:          15 * time.Minute,
		LoginRate:            rate.Every(12 * time.Second),
		LoginBurst:           5,
		LoginBuckets:         10_000,
		MaxSessionsPerPerson: 5,
		MaxSessions:          200,
		TraceURLBase:         telemetry.DefaultTraceURLBase,
		CallTimeout:          30 * time.Second,
		ConnectTimeout:       20 * time.Second,
		Name:                 "console",
	}
}

// LoadEnv overrides c from DEADLETTER_CONSOLE_LISTEN,
// DEADLETTER_CONSOLE_TLS_CERT, DEADLETTER_CONSOLE_TLS_KEY, NATS_URL,
// DEADLETTER_CONSOLE_IDLE_TIMEOUT, DEADLETTER_CONSOLE_TRACE_URL,
// DEADLETTER_CONSOLE_JAEGER_URL, DEADLETTER_CONSOLE_MAX_SESSIONS_PER_PERSON,
// DEADLETTER_CONSOLE_MAX_SESSIONS and DEADLETTER_CONSOLE_ORIGIN.
func (c *Config) LoadEnv(env *config.Env) {
	env.String("DEADLETTER_CONSOLE_LISTEN", &c.Listen)
	env.String("DEADLETTER_CONSOLE_TLS_CERT", &c.TLSCert)
	env.String("DEADLETTER_CONSOLE_TLS_KEY", &c.TLSKey)
	env.String("NATS_URL", &c.NATSURL)
	env.Duration("DEADLETTER_CONSOLE_IDLE_TIMEOUT", &c.IdleTimeout)
	env.String("DEADLETTER_CONSOLE_TRACE_URL", &c.TraceURLBase)
	env.String("DEADLETTER_CONSOLE_JAEGER_URL", &c.JaegerURL)
	env.Int("DEADLETTER_CONSOLE_MAX_SESSIONS_PER_PERSON", &c.MaxSessionsPerPerson)
	env.Int("DEADLETTER_CONSOLE_MAX_SESSIONS", &c.MaxSessions)
	env.String("DEADLETTER_CONSOLE_ORIGIN", &c.Origin)
}

// Configuration errors.
var (
	// ErrInsecureListen: a Listen address other than loopback without TLS.
	ErrInsecureListen = errors.New("console: a listen address other than loopback needs a TLS certificate and key")
	// ErrConfig: another invalid setting.
	ErrConfig = errors.New("console: invalid configuration")
)

// validate checks c (after defaults are applied).
func (c Config) validate() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: TLS certificate and key go together", ErrConfig)
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("%w: listen address %q: %v", ErrConfig, c.Listen, err)
	}
	if c.TLSCert == "" && !loopback(host) {
		return fmt.Errorf("%w (listen %s)", ErrInsecureListen, c.Listen)
	}
	if c.NATSURL == "" {
		return fmt.Errorf("%w: a NATS server URL is required", ErrConfig)
	}
	if c.Origin != "" {
		if u, err := url.Parse(c.Origin); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || u.Path != "" || net.ParseIP(u.Hostname()) != nil {
			return fmt.Errorf("%w: origin %q is not scheme://name[:port] (passkeys need a name, not an IP address)", ErrConfig, c.Origin)
		}
	}
	if c.IdleTimeout <= 0 || c.CallTimeout <= 0 || c.ConnectTimeout <= 0 {
		return fmt.Errorf("%w: timeouts must be positive", ErrConfig)
	}
	if c.LoginRate <= 0 || c.LoginBurst < 1 || c.LoginBuckets < 1 {
		return fmt.Errorf("%w: the login rate, burst and buckets must be positive", ErrConfig)
	}
	if c.MaxSessionsPerPerson < 1 || c.MaxSessions < c.MaxSessionsPerPerson {
		return fmt.Errorf("%w: sessions per person must be positive and at most the sessions in all", ErrConfig)
	}
	return nil
}

// loopback reports whether host is a loopback name or address ("" and
// 0.0.0.0 are every interface: not loopback).
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// withDefaults fills the zero members of c from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.NATSURL == "" {
		c.NATSURL = d.NATSURL
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.LoginRate == 0 {
		c.LoginRate = d.LoginRate
	}
	if c.LoginBurst == 0 {
		c.LoginBurst = d.LoginBurst
	}
	if c.LoginBuckets == 0 {
		c.LoginBuckets = d.LoginBuckets
	}
	if c.MaxSessionsPerPerson == 0 {
		c.MaxSessionsPerPerson = d.MaxSessionsPerPerson
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = max(d.MaxSessions, c.MaxSessionsPerPerson)
	}
	if c.TraceURLBase == "" {
		c.TraceURLBase = d.TraceURLBase
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = d.CallTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	return c
}

// Console is the web console: its configuration, the mux and middleware
// (routes, authed), and its parts, one per concern, each holding only what
// it needs (web.go).
type Console struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	limits   *limiters
	handler  http.Handler

	// The parts: login and sessions; the Overview; records, groups and
	// the record page; drains and plans; approvals; legal holds; the
	// Audit page.
	login     *loginPages
	overview  *overviewPage
	records   *recordPages
	drains    *drainPages
	approvals *approvalPages
	holds     *holdPages
	audit     *auditPages
	passkeys  *passkeyPages

	mu   sync.Mutex
	addr string
	up   chan struct{}
}

// New prepares a console (nothing listens until Run). Zero members of cfg
// take their defaults.
func New(cfg Config, log *slog.Logger) (*Console, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	w := web{renderer: &renderer{pages: p, log: log}, log: log, rq: requester{timeout: cfg.CallTimeout}, now: time.Now}
	c := &Console{
		cfg: cfg, log: log,
		sessions: newSessions(cfg.IdleTimeout, cfg.MaxSessionsPerPerson, cfg.MaxSessions),
		limits:   newLimiters(cfg.LoginRate, cfg.LoginBurst, cfg.LoginBuckets),
		up:       make(chan struct{}),
	}
	results := &results{}
	c.login = &loginPages{web: w, nats: natsOf(cfg), sessions: c.sessions, limits: c.limits, drafts: newDrafts()}
	c.records = &recordPages{web: w, traceURLBase: cfg.TraceURLBase, jaegerURL: cfg.JaegerURL}
	c.overview = &overviewPage{web: w, results: results}
	c.drains = &drainPages{web: w, sessions: c.sessions, sseEvery: sseInterval}
	c.approvals = &approvalPages{web: w}
	c.holds = &holdPages{web: w, records: c.records}
	c.audit = &auditPages{web: w, results: results}
	c.passkeys = &passkeyPages{web: w, rp: relyingParty{origin: strings.TrimSuffix(cfg.Origin, "/"), tls: cfg.TLSCert != ""}}
	c.approvals.rp, c.records.rp, c.holds.rp = c.passkeys.rp, c.passkeys.rp, c.passkeys.rp
	c.handler = c.routes()
	return c, nil
}

// Handler is the console's HTTP handler (Run serves it; tests use it with
// httptest).
func (c *Console) Handler() http.Handler { return c.handler }

// Ready is closed once Run listens.
func (c *Console) Ready() <-chan struct{} { return c.up }

// URL is the console's address once Ready ("http://127.0.0.1:8090/").
func (c *Console) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	scheme := "http"
	if c.cfg.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + c.addr + "/"
}

// Run serves the console until ctx is done, then closes every session's
// connection.
func (c *Console) Run(ctx context.Context) error {
	l, err := net.Listen("tcp", c.cfg.Listen)
	if err != nil {
		return fmt.Errorf("console: listen %s: %w", c.cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           c.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Server-sent events stream for as long as a page is open: no
		// write timeout; idle keep-alives are bounded.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(c.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	if c.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.cfg.TLSCert, c.cfg.TLSKey)
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("console: TLS: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		l = tls.NewListener(l, srv.TLSConfig)
	}
	c.mu.Lock()
	c.addr = l.Addr().String()
	c.mu.Unlock()
	close(c.up)
	c.log.Info("console listening", "url", c.URL())

	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	sweep := time.NewTicker(max(c.cfg.IdleTimeout/4, 100*time.Millisecond))
	defer sweep.Stop()
	for {
		select {
		case err := <-done:
			c.sessions.closeAll()
			return fmt.Errorf("console: serve: %w", err)
		case <-sweep.C:
			c.sessions.sweep(time.Now())
			c.limits.sweep(time.Now())
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = srv.Shutdown(sctx)
			cancel()
			c.sessions.closeAll()
			if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}
}

// staticFS is the embedded static assets (htmx, CSS).
func staticFS() fs.FS {
	sub, err := fs.Sub(assets, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// routes is the console's request multiplexer.
func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(staticFS())))
	mux.HandleFunc("GET /login", c.login.handleLoginForm)
	mux.HandleFunc("POST /login", c.login.handleLogin)
	mux.HandleFunc("POST /logout", c.authed(c.login.handleLogout))
	mux.HandleFunc("GET /{$}", c.authed(c.overview.handleOverview))
	mux.HandleFunc("GET /groups", c.authed(c.records.handleGroups))
	mux.HandleFunc("GET /records", c.authed(c.records.handleRecords))
	mux.HandleFunc("GET /records.csv", c.authed(c.records.handleRecordsCSV))
	mux.HandleFunc("GET /records/{id}", c.authed(c.records.handleRecord))
	mux.HandleFunc("POST /records/{id}/reveal", c.authed(c.records.handleReveal))
	mux.HandleFunc("POST /records/{id}/redrive", c.authed(c.records.handleRedrive))
	mux.HandleFunc("POST /records/{id}/release", c.authed(c.records.handleRelease))
	mux.HandleFunc("POST /records/{id}/dismiss", c.authed(c.records.handleDismiss))
	mux.HandleFunc("POST /records/{id}/check", c.authed(c.records.handleCheck))
	mux.HandleFunc("POST /records/{id}/correct", c.authed(c.records.handleCorrect))
	mux.HandleFunc("GET /drains", c.authed(c.drains.handleDrains))
	mux.HandleFunc("GET /drains/plan", c.authed(c.drains.handlePlan))
	mux.HandleFunc("POST /drains/plan", c.authed(c.drains.handlePlan))
	mux.HandleFunc("POST /drains/start", c.authed(c.drains.handleDrainStart))
	mux.HandleFunc("GET /drains/{id}", c.authed(c.drains.handleDrain))
	mux.HandleFunc("GET /drains/{id}/events", c.authed(c.drains.handleDrainEvents))
	mux.HandleFunc("POST /drains/{id}/cancel", c.authed(c.drains.handleDrainCancel))
	mux.HandleFunc("POST /drains/{id}/resume", c.authed(c.drains.handleDrainResume))
	mux.HandleFunc("GET /audit", c.authed(c.audit.handleAudit))
	mux.HandleFunc("POST /audit/verify", c.authed(c.audit.handleVerify))
	mux.HandleFunc("POST /audit/reconcile", c.authed(c.audit.handleReconcile))
	mux.HandleFunc("POST /audit/checkpoint", c.authed(c.audit.handleCheckpoint))
	mux.HandleFunc("POST /audit/export", c.authed(c.audit.handleExport))
	mux.HandleFunc("GET /approvals", c.authed(c.approvals.handleApprovals))
	mux.HandleFunc("GET /policy", c.authed(c.approvals.handlePolicy))
	mux.HandleFunc("GET /approvals/{id}", c.authed(c.approvals.handleApproval))
	mux.HandleFunc("POST /approvals/{id}/approve", c.authed(c.approvals.handleApprove))
	mux.HandleFunc("POST /approvals/{id}/reject", c.authed(c.approvals.handleReject))
	mux.HandleFunc("POST /approvals/{id}/approve/challenge", c.authed(c.approvals.handleApproveChallenge))
	mux.HandleFunc("POST /approvals/{id}/reject/challenge", c.authed(c.approvals.handleRejectChallenge))
	mux.HandleFunc("POST /records/{id}/release/challenge", c.authed(c.records.handleReleaseChallenge))
	mux.HandleFunc("POST /records/{id}/dismiss/challenge", c.authed(c.records.handleDismissChallenge))
	mux.HandleFunc("POST /holds/{id}/lift/challenge", c.authed(c.holds.handleLiftChallenge))
	mux.HandleFunc("GET /passkeys", c.authed(c.passkeys.handlePasskeys))
	mux.HandleFunc("POST /passkeys", c.authed(c.passkeys.handleCreate))
	mux.HandleFunc("POST /passkeys/options", c.authed(c.passkeys.handleOptions))
	mux.HandleFunc("POST /records/{id}/hold", c.authed(c.holds.handlePlaceRecordHold))
	mux.HandleFunc("GET /holds", c.authed(c.holds.handleHolds))
	mux.HandleFunc("POST /holds", c.authed(c.holds.handlePlacePartyHold))
	mux.HandleFunc("POST /holds/{id}/lift", c.authed(c.holds.handleLiftHold))
	mux.HandleFunc("POST /records/bulk", c.authed(c.holds.handleBulk))
	mux.HandleFunc("GET /draft", c.authed(c.login.handleDraft))
	mux.HandleFunc("GET /records/bulk", handleGetOfPost)
	// A GET of a POST-only path (history, a restored tab) opens its page.
	for _, p := range []string{"/logout", "/records/{id}/{action}", "/drains/start", "/drains/{id}/{action}",
		"/audit/{action}", "/approvals/{id}/{action}", "/holds/{id}/lift"} {
		mux.HandleFunc("GET "+p, handleGetOfPost)
	}
	cross := c.crossOrigin(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		cross.ServeHTTP(w, r)
	})
}

// crossOrigin puts net/http's CrossOriginProtection in front of h: a
// POST a browser says comes from another site (Sec-Fetch-Site, or an
// Origin other than the console's host or Config.Origin) is refused before
// any handler, the login's included. The session's CSRF token (authed)
// stays behind it for what Fetch metadata does not cover (ADR 0025).
func (c *Console) crossOrigin(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	if c.cfg.Origin != "" {
		if err := cop.AddTrustedOrigin(strings.TrimSuffix(c.cfg.Origin, "/")); err != nil {
			c.log.Warn("console origin not trusted for cross-origin checks", "err", err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.log.Warn("cross-origin request refused", "path", r.URL.Path, "method", r.Method)
		http.Error(w, "forbidden: a cross-origin request", http.StatusForbidden)
	}))
	return cop.Handler(h)
}

// authed wraps a page handler: a request without a live session goes to
// the login (a GET) or gets 401; a POST without the session's CSRF token
// gets 403 and does nothing.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.sessions.current(r)
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login?next="+urlEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			// A form posted after the session ended keeps its work: the
			// person logs in and gets it back (drafts.go).
			if r.Method == http.MethodPost && c.login.keepDraft(w, r) {
				http.Redirect(w, r, "/login?next="+urlEscape("/draft"), http.StatusSeeOther)
				return
			}
			// A browser whose session the console no longer knows (its
			// end forgotten, a restart) logs in again and goes back to
			// the page; a request without a session cookie gets 401.
			if _, err := r.Cookie(sessionCookie); err == nil && r.Method == http.MethodPost {
				http.Redirect(w, r, "/login?lost=1&next="+urlEscape(pageOf(r.URL.Path)), http.StatusSeeOther)
				return
			}
			http.Error(w, "unauthorized: log in first", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameToken(s.csrf, csrfOf(r)) {
			c.log.Warn("csrf refused", "user", s.user, "path", r.URL.Path)
			http.Error(w, "forbidden: missing or invalid CSRF token", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodGet {
			if f := s.takeFlash(); f != "" {
				r = r.WithContext(context.WithValue(r.Context(), flashKey{}, f))
			}
		}
		h(w, r, s)
	}
}

// flashKey carries a session's flash message to the page rendered.
type flashKey struct{}
