package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// loginPages is the login and session part: the login form, logout, and
// a form kept across the end of a session (drafts.go). It opens each
// person's NATS connection (nats) and keeps the session store, the login
// limiters and the drafts.
type loginPages struct {
	web
	nats     natsDial
	sessions *sessions
	limits   *limiters
	drafts   *drafts
}

// natsDial is how a login connects to NATS, from Config.
type natsDial struct {
	name, url      string
	ca, cert, key  string
	connectTimeout time.Duration
}

// natsOf is cfg's NATS connection settings.
func natsOf(cfg Config) natsDial {
	return natsDial{name: cfg.Name, url: cfg.NATSURL, ca: cfg.NATSTLSCA, cert: cfg.NATSTLSCert, key: cfg.NATSTLSKey, connectTimeout: cfg.ConnectTimeout}
}

// Login errors.
var (
	// ErrLogin: the user name or password was refused (which one is not
	// said), or the server's answer could not be read.
	ErrLogin = errors.New("console: login refused")
	// ErrRateLimited: too many failed logins for the user or the address.
	ErrRateLimited = errors.New("console: too many failed logins")
	// ErrNotPerson: the user authenticated but is not a person (a service
	// user or the admin): the console serves people only.
	ErrNotPerson = errors.New("console: not a person's user")
)

// clientAddr is the request's remote address without its port (the
// console is reached directly: no forwarding header is trusted).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// login opens a connection as user with password, asks audit.whoami who
// the server authenticated, and keeps a session. The password serves the
// connect only: the connection asks for it through a handler that
// forgets it once connected, so nothing keeps it, and the connection does
// not reconnect (it could not authenticate again): a disconnect ends the
// session and the person logs in again.
func (p *loginPages) login(ctx context.Context, user, password string) (*session, error) {
	v := &violations{}
	var mu sync.Mutex
	secret := password
	opts := []nats.Option{
		nats.Name(p.nats.name + "-" + user),
		nats.UserInfoHandler(func() (string, string) {
			mu.Lock()
			defer mu.Unlock()
			return user, secret
		}),
		nats.CustomInboxPrefix(access.InboxPrefix(user)),
		nats.Timeout(p.nats.connectTimeout),
		nats.NoReconnect(),
		nats.ErrorHandler(v.handler),
	}
	if p.nats.ca != "" {
		opts = append(opts, nats.RootCAs(p.nats.ca))
	}
	if p.nats.cert != "" {
		opts = append(opts, nats.ClientCert(p.nats.cert, p.nats.key))
	}
	nc, err := nats.Connect(p.nats.url, opts...)
	mu.Lock()
	secret = ""
	mu.Unlock()
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return nil, ErrLogin
		}
		return nil, fmt.Errorf("console: connect: %w", err)
	}
	// A role that imports no audit.whoami (the publisher) is refused by
	// the server at once.
	who, err := callOn[struct{}, api.WhoamiReply](ctx, p.rq.timeout, nc, v, "", api.AuditWhoami, struct{}{})
	if err != nil {
		// A disabled person's user may only ask the server who it is
		// (access.Disabled): told so, not "login failed".
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		disabled, _ := access.Disabled(dctx, nc)
		cancel()
		nc.Close()
		if disabled {
			return nil, access.ErrDisabled
		}
		return nil, fmt.Errorf("%w: whoami: %w", ErrLogin, err)
	}
	if who.Role == "" || who.User != user {
		nc.Close()
		return nil, ErrNotPerson
	}
	s, err := p.sessions.add(who.User, who.Role, who.ReadsPayloads, nc, v, p.now())
	if err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// handleLoginForm shows the login form with a fresh login CSRF token.
func (p *loginPages) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	if s := p.sessions.current(r); s != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	p.renderLogin(w, r, http.StatusOK, "")
}

// renderLogin shows the login form; after a refusal it keeps the user
// name typed (never the password), bounded by MaxUserName.
func (p *loginPages) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomToken()
	setCookie(w, loginCookie, tok, 600)
	v := &view{Title: "Log in", CSRF: tok, Error: msg, Next: safeNext(r.FormValue("next"))}
	if r.Method == http.MethodPost {
		if u := strings.TrimSpace(r.PostFormValue("user")); len(u) <= MaxUserName {
			v.Data = loginData{User: u}
		}
	}
	switch {
	case v.Next == "/draft":
		v.Notice = "Your session ended. Log in again: what you were sending is kept and shown to you again."
	case r.FormValue("lost") == "1":
		v.Error = "Your session ended before your last action was sent: it was not done, and what it carried could not be kept. Log in again to go back to the page."
	}
	p.render(w, r, status, "login", v)
}

// loginData is the login form's user name after a refusal.
type loginData struct {
	User string
}

// Login form limits.
const (
	// maxLoginBody bounds a login POST's body (the form's CSRF token, user
	// name, password and next page): a longer body is refused unread.
	maxLoginBody = 8 << 10
	// MaxUserName is the longest user name a login accepts, in bytes (the
	// access table's names are far shorter); a longer one is refused
	// before any limiter or the server sees it.
	MaxUserName = 256
)

// handleLogin reads the login form (at most maxLoginBody bytes), checks
// its CSRF token, the user name's length and the limiters (the address's
// first), then logs in. A failure says nothing about which part was wrong
// and costs a token of the address's and the user's buckets.
func (p *loginPages) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, fmt.Sprintf("request too large: a login form holds at most %d bytes", maxLoginBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad request: unreadable form", http.StatusBadRequest)
		return
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(ck.Value, csrfOf(r)) {
		http.Error(w, "forbidden: missing or invalid CSRF token", http.StatusForbidden)
		return
	}
	user := strings.TrimSpace(r.PostFormValue("user"))
	if len(user) > MaxUserName {
		p.renderLogin(w, r, http.StatusBadRequest, fmt.Sprintf("User name too long (at most %d bytes).", MaxUserName))
		return
	}
	password := r.PostFormValue("password")
	now := p.now()
	refund, ok := p.limits.attempt(now, clientAddr(r), user)
	if !ok {
		p.log.Warn("login rate limited", "user_sha256", nameHash(user), "addr", clientAddr(r))
		p.renderLogin(w, r, http.StatusTooManyRequests, "Too many failed attempts. Wait a minute and try again.")
		return
	}
	if user == "" || password == "" {
		p.renderLogin(w, r, http.StatusUnauthorized, "Login failed.")
		return
	}
	s, err := p.login(r.Context(), user, password)
	if errors.Is(err, ErrTooManySessions) {
		refund() // the password was right
		p.log.Warn("login refused: every session in use", "user", user, "sessions", p.sessions.count())
		p.renderLogin(w, r, http.StatusServiceUnavailable, "The console has too many open sessions. Try again later.")
		return
	}
	if errors.Is(err, access.ErrDisabled) {
		// The password was right: the name is the person's.
		p.log.Warn("login refused: the person is disabled", "user", user, "addr", clientAddr(r))
		p.renderLogin(w, r, http.StatusForbidden, "This person is disabled: ask an administrator.")
		return
	}
	if err != nil {
		// The name as typed may be a password typed in the wrong field:
		// only its hash is logged.
		p.log.Warn("login failed", "user_sha256", nameHash(user), "addr", clientAddr(r), "err", err)
		p.renderLogin(w, r, http.StatusUnauthorized, "Login failed.")
		return
	}
	refund()
	setCookie(w, loginCookie, "", -1)
	setCookie(w, sessionCookie, s.id, 0)
	p.log.Info("login", "user", s.user, "role", s.role, "addr", clientAddr(r))
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// nameHash is the first 16 hex digits of the SHA-256 of a user name as
// typed (what a failed login logs instead of the name).
func nameHash(user string) string {
	sum := sha256.Sum256([]byte(user))
	return hex.EncodeToString(sum[:8])
}

// safeNext is a local path to go to after login ("/" otherwise).
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return "/"
	}
	return next
}

// handleLogout closes the session and its connection.
func (p *loginPages) handleLogout(w http.ResponseWriter, r *http.Request, s *session) {
	p.sessions.remove(s.id)
	setCookie(w, sessionCookie, "", -1)
	p.log.Info("logout", "user", s.user)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
