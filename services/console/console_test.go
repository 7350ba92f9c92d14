package console

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

// env is a secured embedded server (the access table's accounts and
// people) with a real auditor answering, shared by the tests of this file.
type env struct {
	srv *natstest.Secured
}

var (
	sharedEnv  *env
	sharedOnce sync.Once
)

// startEnv starts the server and the auditor once; later calls reuse
// them (the auditor only reads here: the tests do not interfere).
func startEnv(t *testing.T) *env {
	t.Helper()
	sharedOnce.Do(func() {
		tb := &onceTB{T: t}
		srv := natstest.StartSecured(tb, streams.DefaultOptions())
		cfg := auditor.DefaultConfig()
		cfg.CheckpointInterval, cfg.ReconcileInterval = 0, 0
		a, err := auditor.New(srv.ConnectAs(tb, access.Auditor), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		tb.Cleanup(func() { cancel(); <-done })
		viewer := srv.ConnectAs(tb, access.DefaultPerson(access.RoleViewer))
		natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
			_, err := endpoint.Call[struct{}, api.WhoamiReply](context.Background(), viewer, api.AuditWhoami, struct{}{})
			return err
		})
		sharedEnv = &env{srv: srv}
	})
	if sharedEnv == nil {
		t.Fatal("environment did not start")
	}
	return sharedEnv
}

// onceTB defers the shared environment's cleanups to the end of the
// package's tests (TestMain), not the first test.
type onceTB struct {
	*testing.T
}

var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func (o *onceTB) Cleanup(f func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	cleanups = append(cleanups, f)
}

func (o *onceTB) TempDir() string {
	dir, err := os.MkdirTemp("", "console-test-")
	if err != nil {
		o.Fatal(err)
	}
	o.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupMu.Lock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanupMu.Unlock()
	os.Exit(code)
}

// password returns a person's password.
func (e *env) password(user string) string { return e.srv.Secrets.Users[user].Password }

// newConsole returns a console on the env's server, adjusted by mod.
func (e *env) newConsole(t *testing.T, mod func(*Config)) *Console {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NATSURL = e.srv.ClientURL()
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.sessions.closeAll)
	return c
}

// client is one browser: its cookies and address.
type client struct {
	t       *testing.T
	c       *Console
	addr    string
	cookies map[string]*http.Cookie
}

func newClient(t *testing.T, c *Console, addr string) *client {
	return &client{t: t, c: c, addr: addr, cookies: map[string]*http.Cookie{}}
}

// do sends one request through the handler, keeping the cookies it sets.
func (cl *client) do(method, path string, form url.Values) *httptest.ResponseRecorder {
	cl.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, path, body)
	r.RemoteAddr = cl.addr + ":40000"
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, ck := range cl.cookies {
		r.AddCookie(ck)
	}
	w := httptest.NewRecorder()
	cl.c.Handler().ServeHTTP(w, r)
	for _, ck := range w.Result().Cookies() {
		if ck.MaxAge < 0 {
			delete(cl.cookies, ck.Name)
		} else {
			cl.cookies[ck.Name] = ck
		}
	}
	return w
}

// doFollow is do, following a POST/redirect/GET's one redirect.
func (cl *client) doFollow(method, path string, form url.Values) *httptest.ResponseRecorder {
	cl.t.Helper()
	w := cl.do(method, path, form)
	if w.Code == http.StatusSeeOther {
		return cl.do(http.MethodGet, w.Header().Get("Location"), nil)
	}
	return w
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf returns the CSRF token of a page's forms.
func csrfIn(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return m[1]
}

// login posts the login form as user with password.
func (cl *client) login(user, password string) *httptest.ResponseRecorder {
	cl.t.Helper()
	page := cl.do(http.MethodGet, "/login", nil)
	return cl.do(http.MethodPost, "/login", url.Values{"csrf": {csrfIn(cl.t, page.Body.String())}, "user": {user}, "password": {password}})
}

// mustLogin logs in and returns the CSRF token of the session.
func (cl *client) mustLogin(user, password string) string {
	cl.t.Helper()
	if w := cl.login(user, password); w.Code != http.StatusSeeOther {
		cl.t.Fatalf("login as %s: %d\n%s", user, w.Code, w.Body)
	}
	w := cl.do(http.MethodGet, "/audit", nil)
	if w.Code != http.StatusOK {
		cl.t.Fatalf("GET /audit: %d", w.Code)
	}
	return csrfIn(cl.t, w.Body.String())
}

// TestValidate: the defaults are valid; a listen address other than
// loopback needs TLS; broken settings are refused.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want error
	}{
		{"defaults", func(*Config) {}, nil},
		{"localhost", func(c *Config) { c.Listen = "localhost:9000" }, nil},
		{"ipv6 loopback", func(c *Config) { c.Listen = "[::1]:9000" }, nil},
		{"every interface without TLS", func(c *Config) { c.Listen = ":8090" }, ErrInsecureListen},
		{"0.0.0.0 without TLS", func(c *Config) { c.Listen = "0.0.0.0:8090" }, ErrInsecureListen},
		{"LAN address without TLS", func(c *Config) { c.Listen = "10.1.2.3:8090" }, ErrInsecureListen},
		{"LAN address with TLS", func(c *Config) { c.Listen, c.TLSCert, c.TLSKey = "10.1.2.3:8090", "c.pem", "k.pem" }, nil},
		{"certificate without key", func(c *Config) { c.TLSCert = "c.pem" }, ErrConfig},
		{"no port", func(c *Config) { c.Listen = "127.0.0.1" }, ErrConfig},
		{"no login rate", func(c *Config) { c.LoginRate = -1 }, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mod(&cfg)
			err := cfg.validate()
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("validate: %v, want %v", err, tc.want)
			}
			if _, err := New(cfg, nil); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("New: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestLogin: a person logs in with their own password and gets a
// session cookie (Secure, HttpOnly, SameSite=Strict) and their role as
// the server authenticated it; a wrong password and an unknown user get
// the same answer; logout closes the connection.
func TestLogin(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	op := access.DefaultPerson(access.RoleOperator)

	cl := newClient(t, c, "127.0.0.10")
	w := cl.login(op, e.password(op))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("login: %d %q\n%s", w.Code, w.Header().Get("Location"), w.Body)
	}
	ck := cl.cookies[sessionCookie]
	if ck == nil || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || len(ck.Value) != 64 {
		t.Fatalf("session cookie %+v", ck)
	}
	page := cl.do(http.MethodGet, "/", nil)
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `<span class="role">(operator)</span>`) {
		t.Fatalf("overview: %d\n%s", page.Code, page.Body)
	}
	if got := page.Header().Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'self'") {
		t.Errorf("CSP %q", got)
	}
	if c.sessions.count() != 1 {
		t.Fatalf("%d sessions", c.sessions.count())
	}
	var nc = c.anySession().nc
	// The connection keeps no password (it asked a handler that forgot it).
	kept := nc.Opts.Password
	if nc.Opts.UserInfo != nil {
		_, p := nc.Opts.UserInfo()
		kept += p
	}
	if kept != "" || nc.Opts.AllowReconnect {
		t.Errorf("the session's connection keeps the password (%v) or reconnects (%v)", kept != "", nc.Opts.AllowReconnect)
	}
	if w := cl.do(http.MethodPost, "/logout", url.Values{"csrf": {csrfIn(t, page.Body.String())}}); w.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d", w.Code)
	}
	if !nc.IsClosed() || c.sessions.count() != 0 {
		t.Fatal("logout left the connection open")
	}
	if w := cl.do(http.MethodGet, "/", nil); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/login") {
		t.Fatalf("after logout: %d %q", w.Code, w.Header().Get("Location"))
	}

	var bodies []string
	for _, tc := range []struct{ name, user, password string }{
		{"wrong password", op, "not-the-password"},
		{"unknown user", "mallory", e.password(op)},
		{"service user", access.Auditor, "x"},
		// The publisher's role imports no audit.whoami: the server refuses
		// it, at once.
		{"publisher", string(access.RolePublisher), e.password(string(access.RolePublisher))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, c, "127.0.0.11")
			begin := time.Now()
			w := cl.login(tc.user, tc.password)
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("the login took %s to fail", took)
			}
			if w.Code != http.StatusUnauthorized || cl.cookies[sessionCookie] != nil {
				t.Fatalf("%d, cookie %v", w.Code, cl.cookies[sessionCookie])
			}
			// The user name typed is kept in its field (never the
			// password); the rest of the page is the same.
			body := csrfRE.ReplaceAllString(w.Body.String(), "")
			body = regexp.MustCompile(`(id="user" name="user" autocomplete="username" required) value="[^"]*"`).ReplaceAllString(body, "$1")
			bodies = append(bodies, body)
		})
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("the failures differ:\n%s\n---\n%s", bodies[0], b)
		}
	}
	if c.sessions.count() != 0 {
		t.Errorf("%d sessions after failed logins", c.sessions.count())
	}
}

// anySession returns one live session (tests hold one at a time).
func (c *Console) anySession() *session {
	c.sessions.mu.Lock()
	defer c.sessions.mu.Unlock()
	for _, s := range c.sessions.byID {
		return s
	}
	return nil
}

// TestLoginRateLimited: failed logins use up the bucket of the user name
// (from any address) and of the address (for any user); then even the
// right password is refused until the bucket refills.
func TestLoginRateLimited(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, func(c *Config) { c.LoginRate, c.LoginBurst = rate.Every(time.Hour), 2 })
	viewer, op := access.DefaultPerson(access.RoleViewer), access.DefaultPerson(access.RoleOperator)
	attacker := newClient(t, c, "127.0.0.20")
	for i := range 2 {
		if w := attacker.login(viewer, "guess"); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, w.Code)
		}
	}
	for _, tc := range []struct {
		name, addr, user string
	}{
		{"same user, same address", "127.0.0.20", viewer},
		{"same user, other address", "127.0.0.21", viewer},
		{"other user, same address", "127.0.0.20", op},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newClient(t, c, tc.addr).login(tc.user, e.password(tc.user))
			if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "Too many failed attempts") {
				t.Fatalf("%d\n%s", w.Code, w.Body)
			}
		})
	}
	if w := newClient(t, c, "127.0.0.22").login(op, e.password(op)); w.Code != http.StatusSeeOther {
		t.Fatalf("another user from another address: %d", w.Code)
	}
}

// TestCSRF: a POST without the session's token (or with another
// session's) is refused with 403 and does nothing; the login form needs
// its own token too.
func TestCSRF(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	viewer := access.DefaultPerson(access.RoleViewer)
	cl := newClient(t, c, "127.0.0.30")
	token := cl.mustLogin(viewer, e.password(viewer))
	other := newClient(t, c, "127.0.0.31").mustLogin(viewer, e.password(viewer))
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  string
	}{
		{"no token", url.Values{}, ""},
		{"empty token", url.Values{"csrf": {""}}, ""},
		{"another session's token", url.Values{"csrf": {other}}, ""},
		{"wrong header", url.Values{}, strings.Repeat("0", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/logout", "/audit/verify", "/drains/plan", "/records/x/redrive"} {
				r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(tc.form.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if tc.hdr != "" {
					r.Header.Set(csrfHeader, tc.hdr)
				}
				r.AddCookie(cl.cookies[sessionCookie])
				w := httptest.NewRecorder()
				c.Handler().ServeHTTP(w, r)
				if w.Code != http.StatusForbidden {
					t.Errorf("POST %s: %d, want 403", path, w.Code)
				}
			}
			if c.sessions.count() != 2 {
				t.Fatalf("a refused logout closed a session (%d left)", c.sessions.count())
			}
			if _, last := c.audit.results.get(); last != nil {
				t.Fatal("a refused POST ran a reconciliation")
			}
			if v, _ := c.audit.results.get(); v != nil {
				t.Fatal("a refused POST ran a verification")
			}
		})
	}
	// With the session's own token, a request a browser says comes from
	// another site is refused before any handler (net/http's
	// CrossOriginProtection), and whatever that check lets through is the
	// token's to decide: the console answers as the library checks.
	cop := http.NewCrossOriginProtection()
	for _, tc := range []struct {
		name, site, origin string
		refused            bool
	}{
		{"another site says Fetch metadata", "cross-site", "", true},
		{"another site's Origin, no Fetch metadata", "", "https://evil.example", true},
		{"same site, other origin", "same-site", "https://sub.example.com", true},
		{"same origin", "same-origin", "", false},
		{"typed by the person", "none", "", false},
		{"no browser headers (a script with the token)", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/audit/verify", strings.NewReader(url.Values{"csrf": {token}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.site != "" {
				r.Header.Set("Sec-Fetch-Site", tc.site)
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			r.AddCookie(cl.cookies[sessionCookie])
			if libRefuses := cop.Check(r) != nil; libRefuses != tc.refused {
				t.Fatalf("the library refuses: %v, the row says %v", libRefuses, tc.refused)
			}
			w := httptest.NewRecorder()
			c.Handler().ServeHTTP(w, r)
			if refused := w.Code == http.StatusForbidden; refused != tc.refused {
				t.Errorf("POST with the token: %d, refused %v, want %v\n%s", w.Code, refused, tc.refused, w.Body)
			}
		})
	}
	// The header form of the token works (what htmx sends).
	r := httptest.NewRequest(http.MethodPost, "/audit/verify", nil)
	r.Header.Set(csrfHeader, token)
	r.AddCookie(cl.cookies[sessionCookie])
	w := httptest.NewRecorder()
	c.Handler().ServeHTTP(w, r)
	if v, _ := c.audit.results.get(); w.Code != http.StatusSeeOther || v == nil {
		t.Fatalf("verify with the header token: %d\n%s", w.Code, w.Body)
	}
	// The login form without its token.
	anon := newClient(t, c, "127.0.0.32")
	if w := anon.do(http.MethodPost, "/login", url.Values{"user": {viewer}, "password": {e.password(viewer)}}); w.Code != http.StatusForbidden {
		t.Fatalf("login without a token: %d", w.Code)
	}
}

// TestIdleExpiry: a session unused for the idle timeout is gone and its
// connection closed, on its next request and by the sweep alike.
func TestIdleExpiry(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	viewer := access.DefaultPerson(access.RoleViewer)

	t.Run("next request", func(t *testing.T) {
		cl := newClient(t, c, "127.0.0.40")
		cl.mustLogin(viewer, e.password(viewer))
		s := c.anySession()
		// Wait, without using the session, until it is idle.
		natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
			if s.idleSince(time.Now()) <= c.cfg.IdleTimeout {
				return errors.New("not idle yet")
			}
			return nil
		})
		if w := cl.do(http.MethodGet, "/", nil); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/login") {
			t.Fatalf("an idle session was served: %d", w.Code)
		}
		if !s.nc.IsClosed() || c.sessions.count() != 0 {
			t.Fatal("the idle session's connection is open")
		}
	})
	t.Run("sweep", func(t *testing.T) {
		cl := newClient(t, c, "127.0.0.41")
		cl.mustLogin(viewer, e.password(viewer))
		nc := c.anySession().nc
		c.sessions.sweep(time.Now().Add(time.Second))
		if !nc.IsClosed() || c.sessions.count() != 0 {
			t.Fatal("the sweep left an idle session open")
		}
		if w := cl.do(http.MethodGet, "/", nil); w.Code != http.StatusSeeOther {
			t.Fatalf("expired session served: %d", w.Code)
		}
	})
	t.Run("used sessions stay", func(t *testing.T) {
		cl := newClient(t, c, "127.0.0.42")
		cl.mustLogin(viewer, e.password(viewer))
		c.sessions.sweep(time.Now())
		if c.sessions.count() != 1 {
			t.Fatal("the sweep closed a session in use")
		}
		c.sessions.closeAll()
	})
}

// TestRoleButtons: the pages offer a role only what it may do; a viewer's
// forged POST of an operator's action, with a valid CSRF token, reaches
// the server as the viewer and is refused there (FORBIDDEN, at once).
func TestRoleButtons(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	buttons := []string{`id="dry-run"`, `id="checkpoint"`}
	for _, tc := range []struct {
		role string
		want bool
	}{
		{access.DefaultPerson(access.RoleOperator), true},
		{access.DefaultPerson(access.RoleViewer), false},
		{access.DefaultPerson(access.RoleInspector), false},
	} {
		t.Run(tc.role, func(t *testing.T) {
			cl := newClient(t, c, "127.0.0.50")
			cl.mustLogin(tc.role, e.password(tc.role))
			var body strings.Builder
			for _, p := range []string{"/drains", "/audit"} {
				w := cl.do(http.MethodGet, p, nil)
				body.WriteString(w.Body.String())
			}
			for _, b := range buttons {
				if got := strings.Contains(body.String(), b); got != tc.want {
					t.Errorf("%s: present %v, want %v", b, got, tc.want)
				}
			}
		})
	}
	t.Run("forged POST", func(t *testing.T) {
		viewer := access.DefaultPerson(access.RoleViewer)
		cl := newClient(t, c, "127.0.0.51")
		token := cl.mustLogin(viewer, e.password(viewer))
		for _, path := range []string{"/audit/checkpoint", "/drains/plan", "/records/abc/redrive"} {
			begin := time.Now()
			w := cl.doFollow(http.MethodPost, path, url.Values{"csrf": {token}, "exhausted": {"on"}})
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), api.ErrForbidden) {
				t.Errorf("POST %s as viewer: %d\n%s", path, w.Code, w.Body)
			}
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("POST %s: refused after %s (the call's timeout, not the server's refusal)", path, took)
			}
		}
	})
}

// TestPagesRender: every page of a session renders (the services it
// needs but that are not running show their error, not a broken page).
func TestPagesRender(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, func(c *Config) { c.CallTimeout = 2 * time.Second })
	viewer := access.DefaultPerson(access.RoleViewer)
	cl := newClient(t, c, "127.0.0.60")
	cl.mustLogin(viewer, e.password(viewer))
	for _, p := range []string{"/", "/groups", "/records", "/records.csv", "/records/nope", "/drains", "/audit", "/approvals", "/static/htmx.min.js", "/static/console.css"} {
		w := cl.do(http.MethodGet, p, nil)
		if w.Code >= 500 && w.Code != http.StatusBadGateway {
			t.Errorf("GET %s: %d\n%s", p, w.Code, w.Body)
		}
		if strings.HasSuffix(p, ".js") && !strings.Contains(w.Body.String(), "htmx") {
			t.Errorf("GET %s: not htmx", p)
		}
		if w.Header().Get("Content-Type") == "text/html; charset=utf-8" && !strings.Contains(w.Body.String(), "</html>") {
			t.Errorf("GET %s: a truncated page", p)
		}
	}
	w := cl.do(http.MethodGet, "/records/nope", nil)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), api.ErrNotFound) {
		t.Errorf("an unknown record: %d\n%s", w.Code, w.Body)
	}
}

// TestLoginRateLimitedConcurrent: failed logins sent at once cannot
// outrun the bucket: no more than its burst reach the server (a check of
// the bucket before the attempt and a charge after it let every parallel
// attempt through while the server checked the first password).
func TestLoginRateLimitedConcurrent(t *testing.T) {
	e := startEnv(t)
	const burst, attempts = 2, 12
	c := e.newConsole(t, func(c *Config) { c.LoginRate, c.LoginBurst = rate.Every(time.Hour), burst })
	viewer := access.DefaultPerson(access.RoleViewer)
	clients := make([]*client, attempts)
	forms := make([]url.Values, attempts)
	for i := range clients {
		clients[i] = newClient(t, c, "127.0.0.70")
		page := clients[i].do(http.MethodGet, "/login", nil)
		forms[i] = url.Values{"csrf": {csrfIn(t, page.Body.String())}, "user": {viewer}, "password": {"guess"}}
	}
	codes := make([]int, attempts)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { codes[i] = clients[i].do(http.MethodPost, "/login", forms[i]).Code })
	}
	wg.Wait()
	tried := 0
	for _, code := range codes {
		switch code {
		case http.StatusUnauthorized:
			tried++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("status %d", code)
		}
	}
	if tried > burst {
		t.Errorf("%d of %d parallel failed logins reached the server, burst %d", tried, attempts, burst)
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoPasswordInLogs: neither a login nor a failed one logs a password,
// not even one typed into the user field.
func TestNoPasswordInLogs(t *testing.T) {
	e := startEnv(t)
	logs := &syncBuffer{}
	cfg := DefaultConfig()
	cfg.NATSURL = e.srv.ClientURL()
	c, err := New(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.sessions.closeAll)
	op := access.DefaultPerson(access.RoleOperator)
	pw := e.password(op)
	newClient(t, c, "127.0.0.80").mustLogin(op, pw)
	if w := newClient(t, c, "127.0.0.81").login(pw, pw); w.Code != http.StatusUnauthorized {
		t.Fatalf("password as user name: %d", w.Code)
	}
	if !strings.Contains(logs.String(), "login failed") {
		t.Fatalf("no log of the failure:\n%s", logs)
	}
	if strings.Contains(logs.String(), pw) {
		t.Errorf("a password is in the logs:\n%s", logs)
	}
}

// TestIdleExpiryWithLiveProgress: a page streaming a drain's progress is
// not a person's activity: the session still expires when idle, its
// connection is closed and the stream ends (the stream's own reads used
// to renew the session every second, so an open drain page kept it alive
// forever).
func TestIdleExpiryWithLiveProgress(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, func(c *Config) { c.IdleTimeout, c.CallTimeout = 300*time.Millisecond, time.Second })
	c.drains.sseEvery = 20 * time.Millisecond
	viewer := access.DefaultPerson(access.RoleViewer)
	cl := newClient(t, c, "127.0.0.90")
	cl.mustLogin(viewer, e.password(viewer))
	s := c.anySession()
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/drains/d1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(cl.cookies[sessionCookie])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	begin := time.Now()
	body, _ := io.ReadAll(resp.Body) // ends when the stream does
	if ctx.Err() != nil {
		t.Fatalf("the stream ran %s, past the idle timeout, and kept the session", time.Since(begin).Round(time.Millisecond))
	}
	if !strings.Contains(string(body), "event: progress") {
		t.Errorf("no progress event:\n%s", body)
	}
	if !s.nc.IsClosed() || c.sessions.count() != 0 {
		t.Error("the idle session's connection is open")
	}
}

// TestShowPayload: a revealed payload is shown as it is stored: JSON only
// indented (members in their order, numbers and markup as written), other
// bytes as they are. (Re-encoding it through a map sorted the members,
// rounded big numbers to float64 and turned < into \u003c.)
func TestShowPayload(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"order kept", `{"z":1,"a":2}`, "{\n  \"z\": 1,\n  \"a\": 2\n}"},
		{"big number", `{"qty":12345678901234567890}`, "{\n  \"qty\": 12345678901234567890\n}"},
		{"markup", `{"m":"<b>x</b>&"}`, "{\n  \"m\": \"<b>x</b>&\"\n}"},
		{"not JSON", `{"transaction_id": "TX-1",`, `{"transaction_id": "TX-1",`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := showPayload([]byte(tc.in)); got != tc.want {
				t.Errorf("showPayload(%s) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
