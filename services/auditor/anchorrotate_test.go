package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestNewStoreOnPurpose is issue #40's O4: a store begun again beside the
// anchors of an earlier one is refused with why and the two ways out
// (never "retry"); after `deadletter anchors rotate` (the earlier export
// file moved aside under anchor.RotatedName) the next auditor writes the
// new store's checkpoints and names the earlier file in AUDIT, once.
func TestNewStoreOnPurpose(t *testing.T) {
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
	earlier, err := os.ReadFile(cfg.ExportFile)
	if err != nil {
		t.Fatal(err)
	}
	e.recreate(t, true) // `rm -rf data`: the streams begin again, empty

	b := e.startAuditor(t, cfg, nil)
	_, err = b.Export(t.Context(), api.ExportRequest{})
	if !errors.Is(err, ErrBehindAnchor) {
		t.Fatalf("export of a new store beside earlier anchors: %v, want ErrBehindAnchor", err)
	}
	for _, want := range []string{"deadletter anchors rotate", "restore", cfg.ExportFile} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "retry") {
		t.Errorf("the refusal %q says retry: retrying never helps", err)
	}
	b.stop()

	rotatedAt := time.Date(2026, 12, 7, 19, 30, 0, 0, time.UTC)
	moved := anchor.RotatedName(cfg.ExportFile, rotatedAt)
	if err := os.Rename(cfg.ExportFile, moved); err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // a second start names the rotation no second time
		c := e.startAuditor(t, cfg, nil)
		if _, err := c.Checkpoint(t.Context()); err != nil {
			t.Fatalf("round %d: checkpoint of the new store after the rotation: %v", round, err)
		}
		c.stop()
	}
	subj := subjects.AuditAction("anchors", rotatedAt.Format("20060102T150405Z"))
	info, err := e.js.Stream(context.Background(), subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := info.GetLastMsgForSubject(context.Background(), subj)
	if err != nil {
		t.Fatalf("AUDIT does not name the rotated anchors on %s: %v", subj, err)
	}
	var act api.AuditAction
	var rf anchor.RotatedFile
	if err := json.Unmarshal(m.Data, &act); err != nil || json.Unmarshal(act.Detail, &rf) != nil {
		t.Fatalf("unreadable rotation record %q: %v", m.Data, err)
	}
	if act.Action != anchor.ActionAnchorsRotated || rf.Path != moved || rf.TreeSize != uint64(len(rs)) || rf.SHA256 == "" {
		t.Errorf("rotation record %+v / %+v, want %s of %d records", act, rf, moved, len(rs))
	}
	st, err := info.Info(context.Background(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	if n := st.State.Subjects[subj]; n != 1 {
		t.Errorf("%d rotation records for one rotation, want 1", n)
	}
	if b, _ := os.ReadFile(moved); string(b) != string(earlier) {
		t.Errorf("the moved anchors changed")
	}
}
