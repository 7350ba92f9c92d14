package console

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/time/rate"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestLimiterBounded: whatever keys come, the limiters keep at most their
// size of buckets per kind; an address that is refused creates no bucket
// for the user name it tried; a bucket evicted and made again is full.
func TestLimiterBounded(t *testing.T) {
	const size, burst = 8, 2
	for _, tc := range []struct {
		name string
		addr func(i int) string
		user func(i int) string
		// users is the most user-name buckets the run may leave.
		users int
	}{
		{"one address, many names", func(int) string { return "192.0.2.1" }, func(i int) string { return "Müller & Söhne <Großhandel> " + strconv.Itoa(i) }, burst},
		{"many addresses, one name", func(i int) string { return "2001:db8::" + strconv.FormatInt(int64(i), 16) }, func(int) string { return "operator" }, 1},
		{"many addresses, many names", func(i int) string { return "198.51.100." + strconv.Itoa(i%250) + "/" + strconv.Itoa(i) }, func(i int) string { return strings.Repeat("é", 100) + strconv.Itoa(i) }, size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := newLimiters(rate.Every(time.Hour), burst, size)
			now := time.Now()
			for i := range 1000 {
				ls.attempt(now, tc.addr(i), tc.user(i))
				a, u := ls.len()
				if a > size || u > size {
					t.Fatalf("after %d attempts: %d address and %d user buckets, bound %d", i+1, a, u, size)
				}
			}
			if _, u := ls.len(); u > tc.users {
				t.Errorf("%d user-name buckets, want at most %d", u, tc.users)
			}
		})
	}
}

// TestLimiterAddressFirst: a refused address creates no bucket of the
// user name; a refused user name takes no token of the address; an IPv6
// address is limited by its /64.
func TestLimiterAddressFirst(t *testing.T) {
	ls := newLimiters(rate.Every(time.Hour), 1, 16)
	now := time.Now()
	if _, ok := ls.attempt(now, "192.0.2.7", "viewer"); !ok {
		t.Fatal("first attempt refused")
	}
	if _, ok := ls.attempt(now, "192.0.2.7", "Pharmacie Saint-Étienne"); ok {
		t.Fatal("the address's second attempt passed, burst 1")
	}
	if a, u := ls.len(); a != 1 || u != 1 {
		t.Fatalf("%d address and %d user buckets after a refused address, want 1 and 1", a, u)
	}
	if _, ok := ls.attempt(now, "192.0.2.8", "viewer"); ok {
		t.Fatal("the user's second attempt passed, burst 1")
	}
	if _, ok := ls.attempt(now, "192.0.2.8", "operator"); !ok {
		t.Fatal("a refused user name took the address's token")
	}
	// One IPv6 host owns its /64: another address in it shares the bucket.
	if _, ok := ls.attempt(now, "2001:db8:1:2::1", "inspector"); !ok {
		t.Fatal("first IPv6 attempt refused")
	}
	if _, ok := ls.attempt(now, "2001:db8:1:2:ffff::9", "approver"); ok {
		t.Fatal("another address of the same /64 got a bucket of its own")
	}
	if _, ok := ls.attempt(now, "2001:db8:1:3::1", "approver"); !ok {
		t.Fatal("another /64 was refused")
	}
}

// heapAndRSS returns the live heap (after a collection) and the process's
// resident set (/proc/self/status VmRSS), in bytes.
func heapAndRSS(t *testing.T) (heap, rss uint64) {
	t.Helper()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	heap = s[0].Value.Uint64()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return heap, kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0, 0
}

// nameBody is a login form whose user name is a trade's name repeated to
// about n bytes (whole escapes), streamed (never held whole), with CSRF
// token tok, and its length.
func nameBody(tok string, i, n int) (io.Reader, int64) {
	head := "csrf=" + tok + "&password=guess&user=" + strconv.Itoa(i)
	unit := url.QueryEscape("Müller & Söhne <Großhandel> ")
	n -= n % len(unit)
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeat(unit), int64(n))), int64(len(head) + n)
}

// repeat is an endless reader of s.
type repeatReader struct {
	s   string
	off int
}

func repeat(s string) io.Reader { return &repeatReader{s: s} }

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.off:])
		n += c
		r.off = (r.off + c) % len(r.s)
	}
	return n, nil
}

// TestRedTeamI6LoginFloodStaysFlat (I6): 200 POSTs to /login over HTTP,
// each with a different 1 MB user name and a self-made cookie/CSRF pair:
// every one is refused unread (413), the live heap and the resident set
// stay flat, and the limiters hold no bucket of any of the names. Names
// just over the length cap are refused with a clear error before any
// limiter sees them; names under it from one address are limited by the
// address first, so they leave at most its burst of buckets.
func TestRedTeamI6LoginFloodStaysFlat(t *testing.T) {
	e := startEnv(t)
	const burst = 5
	c := e.newConsole(t, func(c *Config) { c.LoginRate, c.LoginBurst = rate.Every(time.Minute), burst })
	ts := httptest.NewServer(c.Handler())
	t.Cleanup(ts.Close)
	const tok = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	post := func(body io.Reader, size int64) (int, string, error) {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/login", body)
		if err != nil {
			return 0, "", err
		}
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: loginCookie, Value: tok})
		rep, err := ts.Client().Do(req)
		if err != nil {
			return 0, "", err
		}
		defer rep.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(rep.Body, 64<<10))
		return rep.StatusCode, string(b), nil
	}

	heap0, rss0 := heapAndRSS(t)
	// Just under the 1 MB every request may carry (routes).
	const mb = 1<<20 - 1<<10
	refused, cut := 0, 0
	for i := range 200 {
		code, body, err := post(nameBody(tok, i, mb))
		switch {
		case err != nil:
			// The console answered and closed before the client finished
			// sending the megabyte it does not read.
			cut++
		case code == http.StatusRequestEntityTooLarge && strings.Contains(body, "at most"):
			refused++
		default:
			t.Fatalf("POST %d: %d\n%s", i, code, body)
		}
	}
	heap1, rss1 := heapAndRSS(t)
	t.Logf("200 × 1 MB login names: %d refused 413, %d cut off; live heap %d → %d MB, RSS %d → %d MB",
		refused, cut, heap0>>20, heap1>>20, rss0>>20, rss1>>20)
	if refused == 0 {
		t.Error("no 1 MB login was answered 413")
	}
	const bound = 64 << 20
	if heap1 > heap0+bound {
		t.Errorf("the live heap grew %d MB under the flood (bound %d MB)", (heap1-heap0)>>20, bound>>20)
	}
	if rss1 > rss0+bound {
		t.Errorf("the resident set grew %d MB under the flood (bound %d MB)", (rss1-rss0)>>20, bound>>20)
	}
	if a, u := c.limits.len(); a != 0 || u != 0 {
		t.Errorf("an unread login made %d address and %d user buckets", a, u)
	}

	for _, tc := range []struct {
		name string
		size int
		code int
		text string
	}{
		{"just over the name cap", MaxUserName + 1, http.StatusBadRequest, "User name too long"},
		{"at the name cap", MaxUserName, http.StatusUnauthorized, "Login failed"},
		{"just over the body cap", maxLoginBody, http.StatusRequestEntityTooLarge, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := "csrf=" + tok + "&password=guess&user="
			name := strings.Repeat("x", tc.size)
			code, body, err := post(strings.NewReader(head+name), int64(len(head)+tc.size))
			if err != nil || code != tc.code || !strings.Contains(body, tc.text) {
				t.Fatalf("%d %v\n%.300s", code, err, body)
			}
		})
	}

	// Names under the cap from one address: the address's bucket refuses
	// first, so the names leave no more than its burst of buckets.
	for i := range 50 {
		name := fmt.Sprintf("Pharmacie Saint-Étienne %d", i)
		form := url.Values{"csrf": {tok}, "user": {name}, "password": {"guess"}}.Encode()
		code, body, err := post(strings.NewReader(form), int64(len(form)))
		if err != nil || (code != http.StatusUnauthorized && code != http.StatusTooManyRequests) {
			t.Fatalf("name %d: %d %v\n%.300s", i, code, err, body)
		}
	}
	if a, u := c.limits.len(); a != 1 || u > burst {
		t.Errorf("50 names from one address left %d address and %d user buckets, want 1 and ≤ %d", a, u, burst)
	}
}

// consoleConns counts the server's client connections a console named
// name opened (its people's: "<name>-<user>").
func consoleConns(t *testing.T, e *env, name string) map[string]int {
	t.Helper()
	cz, err := e.srv.Server.Server.Connz(&server.ConnzOptions{Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ci := range cz.Conns {
		if user, ok := strings.CutPrefix(ci.Name, name+"-"); ok {
			out[user]++
		}
	}
	return out
}

// TestRedTeamI7SessionsBounded (I7): real logins against the server: 150
// logins of one person leave the default cap of sessions and of NATS
// connections (the oldest ends, its connection closed, its cookie logged
// out); when every session of the console is in use a person without one
// is refused (503), and someone with sessions still logs in by giving up
// their oldest.
func TestRedTeamI7SessionsBounded(t *testing.T) {
	e := startEnv(t)
	op, viewer, inspector := access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleViewer), access.DefaultPerson(access.RoleInspector)

	// 150 logins of one person under the default cap.
	const logins = 150
	perPerson := DefaultConfig().MaxSessionsPerPerson
	c150 := e.newConsole(t, func(c *Config) { c.Name = "console-i7a" })
	var clients []*client
	for i := range logins {
		cl := newClient(t, c150, "127.0.0.90")
		if w := cl.login(op, e.password(op)); w.Code != http.StatusSeeOther {
			t.Fatalf("login %d: %d\n%s", i+1, w.Code, w.Body)
		}
		clients = append(clients, cl)
		if n := c150.sessions.ofUser(op); n > perPerson {
			t.Fatalf("after login %d: %d sessions of %s, cap %d", i+1, n, op, perPerson)
		}
	}
	// Only the newest perPerson browsers are still logged in.
	for i, cl := range clients {
		w := cl.do(http.MethodGet, "/", nil)
		live := w.Code == http.StatusOK
		if want := i >= logins-perPerson; live != want {
			t.Errorf("browser %d of %d: live %v, want %v (%d)", i+1, logins, live, want, w.Code)
		}
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := consoleConns(t, e, "console-i7a"); got[op] != perPerson || len(got) != 1 {
			return fmt.Errorf("NATS connections %v after %d logins, want %d of %s", got, logins, perPerson, op)
		}
		return nil
	})

	// The cap of all sessions.
	const total = 5
	name := "console-i7b"
	perPerson = 3
	c := e.newConsole(t, func(c *Config) { c.Name, c.MaxSessionsPerPerson, c.MaxSessions = name, perPerson, total })
	for range perPerson + 2 {
		newClient(t, c, "127.0.0.91").mustLogin(op, e.password(op))
	}
	for range total - perPerson {
		newClient(t, c, "127.0.0.91").mustLogin(viewer, e.password(viewer))
	}
	if c.sessions.count() != total {
		t.Fatalf("%d sessions, want %d", c.sessions.count(), total)
	}
	for _, tc := range []struct {
		name, user string
		code       int
	}{
		{"a person without a session, all in use", inspector, http.StatusServiceUnavailable},
		{"a person with sessions gives up the oldest", viewer, http.StatusSeeOther},
		{"again, at the person's own cap", op, http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, c, "127.0.0.92")
			w := cl.login(tc.user, e.password(tc.user))
			if w.Code != tc.code {
				t.Fatalf("%d\n%s", w.Code, w.Body)
			}
			if tc.code != http.StatusSeeOther && !strings.Contains(w.Body.String(), "too many open sessions") {
				t.Errorf("no reason given:\n%s", w.Body)
			}
			if n := c.sessions.count(); n > total {
				t.Errorf("%d sessions, bound %d", n, total)
			}
		})
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		got := consoleConns(t, e, name)
		sum := 0
		for _, n := range got {
			sum += n
		}
		if sum != c.sessions.count() || got[inspector] != 0 {
			return fmt.Errorf("NATS connections %v, %d sessions", got, c.sessions.count())
		}
		return nil
	})
}
