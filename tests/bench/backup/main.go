// Command backup measures a backup and a restore of a quarantine store
// (package backup: JetStream snapshots, a signed manifest) and the verify
// that proves the restore: it seeds n sealed pharmacy records (about
// 2.3 KB each, the layout of tests/bench/export) into an embedded server
// (no fsync), checkpoints them with a real auditor, takes a backup, restores
// it into a second, empty server and verifies it there against the
// backup's checkpoint, printing each phase's time and the sizes.
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

	"github.com/deadletter/deadletter/services/auditor"
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
	src, err := embedded.Start(embedded.Config{StoreDir: filepath.Join(tmp, "src"), Port: -1})
	if err != nil {
		return err
	}
	defer src.Shutdown()
	nc, err := nats.Connect(src.ClientURL(), nats.Timeout(time.Minute))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := streams.EnsureCore(ctx, js, streams.DefaultOptions()); err != nil {
		return err
	}
	if err := streams.EnsureWORM(ctx, js, streams.DefaultOptions()); err != nil {
		return err
	}
	start := time.Now()
	size, err := seed(ctx, js, n)
	if err != nil {
		return err
	}
	fmt.Printf("seeded %d records of %d bytes in %s\n", n, size, time.Since(start).Round(time.Millisecond))

	key := filepath.Join(tmp, "audit.nk")
	pub, err := auditor.NewSigningKey(key)
	if err != nil {
		return err
	}
	cfg := auditor.DefaultConfig()
	cfg.CheckpointInterval, cfg.ReconcileInterval, cfg.AllowAnonymous, cfg.SigningKeyFile = 0, 0, true, key
	a, stopA, err := startAuditor(ctx, src.ClientURL(), cfg)
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
	dir := filepath.Join(tmp, "backup")
	start = time.Now()
	man, err := backup.Take(ctx, nc, dir, kp, backup.Options{})
	if err != nil {
		return err
	}
	took := time.Since(start)
	var total, qbytes int64
	for _, p := range man.Parts {
		total += p.Bytes
		if p.Stream == subjects.QuarantineStream {
			qbytes = p.Bytes
		}
	}
	qi, err := js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		return err
	}
	fmt.Printf("backup: %s, %d parts, %.1f MB (QUARANTINE %.1f MB of %.1f MB stored), %.0f records/s\n",
		took.Round(time.Millisecond), len(man.Parts), mb(total), mb(qbytes), mb(int64(qi.CachedInfo().State.Bytes)), float64(n)/took.Seconds())

	dst, err := embedded.Start(embedded.Config{StoreDir: filepath.Join(tmp, "dst"), Port: -1})
	if err != nil {
		return err
	}
	defer dst.Shutdown()
	dnc, err := nats.Connect(dst.ClientURL(), nats.Timeout(time.Minute))
	if err != nil {
		return err
	}
	defer dnc.Close()
	start = time.Now()
	if _, err := backup.Open(dir, pub); err != nil {
		return err
	}
	opened := time.Since(start)
	start = time.Now()
	if _, err := backup.Restore(ctx, dnc, dir, pub, nil); err != nil {
		return err
	}
	restored := time.Since(start)
	fmt.Printf("restore: check %s, restore %s (%.0f records/s)\n", opened.Round(time.Millisecond), restored.Round(time.Millisecond), float64(n)/restored.Seconds())

	cfg.SigningKeyFile = ""
	b, stopB, err := startAuditor(ctx, dst.ClientURL(), cfg)
	if err != nil {
		return err
	}
	defer stopB()
	line, err := os.ReadFile(filepath.Join(dir, backup.CheckpointFile))
	if err != nil {
		return err
	}
	start = time.Now()
	rep, err := b.Verify(ctx, api.VerifyRequest{Anchor: string(line), PubKey: pub})
	if err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("the restored store does not verify: %d problems, first %+v", rep.ProblemCount, rep.Problems[0])
	}
	verified := time.Since(start)
	fmt.Printf("verify of the restore against the backup's checkpoint: %s (%.0f records/s)\n", verified.Round(time.Millisecond), float64(n)/verified.Seconds())
	perM := 1e6 / float64(n)
	fmt.Printf("extrapolated per 1,000,000 records: backup %s, restore %s, verify %s, backup size %.0f MB\n",
		time.Duration(float64(took)*perM).Round(time.Second), time.Duration(float64(restored)*perM).Round(time.Second),
		time.Duration(float64(verified)*perM).Round(time.Second), mb(total)*perM)
	return nil
}

// random: each record's body is random hex (-random).
var random bool

func mb(b int64) float64 { return float64(b) / 1e6 }

// startAuditor runs an auditor on url until stop.
func startAuditor(ctx context.Context, url string, cfg auditor.Config) (*auditor.Service, func(), error) {
	nc, err := nats.Connect(url, nats.Timeout(time.Minute))
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
