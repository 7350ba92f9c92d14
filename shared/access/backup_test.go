package access_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// backupAttack is one row of the backup user's red-team table: a publish
// or a subscription its permissions refuse, or a snapshot (which it may
// take) aimed at a subject outside its inbox, which must reach nothing.
type backupAttack struct {
	name               string
	publish, subscribe string
	body               any
	// snapshotTo is the deliver subject of a snapshot of QUARANTINE's
	// mirror: allowed by the permissions, contained by the account.
	snapshotTo string
}

// backupAttacks returns the table. A new attempt is one row.
func backupAttacks() []backupAttack {
	var rows []backupAttack
	add := func(a backupAttack) { rows = append(rows, a) }
	prefix := access.BackupAPIPrefix
	// Reaching into the services' account through the mirrors' imports.
	add(backupAttack{name: "push consumer on the services' QUARANTINE through the import, delivering to LEDGER",
		publish: prefix + ".CONSUMER.CREATE." + subjects.QuarantineStream,
		body: map[string]any{"stream_name": subjects.QuarantineStream, "config": map[string]any{
			"name": "evil", "deliver_subject": "ledger.pharmacy.forged", "ack_policy": "none"}}})
	add(backupAttack{name: "the services' stream info through the import", publish: prefix + ".STREAM.INFO." + subjects.QuarantineStream})
	add(backupAttack{name: "forged flow-control reply into the services' account", publish: "$JS.FC." + subjects.QuarantineStream + ".x.1.1"})
	add(backupAttack{name: "publish on a mirror's deliver subject", publish: access.BackupDeliverPrefix(subjects.QuarantineStream) + ".x.M"})
	// Its own account's mirrors: no change, no other read.
	for _, s := range []string{subjects.QuarantineStream, subjects.LedgerStream, subjects.AuditStream, subjects.BucketStream(subjects.IdempotencyBucket)} {
		for _, op := range []string{"UPDATE", "DELETE", "PURGE", "MSG.DELETE", "CREATE", "RESTORE"} {
			add(backupAttack{name: op + " the mirror " + s, publish: "$JS.API.STREAM." + op + "." + s, body: map[string]any{"name": s, "seq": 1}})
		}
		add(backupAttack{name: "push consumer on the mirror " + s, publish: "$JS.API.CONSUMER.CREATE." + s + ".evil",
			body: map[string]any{"stream_name": s, "config": map[string]any{"name": "evil", "deliver_subject": "_INBOX.backup.x"}}})
		add(backupAttack{name: "legacy consumer create on the mirror " + s, publish: "$JS.API.CONSUMER.CREATE." + s,
			body: map[string]any{"stream_name": s, "config": map[string]any{"name": "evil"}}})
		add(backupAttack{name: "durable consumer create on the mirror " + s, publish: "$JS.API.CONSUMER.DURABLE.CREATE." + s + ".evil",
			body: map[string]any{"stream_name": s, "config": map[string]any{"durable_name": "evil"}}})
		add(backupAttack{name: "message get on the mirror " + s, publish: "$JS.API.STREAM.MSG.GET." + s, body: map[string]any{"seq": 1}})
		add(backupAttack{name: "direct get on the mirror " + s, publish: "$JS.API.DIRECT.GET." + s, body: map[string]any{"seq": 1}})
	}
	add(backupAttack{name: "direct get of a quarantined record by subject", publish: "$JS.API.DIRECT.GET." + subjects.QuarantineStream + "." + subjects.Quarantine("pharmacy", "seed0")})
	add(backupAttack{name: "direct get of the access audit by subject", publish: "$JS.API.DIRECT.GET." + subjects.AuditStream + "." + subjects.AuditAccessAll})
	add(backupAttack{name: "a stream of its own mirroring the services' QUARANTINE", publish: "$JS.API.STREAM.CREATE.EVIL",
		body: map[string]any{"name": "EVIL", "mirror": map[string]any{"name": subjects.QuarantineStream,
			"external": map[string]any{"api": prefix, "deliver": "ledger.pharmacy"}}}})
	add(backupAttack{name: "stream list", publish: "$JS.API.STREAM.LIST"})
	// Writing anything a service owns (none of it exists in its account).
	for _, s := range []string{"quarantine.pharmacy.forged", "ledger.pharmacy.forged", "events.pharmacy.dispense", subjects.AuditCheckpoints,
		"$KV." + subjects.IdempotencyBucket + ".forged", api.QuarantinerAppend} {
		add(backupAttack{name: "publish to " + s, publish: s, body: map[string]any{"kind": "quarantined", "party": "Müller & Söhne <Großhandel>"}})
	}
	// Reading anything but its own inbox.
	for _, s := range []string{">", "quarantine.>", "_INBOX.>", "_INBOX.quarantiner.>", "deadletter.backup.>", "$JS.SNAPSHOT.ACK.>", "$JS.FC.>"} {
		add(backupAttack{name: "subscribe to " + s, subscribe: s})
	}
	// Snapshots aimed elsewhere than its inbox: the subjects of the
	// services' account (which do not exist in its account), the mirrors'
	// imports (JetStream API subjects: refused as a destination), a
	// mirror's deliver subject.
	for _, target := range append(deliveryTargets(),
		prefix+".CONSUMER.CREATE."+subjects.QuarantineStream, "$JS.FC."+subjects.QuarantineStream+".x.1.1",
		access.BackupDeliverPrefix(subjects.QuarantineStream)+".x.M") {
		add(backupAttack{name: "snapshot of QUARANTINE's mirror to " + target, snapshotTo: target})
	}
	return rows
}

// state is every stream's identity and contents in one account (no
// consumers: the mirrors' own come and go).
func state(tb testing.TB, js jetstream.JetStream) string {
	tb.Helper()
	ctx := testCtx(tb, 10*time.Second)
	var all []string
	names := js.StreamNames(ctx)
	for n := range names.Name() {
		all = append(all, n)
	}
	if err := names.Err(); err != nil {
		tb.Fatal(err)
	}
	slices.Sort(all)
	var b strings.Builder
	for _, n := range all {
		s, err := js.Stream(ctx, n)
		if err != nil {
			tb.Fatal(err)
		}
		in := s.CachedInfo()
		cfg, _ := json.Marshal(in.Config)
		fmt.Fprintf(&b, "%s msgs=%d first=%d last=%d deleted=%d cfg=%x;", n, in.State.Msgs, in.State.FirstSeq, in.State.LastSeq, in.State.NumDeleted, sha256.Sum256(cfg))
	}
	return b.String()
}

// TestBackupUserContained: the backup user snapshots the backup account's
// mirrors and can do nothing else: it reads no payload through any other
// subject, writes and deletes nothing in the services' account or its
// own, and a snapshot it aims anywhere but its inbox reaches no subject of
// the services' account (a real server with the generated accounts).
func TestBackupUserContained(t *testing.T) {
	e := startEnv(t, 5)
	ctx := testCtx(t, 3*time.Minute)
	if err := backup.EnsureMirrors(ctx, e.conn(t, access.BackupAdmin, nil)); err != nil {
		t.Fatal(err)
	}
	bjs := e.js(t, e.conn(t, access.BackupAdmin, nil))
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		s, err := bjs.Stream(ctx, subjects.QuarantineStream)
		if err != nil {
			return err
		}
		if n := s.CachedInfo().State.Msgs; n != 5 {
			return fmt.Errorf("QUARANTINE's mirror holds %d of 5", n)
		}
		return nil
	})
	before, beforeBackup := state(t, e.admin), state(t, bjs)

	// What the server delivers in the services' account while the
	// attacks run: nothing may arrive on a target.
	var mu sync.Mutex
	var delivered []string
	adm := e.conn(t, access.Admin, nil)
	if _, err := adm.Subscribe(">", func(m *nats.Msg) {
		if strings.HasPrefix(m.Subject, "$JS.") || strings.HasPrefix(m.Subject, "_INBOX.") || strings.HasPrefix(m.Subject, "$SRV.") ||
			strings.HasPrefix(m.Subject, "deadletter.backup.") || strings.HasPrefix(m.Subject, "$JSC.") {
			return // the mirrors' own traffic and the test's requests
		}
		if mirrorReply(m) {
			return
		}
		mu.Lock()
		delivered = append(delivered, m.Subject+" "+string(m.Data))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Flush(); err != nil {
		t.Fatal(err)
	}

	// Interest in the backup account on every subject (its break-glass
	// user listening), so that a snapshot aimed anywhere is delivered
	// somewhere: there, and only there.
	inBackup := map[string]int{}
	if _, err := e.conn(t, access.BackupAdmin, nil).Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		inBackup[m.Subject]++
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	var accepted []string

	v := newViolations()
	nc := e.conn(t, access.BackupUser, v)
	rows := backupAttacks()
	snapshots := 0
	for _, a := range rows {
		t.Run(a.name, func(t *testing.T) {
			v.reset()
			switch {
			case a.subscribe != "":
				sub, err := nc.SubscribeSync(a.subscribe)
				if err == nil {
					_ = nc.Flush()
					defer func() { _ = sub.Unsubscribe() }()
				}
				if !v.wait(fmt.Sprintf("subscription to %q", a.subscribe)) {
					t.Errorf("subscribing to %s was not refused", a.subscribe)
				}
			case a.snapshotTo != "":
				snapshots++
				b, _ := json.Marshal(map[string]any{"deliver_subject": a.snapshotTo, "chunk_size": 1024})
				// The request is allowed; what it may do is the point.
				r, err := nc.Request("$JS.API.STREAM.SNAPSHOT."+subjects.QuarantineStream, b, refusalTimeout)
				if err != nil {
					t.Fatalf("snapshot request: %v", err)
				}
				var rep struct {
					Error *struct {
						Description string `json:"description"`
					} `json:"error"`
				}
				if json.Unmarshal(r.Data, &rep) == nil && rep.Error != nil {
					t.Logf("refused by the server: %s", rep.Error.Description)
				} else {
					accepted = append(accepted, a.snapshotTo)
				}
			default:
				m := nats.NewMsg(a.publish)
				m.Data = body(t, a.body)
				m.Reply = nc.NewRespInbox()
				if err := nc.PublishMsg(m); err != nil {
					t.Fatal(err)
				}
				if !v.wait(fmt.Sprintf("publish to %q", a.publish)) {
					t.Errorf("publishing to %s was not refused", a.publish)
				}
			}
		})
	}
	// Every snapshot the server accepted is delivered in the backup
	// account; none reached the services' account.
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(delivered) > 0 {
			t.Fatalf("a snapshot reached the services' account on %q", delivered)
		}
		for _, target := range accepted {
			if inBackup[target] == 0 {
				return fmt.Errorf("the snapshot to %s has not arrived in %s yet", target, access.BackupAccount)
			}
		}
		return nil
	})
	mu.Lock()
	if len(delivered) > 0 {
		t.Errorf("a snapshot reached the services' account on %q", delivered)
	}
	mu.Unlock()
	if after := state(t, e.admin); after != before {
		t.Errorf("the services' account changed under attack:\nbefore %s\nafter  %s", before, after)
	}
	if after := state(t, bjs); after != beforeBackup {
		t.Errorf("the backup account's mirrors changed under attack:\nbefore %s\nafter  %s", beforeBackup, after)
	}
	// No consumer on a services' stream but the mirrors' (delivering on
	// their own prefix).
	for _, s := range access.BackupStreams() {
		st, err := e.admin.Stream(ctx, s)
		if err != nil {
			continue
		}
		for c := range st.ListConsumers(ctx).Info() {
			if c.Config.DeliverSubject != "" && !strings.HasPrefix(c.Config.DeliverSubject, access.BackupDeliverPrefix(s)+".") {
				t.Errorf("%s has a consumer %s delivering to %s", s, c.Name, c.Config.DeliverSubject)
			}
		}
	}
	t.Logf("%d attempts by the backup user refused or contained (%d snapshots aimed elsewhere: %d delivered within %s only, the others refused by the server); both accounts unchanged",
		len(rows), snapshots, len(accepted), access.BackupAccount)
}

// mirrorReply reports whether m is the services' JetStream answering a
// mirror's consumer create through the backup account's import: a
// consumer delivering on the mirrors' own prefix.
func mirrorReply(m *nats.Msg) bool {
	var r struct {
		Type   string `json:"type"`
		Config struct {
			DeliverSubject string `json:"deliver_subject"`
		} `json:"config"`
		Error any `json:"error"`
	}
	return strings.HasPrefix(m.Subject, "_R_.") && json.Unmarshal(m.Data, &r) == nil && r.Error == nil &&
		r.Type == "io.nats.jetstream.api.v1.consumer_create_response" && strings.HasPrefix(r.Config.DeliverSubject, "deadletter.backup.")
}
