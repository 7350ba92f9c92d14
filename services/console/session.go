package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"
)

// Cookie names.
const (
	// sessionCookie holds the session id.
	sessionCookie = "dl_session"
	// loginCookie holds the login form's CSRF token (before a session).
	loginCookie = "dl_login"
	// csrfField and csrfHeader carry the CSRF token of a POST.
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// session is one logged-in person: their own NATS connection and what
// audit.whoami said of them. It holds no password.
type session struct {
	id            string
	user, role    string
	readsPayloads bool
	csrf          string
	nc            *nats.Conn
	// violations reports the server's refusals on nc (never nil).
	violations *violations

	mu       sync.Mutex
	lastSeen time.Time
}

// touch records a use at now.
func (s *session) touch(now time.Time) {
	s.mu.Lock()
	s.lastSeen = now
	s.mu.Unlock()
}

func (s *session) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.lastSeen)
}

// sessions are the live sessions by id.
type sessions struct {
	idle time.Duration
	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(idle time.Duration) *sessions {
	return &sessions{idle: idle, byID: map[string]*session{}}
}

// randomToken returns 256 random bits in hex.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// add keeps a new session for nc.
func (ss *sessions) add(user, role string, reads bool, nc *nats.Conn, v *violations, now time.Time) *session {
	s := &session{id: randomToken(), user: user, role: role, readsPayloads: reads, csrf: randomToken(), nc: nc, violations: v, lastSeen: now}
	ss.mu.Lock()
	ss.byID[s.id] = s
	ss.mu.Unlock()
	return s
}

// get returns the live session of id and marks it used; an idle one is
// closed and not returned.
func (ss *sessions) get(id string, now time.Time) *session {
	ss.mu.Lock()
	s := ss.byID[id]
	ss.mu.Unlock()
	if s == nil {
		return nil
	}
	if s.idleSince(now) > ss.idle || s.nc.IsClosed() {
		ss.remove(id)
		return nil
	}
	s.touch(now)
	return s
}

// alive reports whether the session of id is live at now, without
// renewing it (a stream the page keeps open is not the person's
// activity); an idle one is closed.
func (ss *sessions) alive(id string, now time.Time) bool {
	ss.mu.Lock()
	s := ss.byID[id]
	ss.mu.Unlock()
	if s == nil {
		return false
	}
	if s.idleSince(now) > ss.idle || s.nc.IsClosed() {
		ss.remove(id)
		return false
	}
	return true
}

// remove drops the session of id and closes its connection.
func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	s := ss.byID[id]
	delete(ss.byID, id)
	ss.mu.Unlock()
	if s != nil {
		s.nc.Close()
	}
}

// sweep closes the sessions idle at now.
func (ss *sessions) sweep(now time.Time) {
	ss.mu.Lock()
	var idle []string
	for id, s := range ss.byID {
		if s.idleSince(now) > ss.idle {
			idle = append(idle, id)
		}
	}
	ss.mu.Unlock()
	for _, id := range idle {
		ss.remove(id)
	}
}

// closeAll closes every session.
func (ss *sessions) closeAll() {
	ss.mu.Lock()
	all := ss.byID
	ss.byID = map[string]*session{}
	ss.mu.Unlock()
	for _, s := range all {
		s.nc.Close()
	}
}

// count is the number of live sessions.
func (ss *sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

// limiters are the failed-login token buckets, per user name and per
// client address.
type limiters struct {
	r     rate.Limit
	burst int
	mu    sync.Mutex
	by    map[string]*limiter
}

type limiter struct {
	l    *rate.Limiter
	last time.Time
}

func newLimiters(r rate.Limit, burst int) *limiters {
	return &limiters{r: r, burst: burst, by: map[string]*limiter{}}
}

func (ls *limiters) get(key string, now time.Time) *rate.Limiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.by[key]
	if l == nil {
		l = &limiter{l: rate.NewLimiter(ls.r, ls.burst)}
		ls.by[key] = l
	}
	l.last = now
	return l.l
}

// attempt takes a token of every key's bucket before a login is tried,
// atomically per bucket, so that parallel attempts cannot all pass a
// check made before any of them failed. It returns false (taking
// nothing) when a bucket is empty, else a refund for a login that
// succeeded: only failures cost a token.
func (ls *limiters) attempt(now time.Time, keys ...string) (refund func(), ok bool) {
	var taken []*rate.Reservation
	undo := func() {
		for _, r := range taken {
			r.CancelAt(now)
		}
	}
	for _, k := range keys {
		r := ls.get(k, now).ReserveN(now, 1)
		if !r.OK() || r.DelayFrom(now) > 0 {
			r.CancelAt(now)
			undo()
			return nil, false
		}
		taken = append(taken, r)
	}
	return undo, true
}

// sweep forgets buckets unused long enough to be full again.
func (ls *limiters) sweep(now time.Time) {
	full := time.Duration(float64(ls.burst) / float64(ls.r) * float64(time.Second))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k, l := range ls.by {
		if now.Sub(l.last) > full {
			delete(ls.by, k)
		}
	}
}

// sameToken compares two tokens in constant time ("" never matches).
func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// csrfOf returns the CSRF token a request presents (header or form).
func csrfOf(r *http.Request) string {
	if t := r.Header.Get(csrfHeader); t != "" {
		return t
	}
	return r.PostFormValue(csrfField)
}

// setCookie sets a Secure, HttpOnly, SameSite=Strict cookie on Path /
// (maxAge < 0 deletes it).
func setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}
