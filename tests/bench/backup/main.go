// Command backup measures a backup and a restore of a quarantine store
// (package backup: JetStream snapshots, a signed manifest) and the verify
// that proves the restore, by both paths in one run: it seeds n sealed
// pharmacy records (about 2.3 KB each, the layout of tests/bench/export)
// into an embedded server enforcing the access table (no fsync) whose
// backup account mirrors the services' streams (backup.EnsureMirrors,
// created before the records are written, as in a deployment),
// checkpoints them with a real auditor, then for each path (the
// break-glass admin's snapshots of the services' streams, and the backup
// user's snapshots of the backup account's mirrors) takes a backup,
// restores it into an empty server and verifies it there against the
// backup's checkpoint, printing each phase's time and the sizes.
//
// With -store it backs up an existing store instead of seeding one (the
// store a chaos run leaves: go run ./tests/chaos/cmd/chaos -phases 1 -dir
// D, then -store D/phase-1/store -signing-key D/phase-1/anchors/audit-signing.nk;
// the server runs it with new secrets: streams belong to accounts by name).
//
//	go run ./tests/bench/backup -n 100000
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func main() {
	n := flag.Int("n", 100000, "quarantine records (in chains of two)")
	flag.BoolVar(&random, "random", false, "each event body random (incompressible): the snapshot's worst case")
	flag.StringVar(&store, "store", "", "back up this existing store directory (changed: the backup account's mirrors are added) instead of seeding one")
	flag.StringVar(&signingKey, "signing-key", "", "the store's audit signing key (with -store; default a new key)")
	flag.Parse()
	if err := run(*n); err != nil {
		log.Fatal(err)
	}
}

func run(n int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "bench-backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Cheap password hashes: the bench measures backups, not logins.
	sec, err := access.NewSecrets(access.DefaultPeople(), access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		return err
	}
	text, err := access.ServerConfig(sec)
	if err != nil {
		return err
	}
	srcDir := filepath.Join(tmp, "src")
	if store != "" {
		srcDir = store
	}
	src, err := embedded.Start(embedded.Config{StoreDir: srcDir, Port: -1, ConfigText: text})
	if err != nil {
		return err
	}
	defer src.Shutdown()
	connect := func(user string) (*nats.Conn, error) {
		return nats.Connect(src.ClientURL(), append(sec.NATSOptions(user), nats.Timeout(time.Minute), nats.Name("bench-"+user))...)
	}
	nc, err := connect(access.Admin)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if store == "" {
		if err := streams.EnsureCore(ctx, js, streams.DefaultOptions()); err != nil {
			return err
		}
		if err := streams.EnsureWORM(ctx, js, streams.DefaultOptions()); err != nil {
			return err
		}
	}
	created := time.Now()
	bac, err := connect(access.BackupAdmin)
	if err != nil {
		return err
	}
	err = backup.EnsureMirrors(ctx, bac)
	bac.Close()
	if err != nil {
		return err
	}
	start := time.Now()
	key := signingKey
	if store == "" {
		size, err := seed(ctx, js, n)
		if err != nil {
			return err
		}
		fmt.Printf("seeded %d records of %d bytes in %s (the backup account's mirrors following)\n", n, size, time.Since(start).Round(time.Millisecond))
	} else {
		var total uint64
		for _, name := range backup.Parts() {
			s, err := js.Stream(ctx, name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			st := s.CachedInfo().State
			total += st.Bytes
			fmt.Printf("  %s: %d messages, %.1f MB\n", name, st.Msgs, mb(int64(st.Bytes)))
			if name == subjects.QuarantineStream {
				n = int(st.Msgs)
			}
		}
		fmt.Printf("the store %s: %d quarantine records, %.1f MB in its streams\n", store, n, mb(int64(total)))
	}
	var pub string
	if key == "" {
		key = filepath.Join(tmp, "audit.nk")
		if pub, err = auditor.NewSigningKey(key); err != nil {
			return err
		}
	} else {
		kp, err := auditor.LoadSigningKey(key)
		if err != nil {
			return err
		}
		if pub, err = kp.PublicKey(); err != nil {
			return err
		}
	}
	cfg := auditor.DefaultConfig()
	cfg.CheckpointInterval, cfg.ReconcileInterval, cfg.AllowAnonymous, cfg.SigningKeyFile = 0, 0, true, key
	a, stopA, err := startAuditor(ctx, src.ClientURL(), cfg, sec.NATSOptions(access.Admin)...)
	if err != nil {
		return err
	}
	start = time.Now()
	// The checkpoint waits at most 30 s for the live view: ask again
	// while the auditor reads a large store.
	for deadline := time.Now().Add(20 * time.Minute); ; {
		_, err := a.Checkpoint(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
	}
	fmt.Printf("checkpoint over %d records in %s\n", n, time.Since(start).Round(time.Millisecond))
	stopA()

	kp, err := auditor.LoadSigningKey(key)
	if err != nil {
		return err
	}
	qi, err := js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		return err
	}
	stored := int64(qi.CachedInfo().State.Bytes)

	// The backup user's path: its mirrors first catch up with the
	// services' streams (they followed the seeding), then Take waits for
	// each one again and snapshots it.
	bnc, err := connect(access.BackupUser)
	if err != nil {
		return err
	}
	defer bnc.Close()
	start = time.Now()
	if err := mirrorsCaughtUp(ctx, bnc, js); err != nil {
		return err
	}
	fmt.Printf("mirrors: caught up %s after the checkpoint, %s after their creation (before the records were written; with -store, on the whole store)\n",
		time.Since(start).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))

	var results []result
	for _, path := range []struct {
		name string
		nc   *nats.Conn
		o    backup.Options
	}{
		{"admin (services' streams)", nc, backup.Options{}},
		{"backup user (mirrors)", bnc, backup.Options{Mirrors: true, CatchUp: 10 * time.Minute}},
	} {
		r, err := measure(ctx, tmp, path.name, path.nc, path.o, kp, pub, cfg, n, stored)
		if err != nil {
			return fmt.Errorf("%s: %w", path.name, err)
		}
		results = append(results, r)
	}
	perM := 1e6 / float64(n)
	for _, r := range results {
		fmt.Printf("extrapolated per 1,000,000 records, %s: backup %s, restore %s, verify %s, backup size %.0f MB\n", r.path,
			time.Duration(float64(r.backup)*perM).Round(time.Second), time.Duration(float64(r.restore)*perM).Round(time.Second),
			time.Duration(float64(r.verify)*perM).Round(time.Second), mb(r.size)*perM)
	}
	return nil
}

// result is one path's figures.
type result struct {
	path                    string
	backup, restore, verify time.Duration
	size                    int64
}

// measure takes a backup on nc with o, restores it into a new, empty
// server, and verifies the restore against the backup's checkpoint.
func measure(ctx context.Context, tmp, name string, nc *nats.Conn, o backup.Options, kp backup.Signer, pub string, cfg auditor.Config, n int, stored int64) (result, error) {
	r := result{path: name}
	sub := strings.NewReplacer(" ", "-", "(", "", ")", "", "'", "").Replace(name)
	dir := filepath.Join(tmp, "backup-"+sub)
	start := time.Now()
	man, err := backup.Take(ctx, nc, dir, kp, o)
	if err != nil {
		return r, err
	}
	r.backup = time.Since(start)
	var qbytes int64
	for _, p := range man.Parts {
		r.size += p.Bytes
		if p.Stream == subjects.QuarantineStream {
			qbytes = p.Bytes
		}
		if p.MirrorLag != 0 {
			return r, fmt.Errorf("%s taken %d messages behind its origin", p.Stream, p.MirrorLag)
		}
	}
	fmt.Printf("%s: backup %s, %d parts, %.1f MB (QUARANTINE %.1f MB of %.1f MB stored), %.0f records/s\n", name,
		r.backup.Round(time.Millisecond), len(man.Parts), mb(r.size), mb(qbytes), mb(stored), float64(n)/r.backup.Seconds())

	dst, err := embedded.Start(embedded.Config{StoreDir: filepath.Join(tmp, "dst-"+sub), Port: -1})
	if err != nil {
		return r, err
	}
	defer func() {
		dst.Shutdown()
		dst.WaitForShutdown()
		_ = os.RemoveAll(filepath.Join(tmp, "dst-"+sub))
	}()
	dnc, err := nats.Connect(dst.ClientURL(), nats.Timeout(time.Minute))
	if err != nil {
		return r, err
	}
	defer dnc.Close()
	start = time.Now()
	if _, err := backup.Open(dir, pub); err != nil {
		return r, err
	}
	opened := time.Since(start)
	start = time.Now()
	if _, err := backup.Restore(ctx, dnc, dir, pub, nil); err != nil {
		return r, err
	}
	r.restore = time.Since(start)
	fmt.Printf("%s: restore: check %s, restore %s (%.0f records/s)\n", name, opened.Round(time.Millisecond), r.restore.Round(time.Millisecond), float64(n)/r.restore.Seconds())

	cfg.SigningKeyFile = ""
	b, stopB, err := startAuditor(ctx, dst.ClientURL(), cfg)
	if err != nil {
		return r, err
	}
	defer stopB()
	line, err := os.ReadFile(filepath.Join(dir, backup.CheckpointFile))
	if err != nil {
		return r, err
	}
	start = time.Now()
	rep, err := b.Verify(ctx, api.VerifyRequest{Anchor: string(line), PubKey: pub})
	if err != nil {
		return r, err
	}
	if !rep.OK {
		return r, fmt.Errorf("the restored store does not verify: %d problems, first %+v", rep.ProblemCount, rep.Problems[0])
	}
	r.verify = time.Since(start)
	fmt.Printf("%s: verify of the restore against the backup's checkpoint: %s (%.0f records/s)\n", name, r.verify.Round(time.Millisecond), float64(n)/r.verify.Seconds())
	return r, os.RemoveAll(dir)
}

// mirrorsCaughtUp waits until each of the backup account's mirrors (read
// as the backup user, bnc) holds its origin's last sequence (read as the
// admin, js), polling.
func mirrorsCaughtUp(ctx context.Context, bnc *nats.Conn, js jetstream.JetStream) error {
	bjs, err := jetstream.New(bnc)
	if err != nil {
		return err
	}
	for _, name := range access.BackupStreams() {
		o, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		want := o.CachedInfo().State.LastSeq
		for deadline := time.Now().Add(30 * time.Minute); ; {
			m, err := bjs.Stream(ctx, name)
			if err != nil {
				return fmt.Errorf("mirror %s: %w", name, err)
			}
			if m.CachedInfo().State.LastSeq >= want {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("mirror %s at %d of %d", name, m.CachedInfo().State.LastSeq, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// random: each record's body is random hex (-random).
var random bool

// store and signingKey: an existing store and its audit key (-store,
// -signing-key).
var store, signingKey string

func mb(b int64) float64 { return float64(b) / 1e6 }

// startAuditor runs an auditor on url (connected with opts) until stop.
func startAuditor(ctx context.Context, url string, cfg auditor.Config, opts ...nats.Option) (*auditor.Service, func(), error) {
	nc, err := nats.Connect(url, append(opts, nats.Timeout(time.Minute))...)
	if err != nil {
		return nil, nil, err
	}
	a, err := auditor.New(nc, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	// Wait until it serves (its live view follows QUARANTINE).
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, err := nc.Request("$SRV.PING.auditor", nil, time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			return nil, nil, errors.New("auditor not serving")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return a, func() { cancel(); <-done; nc.Close() }, nil
}

// seed writes n records in chains of two and returns a record's size.
func seed(ctx context.Context, js jetstream.JetStream, n int) (int, error) {
	t := time.Now().UTC().Add(-time.Hour)
	body := append([]byte(`{"transaction_id":"TX-1","note":"`), strings.Repeat("x", 1000)...)
	body = append(body, `"}`...)
	first := record.FromFailure(record.Failure{
		Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Detail: "downstream answered 503",
		Domain: pharmacy.Name, Subject: subjects.Event(pharmacy.Name, pharmacy.Dispense), Stream: subjects.EventsStream, Seq: 1, Deliveries: 5,
		Published: t, Payload: body,
		Headers: map[string][]string{envelope.Traceparent: {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		Envelope: &envelope.Envelope{Domain: pharmacy.Name, EventType: pharmacy.Dispense, IdempotencyKey: "x",
			OrderingKey: "00406051201|L1", PartyID: "BW4829137", EventTime: t},
		Attempts: []record.Attempt{
			{At: t, Stage: record.StageCommit, Code: codes.DownstreamUnavailable, Reason: "timeout", Delivery: 1},
			{At: t, Stage: record.StageCommit, Code: codes.DownstreamUnavailable, Reason: "503", Delivery: 5},
		},
	}, t)
	size, pending := 0, 0
	for i := 0; i < n; i += 2 {
		r := first
		r.DLQID = fmt.Sprintf("pharmacy_%032x", i)
		r.IdempotencyKey = r.DLQID
		if random {
			note := make([]byte, 500)
			_, _ = rand.Read(note)
			r.Payload = record.NewPayload(fmt.Appendf(nil, `{"transaction_id":"TX-%d","note":"%x"}`, i, note))
		}
		if err := record.Seal(&r); err != nil {
			return 0, err
		}
		done := r
		done.Index, done.Kind, done.PrevHash, done.Payload, done.Headers, done.Attempts = 1, record.KindResolved, r.AuditHash, nil, nil, nil
		done.Actor, done.Reason, done.AuditHash = "bench", "closed", ""
		if err := record.Seal(&done); err != nil {
			return 0, err
		}
		for _, rec := range []record.Record{r, done} {
			b, err := record.Marshal(rec)
			if err != nil {
				return 0, err
			}
			if size == 0 {
				size = len(b)
			}
			if _, err := js.PublishAsync(subjects.Quarantine(rec.Domain, rec.DLQID), b); err != nil {
				return 0, err
			}
			if pending++; pending == 4096 {
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(time.Minute):
					return 0, errors.New("seeding timed out")
				}
				pending = 0
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Minute):
		return 0, errors.New("seeding timed out")
	}
	return size, nil
}
