package access_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// refusalTimeout bounds a request the server is expected to refuse: a
// permission violation drops the request, so the requester times out.
const refusalTimeout = 2 * time.Second

// env is a test server enforcing the trust boundary, provisioned by the
// admin, with records records in QUARANTINE appended by the quarantiner.
type env struct {
	srv   *natstest.Secured
	admin jetstream.JetStream
}

// startEnv starts a secured server (natstest.StartSecured), provisions the
// services' durable consumers as the admin, and seeds QUARANTINE.
func startEnv(tb testing.TB, records int) *env {
	tb.Helper()
	srv := natstest.StartSecured(tb, streams.DefaultOptions())
	e := &env{srv: srv}
	e.admin = e.js(tb, e.conn(tb, access.Admin, nil))
	ctx := testCtx(tb, 10*time.Second)
	if records > 0 {
		q := e.js(tb, e.conn(tb, access.Quarantiner, nil))
		for i := range records {
			subj := subjects.Quarantine("pharmacy", fmt.Sprintf("seed%d", i))
			if _, err := q.Publish(ctx, subj, []byte(`{"seed":true}`), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
				tb.Fatalf("seed quarantine: %v", err)
			}
		}
	}
	return e
}

// violations records the permission violations the server reports to one
// connection.
type violations struct {
	mu      sync.Mutex
	errs    []string
	once    sync.Once
	seen    chan struct{} // closed at the first violation
	changed chan struct{} // signalled at every violation
}

func newViolations() *violations {
	return &violations{seen: make(chan struct{}), changed: make(chan struct{}, 1)}
}

func (v *violations) add(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
	v.once.Do(func() { close(v.seen) })
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// reset forgets the violations seen so far.
func (v *violations) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = nil
}

// wait reports whether the server reports a permission violation whose
// text holds what (e.g. `publish to "x"`) within refusalTimeout.
func (v *violations) wait(what string) bool {
	want := strings.ToLower("Permissions Violation for " + what)
	deadline := time.NewTimer(refusalTimeout)
	defer deadline.Stop()
	for {
		v.mu.Lock()
		for _, e := range v.errs {
			if strings.Contains(strings.ToLower(e), want) {
				v.mu.Unlock()
				return true
			}
		}
		v.mu.Unlock()
		select {
		case <-v.changed:
		case <-deadline.C:
			return false
		}
	}
}

// ctx returns the context of a request the server is expected to refuse:
// it ends at the first violation reported to the connection (a refused
// request gets no answer, so there is no need to wait for a timeout), or
// after refusalTimeout.
func (v *violations) ctx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), refusalTimeout)
	tb.Cleanup(cancel)
	go func() {
		select {
		case <-v.seen:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// saw waits until the server has reported a publish permission violation on
// subject to this connection.
func (v *violations) saw(tb testing.TB, subject string) {
	tb.Helper()
	want := strings.ToLower(fmt.Sprintf("Permissions Violation for Publish to %q", subject))
	natstest.CheckFor(tb, 5*time.Second, 20*time.Millisecond, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		for _, e := range v.errs {
			if strings.Contains(strings.ToLower(e), want) {
				return nil
			}
		}
		return fmt.Errorf("no %s among %q", want, v.errs)
	})
}

// conn connects as user. When v is not nil, it collects the connection's
// permission violations.
func (e *env) conn(tb testing.TB, user string, v *violations) *nats.Conn {
	tb.Helper()
	opts := append([]nats.Option{nats.Name("access-test-" + user)}, e.srv.Secrets.NATSOptions(user)...)
	if v != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				v.add(err)
			}
		}))
	}
	return e.srv.Connect(tb, opts...)
}

// js returns a JetStream context on nc.
func (e *env) js(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// info returns a stream's info as seen by the admin.
func (e *env) info(tb testing.TB, stream string) *jetstream.StreamInfo {
	tb.Helper()
	s, err := e.admin.Stream(testCtx(tb, 5*time.Second), stream)
	if err != nil {
		tb.Fatalf("stream %s: %v", stream, err)
	}
	return s.CachedInfo()
}

// assertQuarantineIntact checks that QUARANTINE still has want records, no
// deleted ones, and its WORM configuration.
func (e *env) assertQuarantineIntact(tb testing.TB, want uint64) {
	tb.Helper()
	in := e.info(tb, subjects.QuarantineStream)
	if in.State.Msgs != want || in.State.NumDeleted != 0 || in.State.FirstSeq != 1 {
		tb.Errorf("QUARANTINE state changed: msgs %d (want %d), deleted %d, first %d", in.State.Msgs, want, in.State.NumDeleted, in.State.FirstSeq)
	}
	if c := in.Config; !c.DenyDelete || !c.DenyPurge || c.MaxAge != 0 || c.MaxMsgs != -1 {
		tb.Errorf("QUARANTINE config changed: deny delete %v, deny purge %v, max age %v, max msgs %d", c.DenyDelete, c.DenyPurge, c.MaxAge, c.MaxMsgs)
	}
}

// testCtx returns a context cancelled at cleanup or after d.
func testCtx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// natsCLI returns the pinned nats CLI (natscli v0.5.0), as
// tests/internal/tools.NATS does (that package is internal to the tests
// module): $NATS_CLI, else .cache/bin/nats, built from deploy/tools when
// missing.
func natsCLI(tb testing.TB) string {
	tb.Helper()
	cliOnce.Do(func() {
		if p := os.Getenv("NATS_CLI"); p != "" {
			cliPath, cliErr = p, nil
			if _, err := os.Stat(p); err != nil {
				cliErr = err
			}
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		cliPath = filepath.Join(root, ".cache", "bin", "nats")
		if _, err := os.Stat(cliPath); err == nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", cliPath, "github.com/nats-io/natscli/nats")
		cmd.Dir = filepath.Join(root, "deploy", "tools")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("build nats CLI: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		tb.Fatalf("nats CLI: %v", cliErr)
	}
	return cliPath
}

// cli runs the nats CLI against the env's server as user ("" for no
// credentials) with a context-free configuration, and returns its combined
// output and its error (an *exec.ExitError for a non-zero exit).
func (e *env) cli(tb testing.TB, user string, args ...string) (string, error) {
	tb.Helper()
	return e.cliTimeout(tb, 5*time.Second, user, args...)
}

// cliRefused runs a CLI command the server is expected to refuse: a refused
// request gets no answer, so the CLI waits for its (short) timeout.
func (e *env) cliRefused(tb testing.TB, user string, args ...string) (string, error) {
	tb.Helper()
	return e.cliTimeout(tb, time.Second, user, args...)
}

func (e *env) cliTimeout(tb testing.TB, timeout time.Duration, user string, args ...string) (string, error) {
	tb.Helper()
	full := []string{"--no-context", "--server", e.srv.ClientURL(), "--timeout", timeout.String()}
	if user != "" {
		sec := e.srv.Secrets.Users[user]
		if sec.Seed != "" {
			seed := filepath.Join(tb.TempDir(), "seed.nk")
			if err := os.WriteFile(seed, []byte(sec.Seed), 0o600); err != nil {
				tb.Fatal(err)
			}
			full = append(full, "--nkey", seed)
		} else {
			full = append(full, "--user", user, "--password="+sec.Password)
		}
		full = append(full, "--inbox-prefix", access.InboxPrefix(user))
	}
	full = append(full, args...)
	cmd := exec.CommandContext(testCtx(tb, 30*time.Second), natsCLI(tb), full...)
	cmd.Env = []string{"HOME=" + tb.TempDir(), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// users are every user of the default configuration: the services'
// account's and the people.
func users() []string {
	out := access.ServiceNames()
	for _, p := range access.DefaultPeople() {
		out = append(out, p.Name)
	}
	return out
}
