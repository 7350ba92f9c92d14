package auditor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestRestoreProvesItself: a backup restored into an empty server is
// verified against the backup's own checkpoint and, without being asked,
// against the newest checkpoint the auditor exported since: a restore from
// an older backup reports exactly the records written after it as missing,
// never INTACT; a restore of the newest is whole. The restored streams
// keep their WORM settings.
func TestRestoreProvesItself(t *testing.T) {
	e := newEnv(t)
	rs := anchorFixture(t)
	for _, r := range rs {
		e.publish(t, r)
	}
	cfg, pub := signedConfig(t, t.TempDir())
	a := e.startAuditor(t, cfg, nil)
	if _, err := a.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	kp, err := export.LoadSigningKey(cfg.SigningKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	older := filepath.Join(t.TempDir(), "older")
	if _, err := backup.Take(t.Context(), e.nc, older, kp, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	// More records after the older backup, covered by a newer exported
	// checkpoint (the anchor outside the store).
	var later []uint64
	for i := range 3 {
		f := fixture{id: id(500 + i), domain: "pharmacy", class: record.ClassValidation, code: codes.MalformedJSON,
			party: "Müller & Söhne <Großhandel>", firstSeen: t0, quarantined: t0.Add(time.Hour)}
		later = append(later, e.publish(t, first(t, f)))
	}
	if _, err := a.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(t.TempDir(), "newer")
	if _, err := backup.Take(t.Context(), e.nc, newer, kp, backup.Options{}); err != nil {
		t.Fatal(err)
	}
	a.stop()

	for _, tc := range []struct {
		name        string
		dir         string
		whole       bool
		missingFrom uint64
		missingTo   uint64
	}{
		{name: "the older backup", dir: older, missingFrom: later[0], missingTo: later[len(later)-1]},
		{name: "the newest backup", dir: newer, whole: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t) // empty
			nc := srv.Connect(t, nats.Timeout(30*time.Second))
			if _, err := backup.Restore(t.Context(), nc, tc.dir, pub, nil); err != nil {
				t.Fatal(err)
			}
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			f := &env{srv: srv, nc: nc, js: js}
			for _, name := range []string{subjects.QuarantineStream, subjects.AuditStream} {
				s, err := js.Stream(t.Context(), name)
				if err != nil {
					t.Fatal(err)
				}
				if c := s.CachedInfo().Config; !c.DenyDelete || !c.DenyPurge || c.AllowRollup {
					t.Errorf("%s restored without its WORM settings: %+v", name, c)
				}
			}
			r := f.startAuditor(t, cfg, nil) // the same anchor file: the newest checkpoint exported
			if got, want := testutil.ToFloat64(r.metrics.behindAnchor), map[bool]float64{true: 0, false: 1}[tc.whole]; got != want {
				t.Errorf("deadletter_audit_behind_anchor after start %v, want %v", got, want)
			}
			// Against the backup's own checkpoint: whole.
			line, err := os.ReadFile(filepath.Join(tc.dir, backup.CheckpointFile))
			if err != nil {
				t.Fatal(err)
			}
			var own api.VerifyReply
			request(t, nc, "audit.verify", api.VerifyRequest{Anchor: string(line), PubKey: pub}, &own)
			if !own.OK || own.Anchor == nil || !own.Anchor.Matched {
				t.Errorf("verify against the backup's checkpoint: %+v", own)
			}
			// Plain: against the newest exported checkpoint.
			var plain api.VerifyReply
			request(t, nc, "audit.verify", api.VerifyRequest{}, &plain)
			if plain.OK != tc.whole {
				t.Fatalf("plain verify OK %v, want %v: %+v", plain.OK, tc.whole, plain.Problems)
			}
			if tc.whole {
				return
			}
			found := false
			for _, p := range plain.Problems {
				if p.Kind == api.ProblemAnchorShort {
					found = true
					if p.FromSeq != tc.missingFrom || p.ToSeq != tc.missingTo {
						t.Errorf("missing sequences %d..%d, want %d..%d (%s)", p.FromSeq, p.ToSeq, tc.missingFrom, tc.missingTo, p.Detail)
					}
				}
			}
			if !found {
				t.Errorf("no %s problem: %+v", api.ProblemAnchorShort, plain.Problems)
			}
		})
	}
}
