package backup_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// fill stores n records in QUARANTINE, n events in EVENTS and a
// checkpoint in AUDIT, as the admin, with names of the trade.
func fill(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		body := fmt.Sprintf(`{"dlq_id":"pharmacy_%06d","party":"Müller & Söhne <Großhandel> \"%d\""}`, i, i)
		if _, err := js.Publish(ctx, subjects.Quarantine("pharmacy", fmt.Sprintf("pharmacy_%06d", i)), []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "events.pharmacy.dispense", []byte(`{"pharmacy":"Pharmacie Saint-Étienne"}`)); err != nil {
			t.Fatal(err)
		}
	}
	cp, _ := json.Marshal(api.Checkpoint{Version: api.CheckpointVersionMerkle, Algorithm: api.CheckpointAlgorithm,
		LastSeq: uint64(n), Count: uint64(n), TreeSize: uint64(n), MerkleRoot: "00", At: time.Now().UTC()})
	if _, err := js.Publish(ctx, subjects.AuditCheckpoints, cp); err != nil {
		t.Fatal(err)
	}
}

func newKey(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return kp, pub
}

// TestBackupRestore takes a backup of a provisioned store, restores it
// into an empty server and compares every stream; a backup killed
// midway, or changed after it was taken, is refused.
func TestBackupRestore(t *testing.T) {
	src := natstest.Start(t)
	o := streams.DefaultOptions()
	o.QuarantineMaxAge = 10 * 365 * 24 * time.Hour // with LEGALHOLD
	src.Provision(t, o)
	nc := src.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, js, 300)
	if _, err := js.Publish(t.Context(), "legalhold.pharmacy.pharmacy_000007", []byte(`{"dlq_id":"pharmacy_000007","case":"CASE-Pharmacie Saint-Étienne"}`)); err != nil {
		t.Fatal(err)
	}
	// An EPCIS document the validator kept: records point into it.
	doc := []byte(`{"type":"EPCISDocument","epcisBody":{"eventList":[{"type":"ObjectEvent","x":"Müller & Söhne <Großhandel>"}]}}`)
	docSum := sha256.Sum256(doc)
	docName := hex.EncodeToString(docSum[:])
	if _, err := streams.PutDocument(t.Context(), js, docName, bytes.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	kp, pub := newKey(t)
	dir := filepath.Join(t.TempDir(), "backup")
	man, err := backup.Take(t.Context(), nc, dir, kp, backup.Options{ChunkSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if man.Checkpoint == nil || man.Checkpoint.LastSeq != 300 {
		t.Fatalf("manifest checkpoint %+v, want the one over 300 records", man.Checkpoint)
	}

	t.Run("restored into an empty server", func(t *testing.T) {
		dst := natstest.Start(t)
		dnc := dst.Connect(t)
		if _, err := backup.Restore(t.Context(), dnc, dir, pub, nil); err != nil {
			t.Fatal(err)
		}
		djs, err := jetstream.New(dnc)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range man.Parts {
			s, err := djs.Stream(t.Context(), p.Stream)
			if err != nil {
				t.Fatalf("%s: %v", p.Stream, err)
			}
			info := s.CachedInfo()
			if info.State.Msgs != p.Msgs || info.State.LastSeq != p.LastSeq {
				t.Errorf("%s restored with %d msgs to %d, the backup holds %d to %d", p.Stream, info.State.Msgs, info.State.LastSeq, p.Msgs, p.LastSeq)
			}
			// Every store is write-once (package streams), and restored so.
			if !info.Config.DenyDelete || !info.Config.DenyPurge || info.Config.AllowRollup {
				t.Errorf("%s restored without its WORM flags: %+v", p.Stream, info.Config)
			}
		}
		if r, err := streams.OpenDocument(t.Context(), djs, docName); err != nil {
			t.Errorf("DOCUMENTS not restored: %v", err)
		} else if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, doc) {
			t.Errorf("the document restored as %q, %v", got, err)
		}
		if lh, err := djs.Stream(t.Context(), subjects.LegalHoldStream); err != nil || lh.CachedInfo().State.Msgs != 1 || lh.CachedInfo().Config.MaxAge != 0 {
			t.Errorf("LEGALHOLD restored as %+v, %v; want its copy, kept forever", lh, err)
		}
		if q, err := djs.Stream(t.Context(), subjects.QuarantineStream); err != nil || q.CachedInfo().Config.MaxAge != o.QuarantineMaxAge {
			t.Errorf("QUARANTINE restored without its retention: %v", err)
		}
		m, err := djs.Stream(t.Context(), subjects.QuarantineStream)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.GetMsg(t.Context(), 300)
		if err != nil || string(got.Data) != `{"dlq_id":"pharmacy_000299","party":"Müller & Söhne <Großhandel> \"299\""}` {
			t.Errorf("record 300 restored as %q, %v", got.Data, err)
		}
		// A restore never overwrites: the same backup again is refused.
		if _, err := backup.Restore(t.Context(), dnc, dir, pub, nil); !errors.Is(err, backup.ErrRestore) {
			t.Errorf("a second restore over the restored streams: %v, want ErrRestore", err)
		}
	})

	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns the directory to open
		want   error
		key    string
	}{
		{name: "whole", damage: func(_ *testing.T, d string) string { return d }},
		{
			name: "killed midway: cancelled after its first part",
			damage: func(t *testing.T, _ string) string {
				d := filepath.Join(t.TempDir(), "partial")
				ctx, cancel := context.WithCancel(context.Background())
				_, err := backup.Take(ctx, nc, d, kp, backup.Options{ChunkSize: 1024, Progress: func(backup.Part) { cancel() }})
				if err == nil {
					t.Fatal("a cancelled backup reported success")
				}
				return d
			},
			want: backup.ErrIncomplete,
		},
		{
			name: "a part changed after the backup",
			damage: func(t *testing.T, d string) string {
				c := copyDir(t, d)
				f := filepath.Join(c, subjects.QuarantineStream+".snap")
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/2] ^= 1
				if err := os.WriteFile(f, b, 0o600); err != nil {
					t.Fatal(err)
				}
				return c
			},
			want: backup.ErrCorrupt,
		},
		{
			name: "a part removed",
			damage: func(t *testing.T, d string) string {
				c := copyDir(t, d)
				if err := os.Remove(filepath.Join(c, subjects.LedgerStream+".snap")); err != nil {
					t.Fatal(err)
				}
				return c
			},
			want: backup.ErrIncomplete,
		},
		{
			name:   "the manifest signed by another key",
			damage: func(_ *testing.T, d string) string { return d },
			key:    "other",
			want:   backup.ErrCorrupt,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.damage(t, dir)
			key := pub
			if tc.key != "" {
				_, key = newKey(t)
			}
			_, err := backup.Open(d, key)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("open: %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				dst := natstest.Start(t)
				if _, err := backup.Restore(t.Context(), dst.Connect(t), d, key, nil); !errors.Is(err, tc.want) {
					t.Errorf("restore: %v, want %v", err, tc.want)
				}
			}
		})
	}
}

// TestBackupWhileWriting takes a backup while records keep arriving: each
// part is a consistent snapshot and QUARANTINE's covers the checkpoint.
func TestBackupWhileWriting(t *testing.T) {
	src := natstest.Start(t)
	src.Provision(t, streams.DefaultOptions())
	nc := src.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, js, 200)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int)
	wnc := src.Connect(t)
	go func() {
		n := 0
		defer func() { done <- n }()
		for ctx.Err() == nil {
			if err := wnc.Publish("events.pharmacy.dispense", []byte(`{"pharmacy":"Pharmacie Saint-Étienne"}`)); err != nil {
				return
			}
			n++
			if n%100 == 0 {
				_ = wnc.Flush()
			}
		}
	}()
	kp, pub := newKey(t)
	dir := filepath.Join(t.TempDir(), "backup")
	man, err := backup.Take(t.Context(), nc, dir, kp, backup.Options{})
	cancel()
	written := <-done
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Open(dir, pub); err != nil {
		t.Fatal(err)
	}
	dst := natstest.Start(t)
	if _, err := backup.Restore(t.Context(), dst.Connect(t, nats.Timeout(30*time.Second)), dir, pub, nil); err != nil {
		t.Fatal(err)
	}
	if q, _ := partOf(man, subjects.QuarantineStream); man.Checkpoint == nil || q.LastSeq < man.Checkpoint.LastSeq {
		t.Errorf("QUARANTINE's part %+v does not cover the checkpoint %+v", q, man.Checkpoint)
	}
	t.Logf("%d events published during the backup", written)
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func partOf(m backup.Manifest, name string) (backup.Part, bool) {
	for _, p := range m.Parts {
		if p.Stream == name {
			return p, true
		}
	}
	return backup.Part{}, false
}
