package auditor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestOwnAnchorByDefault is issue 32's operator story: records are
// written and a checkpoint exported to the auditor's anchor file (outside
// the store); the store then loses records, streams or everything; a
// restarted auditor reports it at start (log, metric) and a plain verify,
// given no anchor, reports it too, and no checkpoint is written over the
// loss.
func TestOwnAnchorByDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, e *env, rs []record.Record)
		kinds  []string // problems of the start check and of plain verify; none: whole
	}{
		{
			name:   "untouched",
			damage: func(*testing.T, *env, []record.Record) {},
		},
		{
			name: "QUARANTINE and AUDIT directories deleted from the stopped server's store",
			damage: func(t *testing.T, e *env, _ []record.Record) {
				e.srv.Stop()
				for _, name := range []string{subjects.QuarantineStream, subjects.AuditStream} {
					dir := filepath.Join(e.srv.StoreDir, "jetstream", "$G", "streams", name)
					if _, err := os.Stat(dir); err != nil {
						t.Fatalf("the store has no %s: %v", dir, err)
					}
					if err := os.RemoveAll(dir); err != nil {
						t.Fatal(err)
					}
				}
				e.srv.Restart()
				natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
					_, err := e.js.AccountInfo(context.Background())
					return err
				})
				e.srv.Provision(t, streams.DefaultOptions()) // the restarted stack provisions them again, empty
			},
			kinds: []string{api.ProblemStoreMissing},
		},
		{
			name:   "streams deleted with the admin credential and provisioned again",
			damage: func(t *testing.T, e *env, _ []record.Record) { e.recreate(t, true) },
			kinds:  []string{api.ProblemStoreMissing},
		},
		{
			name: "the last records lost, AUDIT kept",
			damage: func(t *testing.T, e *env, rs []record.Record) {
				ctx := context.Background()
				if err := e.js.DeleteStream(ctx, subjects.QuarantineStream); err != nil {
					t.Fatal(err)
				}
				if _, err := e.js.CreateStream(ctx, streams.Quarantine(streams.DefaultOptions())); err != nil {
					t.Fatal(err)
				}
				for _, r := range rs[:len(rs)-2] {
					e.publish(t, r)
				}
			},
			kinds: []string{api.ProblemAnchorShort},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			rs := anchorFixture(t)
			for _, r := range rs {
				e.publish(t, r)
			}
			cfg, _ := signedConfig(t, t.TempDir())
			a := e.startAuditor(t, cfg, nil)
			if _, err := a.Checkpoint(t.Context()); err != nil {
				t.Fatal(err)
			}
			a.stop()
			exported := lastLine(t, cfg.ExportFile)
			tc.damage(t, e, rs)

			b := e.startAuditor(t, cfg, nil)
			whole := len(tc.kinds) == 0
			if got, want := testutil.ToFloat64(b.metrics.behindAnchor), map[bool]float64{true: 0, false: 1}[whole]; got != want {
				t.Errorf("deadletter_audit_behind_anchor after start %v, want %v; logs:\n%s", got, want, b.logs.String())
			}
			for _, k := range tc.kinds {
				if !logged(b.logs.String(), `"msg":"AUDIT_BEHIND_ANCHOR"`, `"when":"start","problem":"`+k+`"`) {
					t.Errorf("no AUDIT_BEHIND_ANCHOR %s at start; logs:\n%s", k, b.logs.String())
				}
			}
			var rep api.VerifyReply
			request(t, e.nc, "audit.verify", api.VerifyRequest{}, &rep) // plain: no anchor, no key
			if rep.OK != whole {
				t.Errorf("plain verify OK %v, want %v (%+v)", rep.OK, whole, rep.Problems)
			}
			if rep.Anchor == nil || !rep.Anchor.Own || rep.Anchor.TreeSize != uint64(len(rs)) || rep.Anchor.Matched != whole {
				t.Errorf("plain verify's anchor %+v, want the own anchor of %d records, matched %v", rep.Anchor, len(rs), whole)
			}
			kinds := problemKinds(rep.Problems)
			for _, k := range tc.kinds {
				if kinds[k] == 0 {
					t.Errorf("plain verify: no %s problem in %+v", k, rep.Problems)
				}
			}
			// New records arrive; a checkpoint over the damaged store is
			// refused and the export file keeps naming what was lost.
			e.publish(t, first(t, fixture{id: id(900), domain: "pharmacy", class: record.ClassValidation,
				code: codes.MalformedJSON, party: "Pharmacie Saint-Étienne", firstSeen: t0, quarantined: t0}))
			_, err := b.Checkpoint(t.Context())
			switch {
			case whole && err != nil:
				t.Errorf("checkpoint over a whole store: %v", err)
			case !whole && !errors.Is(err, ErrBehindAnchor):
				t.Errorf("checkpoint over a damaged store: %v, want ErrBehindAnchor", err)
			case !whole && lastLine(t, cfg.ExportFile) != exported:
				t.Errorf("the export file got a checkpoint over the damaged store")
			}
		})
	}
}

// logged reports whether one line of logs holds every part.
func logged(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
