package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// process is the all-in-one binary running under test.
type process struct {
	cmd     *exec.Cmd
	url     string
	dataDir string
	mu      sync.Mutex
	stdout  strings.Builder
	stderr  strings.Builder
	exited  chan error
}

// startStack runs the binary `make run` runs, on a free port and a temp
// store, and waits for its banner.
func startStack(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	port := tools.FreePort(t)
	p := &process{url: fmt.Sprintf("nats://127.0.0.1:%d", port), exited: make(chan error, 1)}
	dir := t.TempDir()
	p.dataDir = filepath.Join(dir, "data")
	args = append([]string{"run", "--port", strconv.Itoa(port), "--data-dir", p.dataDir, "--anchor-dir", filepath.Join(dir, "anchors"),
		"--sync-always=false", "--metrics-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0"}, args...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = tools.Root(t)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stderr.Write(b)
	})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), "Press Ctrl-C to stop") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, out)
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
	})
	select {
	case <-ready:
	case err := <-p.exited:
		t.Fatalf("deadletter exited early: %v\nstderr:\n%s", err, p.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("deadletter did not start\nstderr:\n%s", p.logs())
	}
	return p
}

func (p *process) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *process) banner() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// interrupt sends SIGINT and waits for a clean exit.
func (p *process) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("deadletter exited with %v after SIGINT\nstderr:\n%s", err, p.logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("deadletter did not stop after SIGINT\nstderr:\n%s", p.logs())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestMakeRun: the all-in-one starts; every example of its banner works
// as printed with the real nats CLI (through the natscli contexts it
// writes, one per person); the valid event is committed and the broken one
// quarantined; a connection without credentials is refused; and it shuts
// down cleanly on SIGINT.
func TestMakeRun(t *testing.T) {
	natsCLI := tools.NATS(t)
	bin := tools.GoBuild(t, "./services/deadletter/cmd/deadletter", t.TempDir())
	p := startStack(t, bin)
	var examples []string
	for _, line := range strings.Split(p.banner(), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "nats --context ") {
			examples = append(examples, l)
		}
	}
	if b := p.banner(); !strings.Contains(b, p.url) || len(examples) < 6 {
		t.Fatalf("banner lacks the NATS URL or examples:\n%s", b)
	}
	// The console's URL, as printed, serves its login page.
	m := regexp.MustCompile(`Console: +(http://localhost:\d+/) +\(log in as ([^;]+);`).FindStringSubmatch(p.banner())
	if m == nil || !strings.Contains(m[2], access.DefaultPerson(access.RoleOperator)) || strings.Contains(m[2], "publisher") {
		t.Fatalf("banner lacks the console's URL and its people:\n%s", p.banner())
	}
	if resp, err := http.Get(m[1] + "login"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("console login page at %s: %v %v", m[1], resp, err)
	} else {
		_ = resp.Body.Close()
	}
	for _, ex := range examples {
		cmd := exec.Command("bash", "-c", natsCLI+ex[len("nats"):])
		cmd.Dir = tools.Root(t)
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "nats: error") {
			t.Errorf("%s: %v\n%s", ex, err, out)
		}
		if strings.Contains(ex, "micro ls") {
			for _, svc := range []string{"validator", "quarantiner", "redriver", "auditor"} {
				if !strings.Contains(string(out), svc) {
					t.Errorf("nats micro ls does not list the %s:\n%s", svc, out)
				}
			}
		}
	}
	if _, err := exec.Command(natsCLI, "--no-context", "--server", p.url, "pub", "events.pharmacy.dispense", "{}").CombinedOutput(); err == nil {
		t.Errorf("a publish without credentials was accepted")
	}

	// The stores, read as the break-glass admin.
	sec, err := access.LoadOrCreate(filepath.Join(p.dataDir, stack.CredentialsFile), access.DefaultPeople())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(p.url, sec.NATSOptions(access.Admin)...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	count := func(stream string) (uint64, error) {
		s, err := js.Stream(context.Background(), stream)
		if err != nil {
			return 0, err
		}
		info, err := s.Info(context.Background())
		if err != nil {
			return 0, err
		}
		return info.State.Msgs, nil
	}
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		l, err := count(subjects.LedgerStream)
		if err != nil || l != 1 {
			return fmt.Errorf("LEDGER holds %d (%v)", l, err)
		}
		q, err := count(subjects.QuarantineStream)
		if err != nil || q != 1 {
			return fmt.Errorf("QUARANTINE holds %d (%v)", q, err)
		}
		return nil
	})
	nc.Close()
	p.interrupt(t)
	logs := p.logs()
	for _, want := range []string{"validator stopped", "quarantiner stopped", "DLQ_QUARANTINED", "nats server stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("shutdown log lacks %q:\n%s", want, logs)
		}
	}
	for _, svc := range []string{"validator stopped", "quarantiner stopped"} {
		if strings.Index(logs, svc) > strings.Index(logs, "nats server stopped") {
			t.Errorf("server stopped before %q:\n%s", svc, logs)
		}
	}
}
