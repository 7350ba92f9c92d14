package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/natstest"
)

// dlqctlEnv runs the binary as with dlqctl, with extra environment.
func dlqctlEnv(tb testing.TB, ctx string, env []string, args ...string) result {
	tb.Helper()
	cmd := command(ctx, args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee interface{ ExitCode() int }
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		tb.Fatalf("dlqctl %v: %v", args, err)
	}
	return r
}

// TestKeyInitAndSign (issue #38): a person creates a personal signing key
// (encrypted with a passphrase: the file does not open without it),
// dlqctl prints its registration; a decision is refused without the key
// (naming dlqctl key init) or with a wrong passphrase, and is signed with
// it; registered by the administrator, the key is in AUDIT and what it
// signs passes the registry's check.
func TestKeyInitAndSign(t *testing.T) {
	e := startStack(t, stackOptions{})
	amara := access.DefaultPerson(access.RoleOperator)
	ctxFile := e.context(amara)
	keyPath := filepath.Join(t.TempDir(), "schlüssel <amara> & co.key")
	pass := `Müller & Söhne <Großhandel> "geheim" 陈伟`
	withPass := []string{"DEADLETTER_KEY_PASSPHRASE=" + pass}
	idRE := regexp.MustCompile(`--ed25519 ([A-Za-z0-9_-]{43})`)
	var keyID string
	steps := []struct {
		name   string
		env    []string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "no passphrase off a terminal", args: []string{"--key", keyPath, "key", "init"}, code: 2, stderr: "DEADLETTER_KEY_PASSPHRASE"},
		{name: "a short passphrase", env: []string{"DEADLETTER_KEY_PASSPHRASE=kurz"}, args: []string{"--key", keyPath, "key", "init"}, code: 2, stderr: "at least 8"},
		{name: "init", env: withPass, args: []string{"--key", keyPath, "key", "init"}, stdout: "deadletter people key add " + amara + " --ed25519 "},
		{name: "init again", env: withPass, args: []string{"--key", keyPath, "key", "init"}, code: 1, stderr: "has a key already"},
		{name: "show", args: []string{"--key", keyPath, "key", "show"}, stdout: "deadletter people key add " + amara + " --ed25519 "},
		{name: "a decision without a key", env: withPass, args: []string{"--key", keyPath + ".none", "hold", "lift", "hold-x", "--case", "DEA-<17> & Söhne", "--reason", "Fall abgeschlossen"},
			code: 1, stderr: "dlqctl key init"},
		{name: "a decision with a wrong passphrase", env: []string{"DEADLETTER_KEY_PASSPHRASE=Müller & Söhne"}, args: []string{"--key", keyPath, "hold", "lift", "hold-x", "--case", "DEA-<17>", "--reason", "Fall abgeschlossen"},
			code: 1, stderr: "passphrase does not open"},
		{name: "a decision signed (the hold does not exist)", env: withPass, args: []string{"--key", keyPath, "hold", "lift", "hold-x", "--case", "DEA-<17>", "--reason", "Fall abgeschlossen „陈伟“"},
			code: 1, stderr: "SIGNING"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := dlqctlEnv(t, ctxFile, st.env, st.args...)
			if r.code != st.code || !strings.Contains(r.stdout, st.stdout) || !strings.Contains(r.stderr, st.stderr) {
				t.Fatalf("want exit %d, stdout with %q, stderr with %q; got %s", st.code, st.stdout, st.stderr, r)
			}
			if m := idRE.FindStringSubmatch(r.stdout); m != nil {
				if keyID != "" && keyID != m[1] {
					t.Fatalf("key id %s, before %s", m[1], keyID)
				}
				keyID = m[1]
			}
			if strings.Contains(r.stderr, "SIGNING") && (!strings.Contains(r.stderr, keyID) || !strings.Contains(r.stderr, "lift hold-x") || !strings.Contains(r.stderr, amara+" (operator)")) {
				t.Fatalf("what is signed is not shown:\n%s", r.stderr)
			}
		})
	}
	kf, err := decision.ReadKeyFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kf.Open([]byte("Müller & Söhne")); !errors.Is(err, decision.ErrPassphrase) {
		t.Fatalf("the key opened without its passphrase: %v", err)
	}
	start := time.Now()
	priv, err := kf.Open([]byte(pass))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("key opened (scrypt N=%d) in %s", kf.N, time.Since(start))

	// The administrator registers it; the running server writes it to AUDIT.
	key, err := decision.Ed25519Key(keyID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.dir, stack.CredentialsFile)
	func() {
		unlock, err := access.LockFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		sec, err := access.LoadOrCreate(path, access.DefaultPeople())
		if err != nil {
			t.Fatal(err)
		}
		if err := sec.AddKey(amara, key, "admin"); err != nil {
			t.Fatal(err)
		}
		if err := sec.Save(path); err != nil {
			t.Fatal(err)
		}
	}()
	nc, err := e.s.ConnectAs(access.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := decision.NewRegistry(js)
	sd := decision.SignEd25519(priv, decision.ForHold(api.HoldLiftRequest{ID: "hold-x", CaseID: "DEA-<17>", Reason: "Fall abgeschlossen"}, amara, "operator", time.Now()))
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		if err := reg.Check(ctx, sd); err != nil {
			return fmt.Errorf("a decision signed with the registered key: %w", err)
		}
		return nil
	})
	if _, err := os.Stat(e.s.KeyFile(amara)); err != nil {
		t.Fatalf("make run's example key of %s: %v", amara, err)
	}
}
