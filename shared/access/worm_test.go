package access_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

const seeded = 3 // records the quarantiner appends before each test

// TestWORMRefusedWithNATSGo: with every non-admin user's credentials, the
// operations that remove quarantine records are refused by the server's
// permissions, and QUARANTINE is unchanged afterwards.
func TestWORMRefusedWithNATSGo(t *testing.T) {
	t.Parallel()
	e := startEnv(t, seeded)
	q := subjects.QuarantineStream
	cases := []struct {
		name    string
		subject string // the API subject the server must refuse
		op      func(t *testing.T, v *violations, js jetstream.JetStream) error
	}{
		{"stream delete", "$JS.API.STREAM.DELETE." + q, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			return js.DeleteStream(v.ctx(t), q)
		}},
		{"purge", "$JS.API.STREAM.PURGE." + q, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			s, err := js.Stream(testCtx(t, 5*time.Second), q)
			if err != nil {
				t.Fatalf("stream info must stay readable: %v", err)
			}
			return s.Purge(v.ctx(t))
		}},
		{"message delete", "$JS.API.STREAM.MSG.DELETE." + q, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			s, err := js.Stream(testCtx(t, 5*time.Second), q)
			if err != nil {
				t.Fatalf("stream info must stay readable: %v", err)
			}
			return s.DeleteMsg(v.ctx(t), 1)
		}},
		{"update lowering MaxAge", "$JS.API.STREAM.UPDATE." + q, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			cfg := e.info(t, q).Config
			cfg.MaxAge = time.Second
			_, err := js.UpdateStream(v.ctx(t), cfg)
			return err
		}},
		{"update clearing DenyDelete", "$JS.API.STREAM.UPDATE." + q, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			cfg := e.info(t, q).Config
			cfg.DenyDelete = false
			_, err := js.UpdateStream(v.ctx(t), cfg)
			return err
		}},
		{"re-create", "$JS.API.STREAM.CREATE." + q, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			cfg := e.info(t, q).Config
			cfg.MaxAge = time.Second
			_, err := js.CreateStream(v.ctx(t), cfg)
			return err
		}},
		{"LEDGER delete", "$JS.API.STREAM.DELETE." + subjects.LedgerStream, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			return js.DeleteStream(v.ctx(t), subjects.LedgerStream)
		}},
		{"AUDIT update lowering MaxAge", "$JS.API.STREAM.UPDATE." + subjects.AuditStream, func(t *testing.T, v *violations, js jetstream.JetStream) error {
			cfg := e.info(t, subjects.AuditStream).Config
			cfg.MaxAge = time.Second
			_, err := js.UpdateStream(v.ctx(t), cfg)
			return err
		}},
	}
	for _, user := range nonAdmins() {
		t.Run(user, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					v := newViolations()
					js := e.js(t, e.conn(t, user, v))
					if err := tc.op(t, v, js); err == nil {
						t.Fatalf("%s as %s succeeded", tc.name, user)
					}
					v.saw(t, tc.subject)
					e.assertQuarantineIntact(t, seeded)
				})
			}
		})
	}
}

// TestWORMRefusedWithCLI: the same refusals through the real nats CLI
// (v0.5.0). Refusal is asserted by the exit status and the record count,
// not by the message text alone.
func TestWORMRefusedWithCLI(t *testing.T) {
	t.Parallel()
	e := startEnv(t, seeded)
	q := subjects.QuarantineStream
	cases := []struct {
		name string
		args []string
	}{
		{"stream rm", []string{"stream", "rm", q, "-f"}},
		{"stream purge", []string{"stream", "purge", q, "-f"}},
		{"stream rmm", []string{"stream", "rmm", q, "1", "-f"}},
		{"edit max-age", []string{"stream", "edit", q, "--max-age", "1s", "-f"}},
		{"edit no-deny-delete", []string{"stream", "edit", q, "--no-deny-delete", "-f"}},
	}
	for _, user := range nonAdmins() {
		t.Run(user, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					out, err := e.cliRefused(t, user, tc.args...)
					var exit *exec.ExitError
					if !errors.As(err, &exit) {
						t.Fatalf("nats %s as %s: want a non-zero exit, got %v\n%s", strings.Join(tc.args, " "), user, err, out)
					}
					if !strings.Contains(out, "Permissions Violation for Publish to \"$JS.API.STREAM.") {
						t.Errorf("the CLI did not report the permission violation")
					}
					e.assertQuarantineIntact(t, seeded)
					if t.Failed() {
						t.Logf("CLI output:\n%s", out)
					}
				})
			}
		})
	}
	// That the same CLI commands succeed as the admin (so the refusals are
	// the permissions' doing) is shown on a throwaway stream in
	// TestAdminBreakGlass.
}

// TestOnlyQuarantinerPublishesQuarantine: every user but the quarantiner
// (and the admin) is refused a publish to quarantine.>, both as a
// JetStream publish (no ack) and as a core publish (nothing stored).
func TestOnlyQuarantinerPublishesQuarantine(t *testing.T) {
	t.Parallel()
	e := startEnv(t, seeded)
	quarantiner := e.js(t, e.conn(t, access.Quarantiner, nil))
	subj := subjects.Quarantine("pharmacy", "x")
	for _, user := range append(nonAdmins(), "") {
		if user == access.Quarantiner {
			continue
		}
		name := user
		if name == "" {
			name = "no-credentials"
		}
		t.Run(name, func(t *testing.T) {
			v := newViolations()
			nc := e.conn(t, user, v)
			js := e.js(t, nc)
			before := e.info(t, subjects.QuarantineStream).State

			if _, err := js.Publish(v.ctx(t), subj, []byte(`{"forged":true}`)); err == nil {
				t.Fatalf("JetStream publish to %s as %q acknowledged", subj, user)
			}
			v.saw(t, subj)

			core := "quarantine.pharmacy.core"
			if err := nc.Publish(core, []byte(`{"forged":true}`)); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil { // the server has processed the publish
				t.Fatal(err)
			}
			v.saw(t, core)
			// A barrier: the quarantiner's record must be the very next one.
			ack, err := quarantiner.Publish(testCtx(t, 5*time.Second), subjects.Quarantine("pharmacy", "barrier-"+name), []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if ack.Sequence != before.LastSeq+1 {
				t.Errorf("barrier stored at %d, want %d: something was stored in between", ack.Sequence, before.LastSeq+1)
			}
			if n := e.info(t, subjects.QuarantineStream).State.Msgs; n != before.Msgs+1 {
				t.Errorf("QUARANTINE has %d records, want %d", n, before.Msgs+1)
			}
		})
	}
}

// TestAdminBreakGlass: the admin can update a stream (on a throwaway stream,
// never QUARANTINE), with nats.go and with the CLI.
func TestAdminBreakGlass(t *testing.T) {
	t.Parallel()
	e := startEnv(t, 0)
	ctx := testCtx(t, 10*time.Second)
	cfg := jetstream.StreamConfig{Name: "SCRATCH", Subjects: []string{"scratch.>"}, Storage: jetstream.MemoryStorage, DenyDelete: true, DenyPurge: true}
	if _, err := e.admin.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.MaxAge = time.Hour // lowering the retention: what a WORM store must refuse others
	s, err := e.admin.UpdateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("admin update: %v", err)
	}
	if got := s.CachedInfo().Config; got.MaxAge != time.Hour {
		t.Fatalf("admin update not applied: %+v", got)
	}
	if out, err := e.cli(t, access.Admin, "stream", "edit", "SCRATCH", "--max-age", "30m", "-f"); err != nil {
		t.Fatalf("admin CLI edit: %v\n%s", err, out)
	}
	if got := e.info(t, "SCRATCH").Config.MaxAge; got != 30*time.Minute {
		t.Fatalf("admin CLI edit not applied: max age %v", got)
	}
	if out, err := e.cli(t, access.Admin, "stream", "rm", "SCRATCH", "-f"); err != nil {
		t.Fatalf("admin CLI rm: %v\n%s", err, out)
	}
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		_, err := e.admin.Stream(ctx, "SCRATCH")
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		return errors.New("SCRATCH still exists")
	})
}

// TestNoAuthClientCLI: a connection without credentials is the client: it
// can publish an event (stored in EVENTS) but not delete EVENTS.
func TestNoAuthClientCLI(t *testing.T) {
	t.Parallel()
	e := startEnv(t, 0)
	if out, err := e.cli(t, "", "pub", "events.x.y", `{"hello":"world"}`); err != nil {
		t.Fatalf("nats pub: %v\n%s", err, out)
	}
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if n := e.info(t, subjects.EventsStream).State.Msgs; n != 1 {
			return errors.New("event not stored")
		}
		return nil
	})
	out, err := e.cliRefused(t, "", "stream", "rm", subjects.EventsStream, "-f")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("nats stream rm EVENTS: want a non-zero exit, got %v\n%s", err, out)
	}
	if n := e.info(t, subjects.EventsStream).State.Msgs; n != 1 {
		t.Fatalf("EVENTS has %d messages after the refused rm, want 1", n)
	}
}
