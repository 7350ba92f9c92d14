package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// Binaries are the programs a chaos run starts: the four services, the
// administrator's provision command, and nats-server, all built from this
// workspace (nats-server from the module version it pins).
type Binaries map[string]string

// binaryPackages are the packages of the programs, by name.
var binaryPackages = map[string]string{
	"validator":   "./services/validator/cmd/validator",
	"quarantiner": "./services/quarantiner/cmd/quarantiner",
	"redriver":    "./services/redriver/cmd/redriver",
	"auditor":     "./services/auditor/cmd/auditor",
	"provision":   "./services/deadletter/cmd/provision",
	"nats-server": "github.com/nats-io/nats-server/v2",
}

// Build builds every program into dir with one go build per program, from
// the workspace at root, with the build tag failpoint: the chaos suite
// arms failpoints (Options.Failpoint) in these binaries.
func Build(ctx context.Context, root, dir string) (Binaries, error) {
	return build(ctx, root, dir, "failpoint")
}

// build builds every program into dir with the build tags tags ("": none).
func build(ctx context.Context, root, dir, tags string) (Binaries, error) {
	out := Binaries{}
	for name, pkg := range binaryPackages {
		path := filepath.Join(dir, name)
		args := []string{"build", "-o", path}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("chaos: build %s: %v\n%s", name, err, b)
		}
		out[name] = path
	}
	return out, nil
}

// Root returns the workspace root, located from this package's source.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// BuildTemp makes a new temporary directory whose name starts with prefix,
// builds every program of the workspace into its bin/ as in production
// (no failpoints), and returns them, the directory (for the runs' stores
// and logs) and the function that removes it: a benchmark's set-up.
func BuildTemp(ctx context.Context, prefix string) (Binaries, string, func(), error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, "", nil, err
	}
	bins, err := build(ctx, Root(), filepath.Join(dir, "bin"), "")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", nil, err
	}
	return bins, dir, func() { _ = os.RemoveAll(dir) }, nil
}

// proc is a program the harness starts, kills and starts again. Its output
// goes to a log file of its own.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	// once is added to env on the first start only (an armed failpoint:
	// the supervisor's restart runs without it).
	once []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	runs int
}

// start starts the program (again).
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "---- start %d at %s\n", p.runs+1, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	if p.runs == 0 {
		cmd.Env = append(cmd.Env, p.once...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	benchenv.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	p.runs++
	return nil
}

// signal sends sig and, with wait, waits for the program to exit (killing
// it after a grace period if sig was a polite one).
func (p *proc) signal(sig syscall.Signal, wait bool) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if !wait {
		return
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// stop stops the program politely (SIGTERM) and waits.
func (p *proc) stop() { p.signal(syscall.SIGTERM, true) }

// running reports whether the program is running.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// tail returns the last n bytes of the program's log.
func (p *proc) tail(n int64) string {
	f, err := os.Open(p.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// waitListening waits until p accepts connections on port.
func waitListening(ctx context.Context, p *proc, port int) error {
	for {
		if !p.running() {
			return fmt.Errorf("chaos: %s exited", p.name)
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
