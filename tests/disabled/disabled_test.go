// Package disabled checks what a disabled person hears (issue #40, O7):
// dlqctl and the console say "this person is disabled" to the person
// with their own password, and nothing new to anyone else.
package disabled

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/dlqctl/cli"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/natstest"
)

// startStack runs a stack with its console on free ports and a temporary
// store.
func startStack(t *testing.T) (*stack.Stack, string) {
	t.Helper()
	cfg := stack.DefaultConfig()
	dir := t.TempDir()
	cfg.DataDir, cfg.AnchorDir = filepath.Join(dir, "data"), filepath.Join(dir, "anchors")
	cfg.Port, cfg.SyncAlways, cfg.MetricsAddr, cfg.ConsoleAddr = -1, false, "", "127.0.0.1:0"
	cfg.PasswordCost = access.MinBcryptCost
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	st, err := stack.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-st.Ready():
	case err := <-done:
		t.Fatalf("stack exited: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("stack not ready after 90 s")
	}
	return st, cfg.DataDir
}

// dlqctl runs dlqctl in-process with the context file ctxFile and
// returns its exit status, stdout and stderr.
func dlqctl(ctxFile string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	args = append([]string{"--context", ctxFile, "--timeout", "10s"}, args...)
	code := cli.ExecuteContext(context.Background(), args, cli.IO{Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// copyContext copies person's context file (what the person keeps on
// their own machine), with the password replaced when password is set.
func copyContext(t *testing.T, st *stack.Stack, person, password string) string {
	t.Helper()
	b, err := os.ReadFile(st.ContextFile(person))
	if err != nil {
		t.Fatal(err)
	}
	if password != "" {
		var c map[string]any
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		c["password"] = password
		if b, err = json.Marshal(c); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), person+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleLogin posts the console's login form as user with password and
// returns the status and the page.
func consoleLogin(t *testing.T, base, user, password string) (int, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 60 * time.Second}
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfRe.FindSubmatch(page)
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "dl_login" {
			cookie = ck
		}
	}
	if m == nil || cookie == nil {
		t.Fatalf("the login page (%s, status %d) has no CSRF token (cookie %v):\n%.1000s", base, resp.StatusCode, cookie, page)
	}
	form := url.Values{"csrf": {string(m[1])}, "user": {user}, "password": {password}}
	req, err := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, string(page)
}

// TestDisabledPersonIsToldSo (issue #40, O7): Jonas, disabled by what
// `deadletter people disable` writes, runs dlqctl with the context he
// kept and logs in to the console with his password: both say "this
// person is disabled". A wrong password for him, a name nobody has and
// an enabled person refused an endpoint of another role hear what they
// heard before, and nothing of Jonas.
func TestDisabledPersonIsToldSo(t *testing.T) {
	st, dataDir := startStack(t)
	jonas, priya := access.DefaultPersonsOf(access.RoleOperator)[1], access.DefaultPerson(access.RoleViewer)
	kept := copyContext(t, st, jonas, "")
	wrong := copyContext(t, st, jonas, strings.Repeat("0", 48))
	var jonasPassword string
	func() {
		path := filepath.Join(dataDir, stack.CredentialsFile)
		unlock, err := access.LockFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		sec, err := access.LoadOrCreate(path, access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
		if err != nil {
			t.Fatal(err)
		}
		jonasPassword = sec.Users[jonas].Password
		if _, err := sec.SetDisabled(jonas, true, "admin"); err != nil {
			t.Fatal(err)
		}
		if err := sec.Save(path); err != nil {
			t.Fatal(err)
		}
	}()
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if _, err := os.Stat(st.ContextFile(jonas)); !errors.Is(err, os.ErrNotExist) {
			return errors.New("the stack has not applied the change yet")
		}
		return nil
	})
	nobody := copyContext(t, st, priya, "")
	func() {
		b, _ := os.ReadFile(nobody)
		b = bytes.Replace(b, []byte(`"`+priya+`"`), []byte(`"müller.söhne"`), 1)
		if err := os.WriteFile(nobody, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}()

	t.Run("dlqctl", func(t *testing.T) {
		for _, tc := range []struct {
			name, ctx string
			args      []string
			// want is in stderr; code in the JSON error.
			want, code string
		}{
			{name: "disabled Jonas with his context", ctx: kept, args: []string{"hold", "list"}, want: "this person is disabled", code: "PERSON_DISABLED"},
			{name: "disabled Jonas asking for a drain", ctx: kept, args: []string{"drain", "cancel", "drain-20261207T203000-müller"}, want: "this person is disabled", code: "PERSON_DISABLED"},
			{name: "Jonas with a wrong password", ctx: wrong, args: []string{"hold", "list"}, want: "needs credentials", code: "CONNECT"},
			{name: "a name nobody has", ctx: nobody, args: []string{"hold", "list"}, want: "needs credentials", code: "CONNECT"},
			{name: "enabled Priya (viewer) cancelling a drain", ctx: copyContext(t, st, priya, ""), args: []string{"drain", "cancel", "drain-20261207T203000-müller"}, want: "permission denied", code: "PERMISSION"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, _, stderr := dlqctl(tc.ctx, tc.args...)
				if code == cli.ExitOK || !strings.Contains(stderr, tc.want) {
					t.Fatalf("exit %d, stderr %q; want %q", code, stderr, tc.want)
				}
				if tc.code != "PERSON_DISABLED" && strings.Contains(strings.ToLower(stderr), "disabled") {
					t.Errorf("someone other than Jonas with his password hears of a disabled person: %q", stderr)
				}
				_, _, stdout := dlqctl(tc.ctx, append([]string{"--output", "json"}, tc.args...)...)
				var e struct {
					Error struct{ Code, Message string } `json:"error"`
				}
				if err := json.Unmarshal([]byte(stdout), &e); err != nil || e.Error.Code != tc.code {
					t.Errorf("JSON %q (%v), want code %s", stdout, err, tc.code)
				}
			})
		}
	})

	t.Run("console", func(t *testing.T) {
		base := strings.TrimSuffix(strings.Replace(st.Console.URL(), "://localhost:", "://127.0.0.1:", 1), "/")
		for _, tc := range []struct {
			name, user, password string
			status               int
			want                 string
		}{
			{name: "disabled Jonas with his password", user: jonas, password: jonasPassword, status: http.StatusForbidden, want: "This person is disabled"},
			{name: "Jonas with a wrong password", user: jonas, password: strings.Repeat("0", 48), status: http.StatusUnauthorized, want: "Login failed."},
			{name: "a name nobody has", user: "Müller & Söhne <陈伟>", password: jonasPassword, status: http.StatusUnauthorized, want: "Login failed."},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, page := consoleLogin(t, base, tc.user, tc.password)
				if status != tc.status || !strings.Contains(page, tc.want) {
					t.Fatalf("status %d, page without %q:\n%.2000s", status, tc.want, page)
				}
				if tc.status != http.StatusForbidden && strings.Contains(strings.ToLower(page), "disabled") {
					t.Error("the refusal speaks of a disabled person")
				}
			})
		}
	})
}
