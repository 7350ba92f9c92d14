package main_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
)

// update rewrites the golden files: go test ./services/dlqctl/ -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// binary is the dlqctl built once for every test.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "dlqctl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "dlqctl")
	build := exec.Command("go", "build", "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build dlqctl: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the repository root (for schemas/testdata).
func repoRoot(tb testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("cannot locate the test source")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// testdata returns the path of a file of schemas/testdata.
func testdata(tb testing.TB, rel string) string {
	return filepath.Join(repoRoot(tb), "schemas", "testdata", rel)
}

// downstream is a system of record that answers 503 while down.
type downstream struct {
	*httptest.Server
	down atomic.Bool
}

func newDownstream(tb testing.TB) *downstream {
	d := &downstream{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if d.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(d.Close)
	return d
}

// env is a running stack that the dlqctl binary is pointed at, as one of
// its people (the natscli context files the stack writes).
type env struct {
	s   *stack.Stack
	url string
	dir string
	// anchorDir holds the auditor's signing key (auditKey).
	anchorDir string
	nc        *nats.Conn // a viewer's connection for polling
}

// stackOptions adjust a test stack.
type stackOptions struct {
	downstream string
	redriveCap int
	// dataDir and anchorDir, when set, are the stack's (a restored store,
	// the anchors of another stack); default new temporary directories.
	dataDir, anchorDir string
}

// startStack runs the all-in-one stack in-process (a free port, a
// temporary store, fast retries) until cleanup. The stack runs every
// service, the redriver included, on the generated accounts.
func startStack(tb testing.TB, o stackOptions) *env {
	tb.Helper()
	cfg := stack.DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = cmp.Or(o.dataDir, tb.TempDir()), cmp.Or(o.anchorDir, tb.TempDir())
	cfg.Port = -1
	cfg.PasswordCost = access.MinBcryptCost // the server checks passwords under the race detector
	cfg.SyncAlways = false
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.Validator.MaxDeliver = 2
	cfg.Validator.BackoffBase, cfg.Validator.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	cfg.Validator.AckWait = 2 * time.Second
	cfg.Validator.DownstreamTimeout = time.Second
	cfg.Validator.ClaimLease = 2 * time.Second
	cfg.Validator.Workers = 32
	cfg.Validator.DownstreamURL = o.downstream
	cfg.Quarantiner.AckWait = 2 * time.Second
	cfg.Quarantiner.RetryDelay = 100 * time.Millisecond
	cfg.Quarantiner.TerminatedGrace = 200 * time.Millisecond
	if o.redriveCap > 0 {
		cfg.Quarantiner.RedriveCap = o.redriveCap
	}
	cfg.Redriver.OutcomeTimeout = 15 * time.Second
	cfg.Redriver.DrainLease = 2 * time.Second
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	s, err := stack.New(cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	stop := natstest.Run(tb, "stack", s.Run)
	select {
	case <-s.Ready():
	case <-time.After(30 * time.Second):
		stop()
		tb.Fatal("stack not ready after 30s")
	}
	e := &env{s: s, url: s.ClientURL(), dir: cfg.DataDir, anchorDir: cfg.AnchorDir}
	e.nc, err = s.ConnectAs(access.DefaultPerson(access.RoleViewer), nats.Timeout(30*time.Second)) // bcrypt, on a loaded machine
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.nc.Close)
	return e
}

// context is the natscli context file of a person of the stack.
func (e *env) context(person string) string { return e.s.ContextFile(person) }

// password returns a stack user's password, from the credentials file.
func (e *env) password(tb testing.TB, user string) string {
	tb.Helper()
	creds, err := access.LoadOrCreate(filepath.Join(e.dir, stack.CredentialsFile), access.DefaultPeople())
	if err != nil {
		tb.Fatal(err)
	}
	sec, ok := creds.Users[user]
	if !ok || sec.Password == "" {
		tb.Fatalf("no password for %s", user)
	}
	return sec.Password
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// command builds a dlqctl command that connects with the natscli context
// file ctx (NATS_CONTEXT; "" for none: no server URL, no credentials).
func command(ctx string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	envv := []string{"HOME=" + os.TempDir(), "PATH=" + os.Getenv("PATH")}
	if ctx != "" {
		envv = append(envv, "NATS_CONTEXT="+ctx)
	}
	cmd.Env = envv
	return cmd
}

// dlqctl runs the binary with the context file ctx ("" for none) and
// stdin, and returns its outputs and status.
func dlqctl(tb testing.TB, ctx, stdin string, args ...string) result {
	tb.Helper()
	cmd := command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		tb.Fatalf("dlqctl %v: %v", args, err)
	}
	return r
}

// roleFor is the person a command line runs as by default: the publisher
// for publish, else the operator.
func roleFor(args []string) string {
	if slices.Contains(args, "publish") {
		return string(access.RolePublisher)
	}
	return access.DefaultPerson(access.RoleOperator)
}

// run runs dlqctl as its default person (roleFor).
func (e *env) dlqctl(tb testing.TB, stdin string, args ...string) result {
	tb.Helper()
	return dlqctl(tb, e.context(roleFor(args)), stdin, args...)
}

// ok runs dlqctl as its default person (roleFor) and fails unless it
// exits 0.
func (e *env) ok(tb testing.TB, args ...string) result {
	tb.Helper()
	return e.okAs(tb, roleFor(args), args...)
}

// okAs runs dlqctl as person and fails unless it exits 0.
func (e *env) okAs(tb testing.TB, person string, args ...string) result {
	tb.Helper()
	r := dlqctl(tb, e.context(person), "", args...)
	if r.code != 0 {
		tb.Fatalf("dlqctl %v as %s: %s", args, person, r)
	}
	return r
}

// jsonOfAs runs dlqctl -o json as person and decodes its stdout into out.
func (e *env) jsonOfAs(tb testing.TB, person string, out any, args ...string) {
	tb.Helper()
	r := e.okAs(tb, person, append([]string{"-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
		tb.Fatalf("dlqctl %v: %v\n%s", args, err, r.stdout)
	}
}

// jsonOf runs dlqctl -o json and decodes its stdout into out.
func (e *env) jsonOf(tb testing.TB, out any, args ...string) {
	tb.Helper()
	r := e.ok(tb, append([]string{"-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
		tb.Fatalf("dlqctl %v: stdout is not JSON: %v\n%s", args, err, r.stdout)
	}
}

// list returns the quarantined events matching a ListRequest.
func (e *env) list(tb testing.TB, req api.ListRequest) api.ListReply {
	tb.Helper()
	b, _ := json.Marshal(req)
	m, err := e.nc.Request(api.AuditList, b, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	var rep api.ListReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		tb.Fatalf("audit.list: %v: %s", err, m.Data)
	}
	return rep
}

// waitQuarantined polls until n events match req.
func (e *env) waitQuarantined(tb testing.TB, req api.ListRequest, n int) api.ListReply {
	tb.Helper()
	var rep api.ListReply
	natstest.CheckFor(tb, 20*time.Second, 20*time.Millisecond, func() error {
		rep = e.list(tb, req)
		if rep.Total != n {
			return fmt.Errorf("%d quarantined, want %d", rep.Total, n)
		}
		return nil
	})
	return rep
}

// Normalization of table output for golden files: values that change from
// run to run are replaced by placeholders of the same width, so the
// columns stay aligned as printed.
var (
	timeRe = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	hashRe = regexp.MustCompile(`\b[0-9a-f]{12}\b`)
	ageRe  = regexp.MustCompile(` {0,4}\b\d{1,4}[smhd]\b`)
)

func normalize(s string, ages bool) string {
	s = timeRe.ReplaceAllString(s, "YYYY-MM-DDThh:mm:ssZ")
	s = hashRe.ReplaceAllString(s, "<hash------>")
	if ages {
		s = ageRe.ReplaceAllStringFunc(s, func(m string) string {
			return strings.Repeat(" ", max(0, len(m)-3)) + "AGE"
		})
	}
	return s
}

// golden compares got with testdata/<name>.golden (rewritten with -update).
func golden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		tb.Errorf("%s differs from the golden file (run with -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// writeFile writes a file in a test's temporary directory.
func writeFile(tb testing.TB, dir, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// The named people of the stack the tests act as (access.DefaultPeople).
var (
	viewerUser    = access.DefaultPerson(access.RoleViewer)
	operatorUser  = access.DefaultPerson(access.RoleOperator)
	approverUser  = access.DefaultPerson(access.RoleApprover)
	inspectorUser = access.DefaultPerson(access.RoleInspector)
	policyUser    = access.DefaultPerson(access.RolePolicy)
)
