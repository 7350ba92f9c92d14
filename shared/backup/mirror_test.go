package backup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestBackupFromMirrors: the backup account's admin mirrors the services'
// streams; the backup user (no right in the services' account) takes a
// backup of the mirrors while records are written; restored into an empty
// server as the admin, every stream has its origin's configuration and
// records at their sequences.
func TestBackupFromMirrors(t *testing.T) {
	o := streams.DefaultOptions()
	o.QuarantineMaxAge = 10 * 365 * 24 * time.Hour // with LEGALHOLD
	srv := natstest.StartSecured(t, o)
	admin, err := jetstream.New(srv.ConnectAs(t, access.Admin))
	if err != nil {
		t.Fatal(err)
	}
	fill(t, admin, 200)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := backup.EnsureMirrors(ctx, srv.ConnectAs(t, access.BackupAdmin)); err != nil {
		t.Fatal(err)
	}
	// The mirror of EVENTS reserves no store of its own (no byte limit);
	// the origin's limit is in its metadata, for the restore.
	bnc, err := jetstream.New(srv.ConnectAs(t, access.BackupAdmin))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := bnc.Stream(ctx, subjects.EventsStream); err != nil {
		t.Fatal(err)
	} else if got := m.CachedInfo().Config.MaxBytes; got != -1 || o.EventsMaxBytes <= 0 {
		t.Errorf("the mirror of EVENTS has max bytes %d, want -1 (origin %d)", got, o.EventsMaxBytes)
	}
	// Twice: what exists stays.
	if err := backup.EnsureMirrors(ctx, srv.ConnectAs(t, access.BackupAdmin)); err != nil {
		t.Fatal(err)
	}
	fill(t, admin, 50) // after the mirrors began: they follow
	// The validator's consumer has handled the first 30 events.
	cons, err := admin.CreateOrUpdateConsumer(ctx, subjects.EventsStream, jetstream.ConsumerConfig{Durable: subjects.ValidatorConsumer, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(30)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	kp, pub := newKey(t)
	dir := filepath.Join(t.TempDir(), "backup")
	man, err := backup.Take(ctx, srv.ConnectAs(t, access.BackupUser), dir, kp, backup.Options{Mirrors: true, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range man.Parts {
		names = append(names, p.Stream)
		if p.MirrorLag != 0 {
			t.Errorf("%s taken %d behind", p.Stream, p.MirrorLag)
		}
	}
	for _, want := range access.BackupStreams() {
		if !slices.Contains(names, want) {
			t.Errorf("the backup lacks %s: %v", want, names)
		}
	}
	if man.Checkpoint == nil || man.Checkpoint.AuditSeq != 2 || man.Checkpoint.LastSeq != 50 {
		t.Fatalf("checkpoint %+v, want the newest (the second, AUDIT sequence 2)", man.Checkpoint)
	}

	dst := natstest.Start(t)
	dnc := dst.Connect(t)
	if _, err := backup.Restore(ctx, dnc, dir, pub, nil); err != nil {
		t.Fatal(err)
	}
	djs, err := jetstream.New(dnc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{subjects.QuarantineStream, subjects.EventsStream, subjects.AuditStream, subjects.LedgerStream, subjects.BucketStream(subjects.IdempotencyBucket)} {
		s, err := djs.Stream(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, err := admin.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got, want := s.CachedInfo(), p.CachedInfo()
		if got.Config.Mirror != nil || !slices.Equal(got.Config.Subjects, want.Config.Subjects) || got.Config.DenyDelete != want.Config.DenyDelete ||
			got.Config.MaxAge != want.Config.MaxAge || got.Config.MaxMsgsPerSubject != want.Config.MaxMsgsPerSubject {
			t.Errorf("%s restored as %+v, the origin is %+v", name, got.Config, want.Config)
		}
		if got.State.Msgs != want.State.Msgs || got.State.LastSeq != want.State.LastSeq {
			t.Errorf("%s restored with %d to %d, the origin holds %d to %d", name, got.State.Msgs, got.State.LastSeq, want.State.Msgs, want.State.LastSeq)
		}
	}
	// The restored validator's consumer resumes after what it had
	// handled: the 220 events after them, not the 250 again.
	rc, err := djs.Consumer(ctx, subjects.EventsStream, subjects.ValidatorConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if info := rc.CachedInfo(); info.NumPending != 220 || info.AckFloor.Stream != 30 {
		t.Errorf("restored consumer: %d pending, ack floor %d; want 220 after 30", info.NumPending, info.AckFloor.Stream)
	}
	// The restored QUARANTINE takes the next record at the next sequence.
	ack, err := djs.Publish(ctx, subjects.Quarantine("pharmacy", "pharmacy_next"), []byte(`{"party":"Pharmacie Saint-Étienne"}`))
	if err != nil || ack.Sequence != 251 {
		t.Errorf("after the restore: %+v %v, want sequence 251", ack, err)
	}
	if q, _ := djs.Stream(ctx, subjects.QuarantineStream); q != nil {
		m, err := q.GetMsg(ctx, 250)
		if err != nil || m.Subject != subjects.Quarantine("pharmacy", fmt.Sprintf("pharmacy_%06d", 49)) {
			t.Errorf("record 250: %v %v", m, err)
		}
	}
}

// TestMirrorsWriteOnce: every mirror of the backup account is write-once
// whatever its origin allows: one created by an earlier version without
// the flags is made so by the next EnsureMirrors, and then a purge (whole
// or of a subject) and a message delete by the backup account's
// break-glass admin are refused, the copy intact.
func TestMirrorsWriteOnce(t *testing.T) {
	o := streams.DefaultOptions()
	o.QuarantineMaxAge = 10 * 365 * 24 * time.Hour // with LEGALHOLD
	srv := natstest.StartSecured(t, o)
	admin, err := jetstream.New(srv.ConnectAs(t, access.Admin))
	if err != nil {
		t.Fatal(err)
	}
	fill(t, admin, 20)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	bnc := srv.ConnectAs(t, access.BackupAdmin)
	bjs, err := jetstream.New(bnc)
	if err != nil {
		t.Fatal(err)
	}
	// QUARANTINE's mirror as an earlier version made it: no deny flags.
	origin, err := admin.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	old, err := backup.MirrorConfig(origin.CachedInfo().Config)
	if err != nil {
		t.Fatal(err)
	}
	old.DenyDelete, old.DenyPurge = false, false
	if _, err := bjs.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := backup.EnsureMirrors(ctx, bnc); err != nil {
		t.Fatal(err)
	}
	for _, name := range access.BackupStreams() {
		t.Run(name, func(t *testing.T) {
			m, err := bjs.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if c := m.CachedInfo().Config; !c.DenyDelete || !c.DenyPurge || c.AllowRollup {
				t.Fatalf("the mirror of %s: deny delete %t, deny purge %t, allow rollup %t", name, c.DenyDelete, c.DenyPurge, c.AllowRollup)
			}
			var before uint64
			natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
				o, err := admin.Stream(ctx, name)
				if err != nil {
					return err
				}
				oi, err := o.Info(ctx)
				if err != nil {
					return err
				}
				mi, err := m.Info(ctx)
				if err != nil {
					return err
				}
				if mi.State.Msgs != oi.State.Msgs {
					return fmt.Errorf("the mirror holds %d of %d", mi.State.Msgs, oi.State.Msgs)
				}
				before = mi.State.Msgs
				return nil
			})
			attacks := []struct {
				name string
				do   func() error
			}{
				{"purge", func() error { return m.Purge(ctx) }},
				{"purge a subject", func() error { return m.Purge(ctx, jetstream.WithPurgeSubject(">")) }},
				{"message delete", func() error { return m.DeleteMsg(ctx, max(m.CachedInfo().State.FirstSeq, 1)) }},
			}
			for _, a := range attacks {
				if err := a.do(); err == nil && before > 0 {
					t.Errorf("%s of the mirror of %s accepted", a.name, name)
				}
				mi, err := m.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if mi.State.Msgs != before {
					t.Errorf("after %s the mirror of %s holds %d, had %d", a.name, name, mi.State.Msgs, before)
				}
			}
		})
	}
}
