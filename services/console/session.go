package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
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
	// flash is the outcome of the person's last action, shown once by
	// the page the action redirected to (POST/redirect/GET).
	flash string
	// plans are the drain plans shown to the person, by token: a Start
	// drain is accepted only with a plan token still fresh (planTTL) and
	// of the same filter, once (plans.go).
	plans map[string]planToken
	// creation is the challenge of the passkey creation the person
	// started (passkeys.go), creationAt when.
	creation   string
	creationAt time.Time
}

// setCreation keeps the challenge of a passkey creation started at now.
func (s *session) setCreation(challenge string, now time.Time) {
	s.mu.Lock()
	s.creation, s.creationAt = challenge, now
	s.mu.Unlock()
}

// takeCreation returns and forgets the kept creation challenge, if it is
// younger than ttl.
func (s *session) takeCreation(now time.Time, ttl time.Duration) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, at := s.creation, s.creationAt
	s.creation, s.creationAt = "", time.Time{}
	return c, c != "" && now.Sub(at) <= ttl
}

// setFlash keeps msg for the next page the person opens.
func (s *session) setFlash(msg string) {
	s.mu.Lock()
	s.flash = msg
	s.mu.Unlock()
}

// takeFlash returns and forgets the kept message.
func (s *session) takeFlash() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flash
	s.flash = ""
	return f
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

// sessions are the live sessions by id, bounded: at most perPerson for
// one person (a login beyond it ends their oldest session) and at most
// total in all (a person without a session is then refused).
type sessions struct {
	idle      time.Duration
	perPerson int
	total     int
	mu        sync.Mutex
	byID      map[string]*session
	// byUser lists each person's session ids, oldest first.
	byUser map[string][]string
	// expired remembers whose sessions ended by idleness (id → user,
	// the most recent maxExpired), so that work posted after the end is
	// kept for that person only (drafts.go).
	expired *simplelru.LRU[string, string]
}

// maxExpired is how many expired session ids are remembered.
const maxExpired = 1000

func newSessions(idle time.Duration, perPerson, total int) *sessions {
	expired, _ := simplelru.NewLRU[string, string](maxExpired, nil)
	return &sessions{idle: idle, perPerson: perPerson, total: total, byID: map[string]*session{}, byUser: map[string][]string{}, expired: expired}
}

// ErrTooManySessions: every session of the console is in use and the
// person has none to give up.
var ErrTooManySessions = errors.New("console: too many sessions")

// randomToken returns 256 random bits in hex.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// add keeps a new session for nc. A person at their cap loses their
// oldest session (its connection closed); a person without a session is
// refused ErrTooManySessions (nc is not kept) while every session of the
// console is in use.
func (ss *sessions) add(user, role string, reads bool, nc *nats.Conn, v *violations, now time.Time) (*session, error) {
	s := &session{id: randomToken(), user: user, role: role, readsPayloads: reads, csrf: randomToken(), nc: nc, violations: v, lastSeen: now}
	var ended []*session
	ss.mu.Lock()
	ids := ss.byUser[user]
	if len(ids) == 0 && len(ss.byID) >= ss.total {
		ss.mu.Unlock()
		return nil, ErrTooManySessions
	}
	for len(ids) >= ss.perPerson || (len(ids) > 0 && len(ss.byID) >= ss.total) {
		ended = append(ended, ss.byID[ids[0]])
		delete(ss.byID, ids[0])
		ids = ids[1:]
	}
	ss.byID[s.id] = s
	ss.byUser[user] = append(ids, s.id)
	ss.mu.Unlock()
	for _, e := range ended {
		e.nc.Close()
	}
	return s, nil
}

// drop forgets the session of id (ss.mu held) and returns it.
func (ss *sessions) drop(id string) *session {
	s := ss.byID[id]
	if s == nil {
		return nil
	}
	delete(ss.byID, id)
	ids := slices.DeleteFunc(ss.byUser[s.user], func(x string) bool { return x == id })
	if len(ids) == 0 {
		delete(ss.byUser, s.user)
	} else {
		ss.byUser[s.user] = ids
	}
	return s
}

// ofUser is the number of live sessions of user.
func (ss *sessions) ofUser(user string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byUser[user])
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
		ss.expire(id)
		return nil
	}
	s.touch(now)
	return s
}

// expire removes the session of id as ended by idleness, remembering
// whose it was.
func (ss *sessions) expire(id string) {
	ss.mu.Lock()
	s := ss.drop(id)
	if s != nil {
		ss.expired.Add(id, s.user)
	}
	ss.mu.Unlock()
	if s != nil {
		s.nc.Close()
	}
}

// expiredUser is the person whose session of id ended by idleness, or "".
func (ss *sessions) expiredUser(id string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	u, _ := ss.expired.Get(id)
	return u
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
		ss.expire(id)
		return false
	}
	return true
}

// remove drops the session of id and closes its connection.
func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	s := ss.drop(id)
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
		ss.expire(id)
	}
}

// closeAll closes every session.
func (ss *sessions) closeAll() {
	ss.mu.Lock()
	all := ss.byID
	ss.byID = map[string]*session{}
	ss.byUser = map[string][]string{}
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

// limiters are the failed-login token buckets: one per client address
// and one per user name, each kind in its own map of at most size buckets
// (the least recently used goes first), so no input can grow them: a
// flood of new names or addresses only evicts old buckets. An attempt
// takes the address's token first and looks the user name up only when
// the address may try, so an address that is refused creates nothing.
type limiters struct {
	r     rate.Limit
	burst int
	mu    sync.Mutex
	addrs *simplelru.LRU[string, *limiter]
	users *simplelru.LRU[string, *limiter]
}

type limiter struct {
	l    *rate.Limiter
	last time.Time
}

// newLimiters returns empty limiters of rate r and burst, keeping at most
// size buckets per kind (size ≥ 1).
func newLimiters(r rate.Limit, burst, size int) *limiters {
	addrs, err := simplelru.NewLRU[string, *limiter](size, nil)
	if err != nil {
		panic(err) // size ≥ 1: Config.validate
	}
	users, _ := simplelru.NewLRU[string, *limiter](size, nil)
	return &limiters{r: r, burst: burst, addrs: addrs, users: users}
}

// get returns the bucket of key in m, made full when new. ls.mu is held.
func (ls *limiters) get(m *simplelru.LRU[string, *limiter], key string, now time.Time) *rate.Limiter {
	l, ok := m.Get(key)
	if !ok {
		l = &limiter{l: rate.NewLimiter(ls.r, ls.burst)}
		m.Add(key, l)
	}
	l.last = now
	return l.l
}

// attempt takes a token of the address's bucket, then of the user name's
// (its SHA-256: a name typed as a password is not kept), before a login is
// tried, atomically, so that parallel attempts cannot all pass a check
// made before any of them failed. It returns false (taking nothing, and
// creating no bucket of the user name when the address is refused) when a
// bucket is empty, else a refund for a login that succeeded: only
// failures cost a token.
func (ls *limiters) attempt(now time.Time, addr, user string) (refund func(), ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	a := ls.get(ls.addrs, addrKey(addr), now).ReserveN(now, 1)
	if !a.OK() || a.DelayFrom(now) > 0 {
		a.CancelAt(now)
		return nil, false
	}
	u := ls.get(ls.users, nameHash(user), now).ReserveN(now, 1)
	if !u.OK() || u.DelayFrom(now) > 0 {
		u.CancelAt(now)
		a.CancelAt(now)
		return nil, false
	}
	return func() {
		u.CancelAt(now)
		a.CancelAt(now)
	}, true
}

// addrKey is the bucket of a client address: an IPv4 address itself, an
// IPv6 address's /64 (one host holds a whole /64 and could otherwise try
// from as many addresses as it likes).
func addrKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Is4() || ip.Is4In6() {
		return addr
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}

// len is the number of buckets kept, per kind.
func (ls *limiters) len() (addrs, users int) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.addrs.Len(), ls.users.Len()
}

// sweep forgets buckets unused long enough to be full again.
func (ls *limiters) sweep(now time.Time) {
	full := time.Duration(float64(ls.burst) / float64(ls.r) * float64(time.Second))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, m := range []*simplelru.LRU[string, *limiter]{ls.addrs, ls.users} {
		for _, k := range m.Keys() {
			if l, ok := m.Peek(k); ok && now.Sub(l.last) > full {
				m.Remove(k)
			}
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

// current returns the request's live session, or nil.
func (ss *sessions) current(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	return ss.get(ck.Value, time.Now())
}
