package streams_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// subjectIn returns a concrete subject matching filter.
func subjectIn(filter string) string {
	return strings.ReplaceAll(strings.ReplaceAll(filter, ">", "müller.söhne"), "*", "x")
}

// TestEvidenceIsWriteOnce: stores provisioned by an earlier layout (no
// deny flags, rollups allowed where the server lets a stream be created
// so, buckets as CreateKeyValue makes them) are made write-once by the
// next provisioning, and then every rollup (all, sub), purge and message
// delete is refused by the server, the data still there; a bucket's Put,
// Create, Update and Delete keep working.
func TestEvidenceIsWriteOnce(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	o := streams.DefaultOptions()
	o.QuarantineMaxAge = 7 * 365 * 24 * time.Hour // LEGALHOLD too
	var evidence []jetstream.StreamConfig
	for _, cfg := range append([]jetstream.StreamConfig{streams.Replays(o), streams.Events(o), streams.Ledger(o), streams.Failures(o),
		streams.Advisories(o), streams.Documents(o), streams.Requests(o)}, streams.WORMStreams(o)...) {
		evidence = append(evidence, cfg)
		old := cfg
		old.DenyDelete, old.DenyPurge, old.AllowRollup = false, false, true
		if _, err := js.CreateStream(ctx, old); err != nil {
			t.Fatalf("%s of an earlier layout: %v", cfg.Name, err)
		}
	}
	buckets := []jetstream.KeyValueConfig{streams.Idempotency(o), streams.Attempts(o), streams.Drains(o), streams.Approvals(o), streams.Holds(o)}
	for _, b := range buckets {
		if _, err := js.CreateKeyValue(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	// A second provisioning changes nothing and finds nothing to refuse.
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatal(err)
	}

	type target struct{ stream, subject string }
	var targets []target
	for _, cfg := range evidence {
		targets = append(targets, target{cfg.Name, subjectIn(cfg.Subjects[0])})
	}
	for _, b := range buckets {
		targets = append(targets, target{subjects.BucketStream(b.Bucket), "$KV." + b.Bucket + ".müller-söhne"})
	}
	for _, tg := range targets {
		s, err := js.Stream(ctx, tg.stream)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; !c.DenyDelete || !c.DenyPurge || c.AllowRollup {
			t.Errorf("%s is not write-once after provisioning: deny delete %t, deny purge %t, allow rollup %t", tg.stream, c.DenyDelete,
				c.DenyPurge, c.AllowRollup)
		}
	}
	for _, tg := range targets {
		t.Run(tg.stream, func(t *testing.T) {
			ack, err := js.Publish(ctx, tg.subject, []byte(`{"party":"Müller & Söhne <Großhandel>","by":"陈伟"}`))
			if err != nil {
				t.Fatal(err)
			}
			s, err := js.Stream(ctx, tg.stream)
			if err != nil {
				t.Fatal(err)
			}
			attacks := []struct {
				name string
				do   func() error
			}{
				{"Nats-Rollup: all", func() error { return rollup(ctx, js, tg.subject, "all") }},
				{"Nats-Rollup: sub", func() error { return rollup(ctx, js, tg.subject, "sub") }},
				{"purge", func() error { return s.Purge(ctx) }},
				{"purge the subject", func() error { return s.Purge(ctx, jetstream.WithPurgeSubject(tg.subject)) }},
				{"message delete", func() error { return s.DeleteMsg(ctx, ack.Sequence) }},
				{"secure delete", func() error { return s.SecureDeleteMsg(ctx, ack.Sequence) }},
			}
			for _, a := range attacks {
				if err := a.do(); err == nil {
					t.Errorf("%s on %s accepted", a.name, tg.stream)
				}
				if m, err := s.GetMsg(ctx, ack.Sequence); err != nil || m.Subject != tg.subject {
					t.Fatalf("after %s the message is gone: %v", a.name, err)
				}
			}
		})
	}
	// The buckets still work as buckets.
	kv, err := js.KeyValue(ctx, subjects.HoldsBucket)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Create(ctx, "HOLD-1", []byte("placed"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "HOLD-1", []byte("lifted"), rev); err != nil {
		t.Errorf("update: %v", err)
	}
	if _, err := kv.Put(ctx, "HOLD-2", []byte("placed")); err != nil {
		t.Errorf("put: %v", err)
	}
	if err := kv.Delete(ctx, "HOLD-2"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := kv.Purge(ctx, "HOLD-1"); err == nil {
		t.Error("a purge of a key was accepted")
	}
	if e, err := kv.Get(ctx, "HOLD-1"); err != nil || string(e.Value()) != "lifted" {
		t.Errorf("HOLD-1 after the refused purge: %v", err)
	}
}

// rollup publishes a rollup message of kind on subject.
func rollup(ctx context.Context, js jetstream.JetStream, subject, kind string) error {
	m := nats.NewMsg(subject)
	m.Header.Set(jetstream.MsgRollup, kind)
	m.Data = []byte("{}")
	_, err := js.PublishMsg(ctx, m)
	return err
}

// TestMigrateDocuments: the documents of an earlier version's DOCUMENTS
// object store are copied into the DOCUMENTS stream by provisioning, once;
// an object whose bytes do not hash to its name is not.
func TestMigrateDocuments(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: streams.LegacyDocumentsBucket})
	if err != nil {
		t.Fatal(err)
	}
	good := document(400_000)
	if _, err := obs.PutBytes(ctx, name(good), good); err != nil {
		t.Fatal(err)
	}
	forged := name([]byte("the original"))
	if _, err := obs.PutBytes(ctx, forged, []byte("quantity 900 <Müller & Söhne>")); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "not-a-sha", good[:10]); err != nil {
		t.Fatal(err)
	}
	o := streams.DefaultOptions()
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	got, err := streams.MigrateDocuments(ctx, js)
	if err != nil || got != (streams.Migrated{Kept: 1, Refused: 2}) {
		t.Errorf("a second migration: %+v, %v", got, err)
	}
	r, err := streams.OpenDocument(ctx, js, name(good))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || !bytes.Equal(b, good) {
		t.Errorf("the migrated document: %d bytes, %v", len(b), err)
	}
	if _, err := streams.DocumentInfo(ctx, js, forged); !errors.Is(err, streams.ErrDocumentNotFound) {
		t.Errorf("the forged object: %v, want not found", err)
	}
}
