package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// syncBuffer is a bytes.Buffer the stack writes its banner into while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// runForBanner runs a stack on dataDir and anchorDir until its banner is
// written, and returns the banner, the stack and its stop.
func runForBanner(t *testing.T, dataDir, anchorDir string) (string, *Stack, func()) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = dataDir, anchorDir
	cfg.Port = -1
	cfg.PasswordCost = access.MinBcryptCost
	cfg.MetricsAddr, cfg.ConsoleAddr = "", ""
	out := &syncBuffer{}
	cfg.Out = out
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := natstest.Run(t, "stack", s.Run)
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(out.String(), "Press Ctrl-C") {
			return errors.New("no banner yet")
		}
		return nil
	})
	return out.String(), s, stop
}

// TestNewStoreBesideAnchors (issue 40, O4): a store begun empty beside the
// anchors of an earlier store says so in its banner, with the two ways
// out; a store's restart beside its own anchors, and a first start, say
// nothing of it.
func TestNewStoreBesideAnchors(t *testing.T) {
	earlier := api.ExportedCheckpoint{AuditSeq: 7, Checkpoint: api.Checkpoint{
		Version: api.CheckpointVersionMerkle, LastSeq: 41, Count: 41, TreeSize: 41,
		MerkleRoot: strings.Repeat("ab", 32), At: time.Date(2026, 11, 30, 8, 15, 0, 0, time.UTC),
	}}
	line, err := json.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		anchor string // the export file's content before the start
		want   []string
	}{
		{name: "a first start", anchor: ""},
		{name: "anchors of an earlier store", anchor: string(line) + "\n",
			want: []string{"QUARANTINE 1..41", "AUDIT sequence 7", "2026-11-30 08:15Z"}},
		{name: "an earlier store's anchor this version cannot read", anchor: `{"checkpoint": "Müller & Söhne <陈伟>"}` + "\n",
			want: []string{"holds the checkpoints\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			anchors := t.TempDir()
			if tc.anchor != "" {
				if err := os.WriteFile(filepath.Join(anchors, ExportFile), []byte(tc.anchor), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			banner, _, _ := runForBanner(t, filepath.Join(t.TempDir(), "data"), anchors)
			if tc.want == nil {
				if strings.Contains(banner, "NEW STORE") {
					t.Errorf("a first start speaks of a new store:\n%s", banner)
				}
				return
			}
			for _, w := range append([]string{"NEW STORE", filepath.Join(anchors, ExportFile), "make restore",
				"deadletter anchors rotate --anchor-dir " + anchors, "moved aside and kept"}, tc.want...) {
				if !strings.Contains(banner, w) {
					t.Errorf("banner lacks %q:\n%s", w, banner)
				}
			}
		})
	}

	t.Run("a restart beside its own anchors", func(t *testing.T) {
		data, anchors := filepath.Join(t.TempDir(), "data"), t.TempDir()
		_, s, stop := runForBanner(t, data, anchors)
		// A broken event, quarantined: the shutdown's checkpoint is the anchor.
		nc, err := nats.Connect(s.srv.ClientURL(), s.Secrets().NATSOptions(access.Admin)...)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := js.Publish(ctx, "events.pharmacy.dispense", []byte(`{"transaction_id": "TX-<Müller & Söhne>",`)); err != nil {
			t.Fatal(err)
		}
		natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			st, err := js.Stream(ctx, subjects.QuarantineStream)
			if err != nil {
				return err
			}
			if st.CachedInfo().State.Msgs == 0 {
				return errors.New("nothing quarantined yet")
			}
			return nil
		})
		// An operator's checkpoint, asked until the auditor's view holds
		// the record and the anchor is written (a shutdown's checkpoint
		// covers only what the view applied by then).
		op, err := nats.Connect(s.srv.ClientURL(), s.Secrets().NATSOptions(access.DefaultPerson(access.RoleOperator))...)
		if err != nil {
			t.Fatal(err)
		}
		defer op.Close()
		natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if _, err := endpoint.Call[api.CheckpointRequest, api.CheckpointReply](ctx, op, api.AuditCheckpoint, api.CheckpointRequest{}); err != nil {
				return err
			}
			if b, err := os.ReadFile(filepath.Join(anchors, ExportFile)); err != nil || len(bytes.TrimSpace(b)) == 0 {
				return fmt.Errorf("no anchor written yet (%v)", err)
			}
			return nil
		})
		stop()
		if banner, _, _ := runForBanner(t, data, anchors); strings.Contains(banner, "NEW STORE") {
			t.Errorf("a restart speaks of a new store:\n%s", banner)
		}
	})
}
