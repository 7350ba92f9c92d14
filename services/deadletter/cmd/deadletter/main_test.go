package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// commandEnv makes the test binary the deadletter command (its main) with
// the arguments in the variable, separated by newlines.
const commandEnv = "DEADLETTER_CMD_ARGS"

// runCommand runs the deadletter command with args in dir, as its own
// process (the test binary through commandEnv), without the DEADLETTER_*
// and OTEL_* variables of the test's environment, and returns its exit
// code and output.
func runCommand(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DEADLETTER_") && !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+dir, commandEnv+"="+strings.Join(args, "\n"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			code = exit.ExitCode()
		default:
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("deadletter %q still running after 30 s (a server started?)\nstdout:\n%s\nstderr:\n%s", args, o.String(), e.String())
	}
	return code, o.String(), e.String()
}

// TestCommandLineNeverSurprises (issue 40, O3): a server starts only with
// `deadletter run`; help, -h, no command, an unknown word, a flag before
// the command and a bad flag print the usage (listing the commands, or
// run's flags), exit as the table says and leave the directory empty.
func TestCommandLineNeverSurprises(t *testing.T) {
	commands := []string{"run", "demo", "people", "anchors", "kit", "cluster", "downstream", "help"}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // each must appear on standard output
		stderr []string // each must appear on standard error
		lists  bool     // the output lists every command
	}{
		{name: "no command", args: nil, code: exitUsage, stderr: []string{"no command", "deadletter run"}, lists: true},
		{name: "help", args: []string{"help"}, code: 0, stdout: []string{"usage: deadletter COMMAND"}, lists: true},
		{name: "-h", args: []string{"-h"}, code: 0, stdout: []string{"usage: deadletter COMMAND"}, lists: true},
		{name: "--help", args: []string{"--help"}, code: 0, stdout: []string{"usage: deadletter COMMAND"}, lists: true},
		{name: "a stray word", args: []string{"halp"}, code: exitUsage, stderr: []string{`unknown command "halp"`}, lists: true},
		{name: "a word as the trade writes it", args: []string{"Müller & Söhne <陈伟>"}, code: exitUsage, stderr: []string{`unknown command "Müller & Söhne <陈伟>"`}, lists: true},
		{name: "a flag of run before the command", args: []string{"--data-dir", "store"}, code: exitUsage, stderr: []string{"flags follow the command (deadletter run --data-dir store)"}, lists: true},
		{name: "the old --demo", args: []string{"--demo"}, code: exitUsage, stderr: []string{"deadletter run --demo"}, lists: true},
		{name: "run -h", args: []string{"run", "-h"}, code: 0, stderr: []string{"Usage of deadletter run", "-data-dir", "-anchor-dir", "-demo"}},
		{name: "run with an unknown flag", args: []string{"run", "--data-dri", "store"}, code: exitUsage, stderr: []string{"flag provided but not defined: -data-dri", "-data-dir"}},
		{name: "run with a stray word", args: []string{"run", "now"}, code: exitUsage, stderr: []string{`unexpected "now"`}},
		{name: "run with a bad port", args: []string{"run", "--port", "42x"}, code: exitUsage, stderr: []string{"invalid value"}},
		{name: "run with a bad log level", args: []string{"run", "--log-level", "loud"}, code: exitFailed, stderr: []string{"loud"}},
		{name: "demo with a stray word", args: []string{"demo", "please"}, code: exitUsage, stderr: []string{"deadletter demo", `unexpected "please"`}},
		{name: "people without an action", args: []string{"people"}, code: exitFailed, stderr: []string{"usage: deadletter people"}},
		{name: "people ls before make run", args: []string{"people", "ls"}, code: exitFailed, stderr: []string{"no credentials in data"}},
		{name: "anchors without an action", args: []string{"anchors"}, code: exitFailed, stderr: []string{"usage: deadletter anchors rotate"}},
		{name: "anchors rotate without anchors", args: []string{"anchors", "rotate"}, code: exitFailed, stderr: []string{"no checkpoints to rotate"}},
		{name: "downstream with an unknown flag", args: []string{"downstream", "--prot", "8080"}, code: exitFailed, stderr: []string{"-prot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			code, stdout, stderr := runCommand(t, dir, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("standard output lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("standard error lacks %q:\n%s", w, stderr)
				}
			}
			if tc.lists {
				for _, c := range commands {
					if !strings.Contains(stdout+stderr, "\n  "+c+" ") {
						t.Errorf("the usage does not list %s:\n%s%s", c, stdout, stderr)
					}
				}
			}
			var left []string
			_ = filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
				if path != dir {
					left = append(left, path)
				}
				return err
			})
			if len(left) > 0 {
				t.Errorf("deadletter %q wrote %q", tc.args, left)
			}
		})
	}
}
