// Command export measures the inspection export: `dlqctl export` (run
// in-process, paging audit.export over NATS) of every record of a store
// as JSONL, CSV and XLSX, and `dlqctl verify-export` of the JSONL with no
// server, and prints for each the time, the records per second and the
// file size.
//
// The nats-server runs in a child process (this binary with -serve, no
// fsync: the export only reads). The auditor runs in this process with a
// signing key and AllowAnonymous (the server has no accounts), as does
// dlqctl. The store is seeded directly: sealed pharmacy records of about
// 2.3 KB (a 1 KB event body, headers, two attempts) in chains of two
// (quarantined, then resolved), the layout of tests/bench/audit.
//
//	go run ./tests/bench/export -n 100000
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/dlqctl/cli"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/runner"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

func main() {
	n := flag.Int("n", 100000, "records (in chains of two)")
	serve := flag.String("serve", "", "internal: run the server on this store directory")
	formats := flag.String("formats", "jsonl,csv,xlsx", "the formats to export")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the exports to this file")
	flag.Parse()
	runner.TuneGC(runner.DefaultGCPercent)
	if *serve != "" {
		if err := benchenv.ServeStore(*serve); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *cpuprofile != "" {
		stop, err := benchenv.CPUProfile(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
	}
	if err := run(*n, strings.Split(*formats, ",")); err != nil {
		log.Fatal(err)
	}
}

func run(n int, formats []string) error {
	dir, err := os.MkdirTemp("", "export-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	nc, js, stopStore, err := benchenv.ChildStore(ctx, filepath.Join(dir, "store"))
	if err != nil {
		return err
	}
	defer stopStore()
	recordSize, err := seed(ctx, js, n)
	if err != nil {
		return err
	}
	cfg := auditor.DefaultConfig()
	cfg.CheckpointInterval, cfg.ReconcileInterval = 0, 0
	cfg.AllowAnonymous = true
	cfg.SigningKeyFile = filepath.Join(dir, "audit.nk")
	pub, err := auditor.NewSigningKey(cfg.SigningKeyFile)
	if err != nil {
		return err
	}
	a, err := auditor.New(nc, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = a.Run(actx) }()
	if err := waitFor(func() error { _, err := nc.Request(api.AuditGroups, nil, time.Second); return err }); err != nil {
		return err
	}
	fmt.Printf("export bench: GOMAXPROCS=%d, %d records of %d bytes in chains of 2, server in a child process (no fsync), auditor and dlqctl in this process\n",
		runtime.GOMAXPROCS(0), n, recordSize)
	fmt.Printf("%-22s %-9s %10s %12s %10s\n", "operation", "records", "seconds", "records/s", "MiB")
	var jsonl string
	for i, f := range formats {
		file := filepath.Join(dir, "export."+f)
		start := time.Now()
		var stdout, stderr bytes.Buffer
		code := cli.ExecuteContext(ctx, []string{"-s", nc.ConnectedUrl(), "-o", "json", "--timeout", "5m", "export", "--reason", "bench", "--out", file},
			cli.IO{Out: &stdout, Err: &stderr})
		d := time.Since(start).Seconds()
		if code != 0 {
			return fmt.Errorf("dlqctl export %s: exit %d: %s", f, code, stderr.String())
		}
		var res struct {
			Records, Pages int
		}
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Records != n {
			return fmt.Errorf("dlqctl export %s: %s (%v), want %d records", f, stdout.String(), err, n)
		}
		st, err := os.Stat(file)
		if err != nil {
			return err
		}
		what := "export " + f
		if i == 0 {
			what += " (+checkpoint)"
		}
		fmt.Printf("%-22s %-9d %10.2f %12.0f %10.1f   %d pages\n", what, n, d, float64(n)/d, float64(st.Size())/(1<<20), res.Pages)
		if f == "jsonl" {
			jsonl = file
		}
	}
	if jsonl != "" {
		start := time.Now()
		var stdout, stderr bytes.Buffer
		code := cli.ExecuteContext(ctx, []string{"verify-export", jsonl, "--pubkey", pub}, cli.IO{Out: &stdout, Err: &stderr})
		d := time.Since(start).Seconds()
		if code != 0 {
			return fmt.Errorf("dlqctl verify-export: exit %d: %s", code, stderr.String())
		}
		fmt.Printf("%-22s %-9d %10.2f %12.0f %10s\n", "verify-export (offline)", n, d, float64(n)/d, "-")
	}
	return nil
}

// waitFor polls fn until it succeeds (30 s at most).
func waitFor(fn func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	case <-time.After(time.Minute):
		return 0, errors.New("seeding timed out")
	}
	return size, nil
}
