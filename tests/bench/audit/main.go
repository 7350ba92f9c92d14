// Command audit measures the auditor's verify and reconcile over a store of
// quarantine records and events, and prints, for each size step, the time,
// the rate and the auditor's peak RSS during the operation.
//
// The nats-server runs in a child process (this binary with -serve), so
// the RSS measured is the auditor's alone: the peak is reset (Linux
// /proc/self/clear_refs) before each operation and read (VmHWM) after it.
// The store is seeded directly, as an administrator would: sealed records
// of about 2.3 KB (a 1 KB event body, headers, two attempts) in chains of
// two (quarantined, then resolved) on QUARANTINE, and valid pharmacy events
// on EVENTS with their committed state in IDEMPOTENCY. Before each
// operation the heap is collected and returned to the OS.
//
//	go run ./tests/bench/audit -n 100000 -steps 4
//
// -apart writes each step's resolutions after all its quarantined records,
// so a chain's two records are far apart in the stream; with -cache
// smaller than the chains of a step, verify then reads the previous record
// of most chains from the server (record.TailAfter).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/runner"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

func main() {
	n := flag.Int("n", 100000, "records (and events) at the last step")
	steps := flag.Int("steps", 4, "measure at n/steps, 2n/steps, ... n")
	serve := flag.String("serve", "", "internal: run the server on this store directory")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the verify runs to this file")
	cache := flag.Int("cache", 0, "the auditor's VerifyChainCache (0: its default)")
	apart := flag.Bool("apart", false, "write each step's quarantined records first, then their resolutions (a chain's two records far apart)")
	flag.Parse()
	runner.TuneGC(runner.DefaultGCPercent) // as deadletter's processes do
	if *serve != "" {
		if err := benchenv.ServeStore(*serve); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		profile = f
	}
	if err := run(*n, *steps, *cache, *apart); err != nil {
		log.Fatal(err)
	}
}

func run(n, steps, cache int, apart bool) error {
	dir, err := os.MkdirTemp("", "audit-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	nc, js, stopStore, err := benchenv.ChildStore(ctx, dir)
	if err != nil {
		return err
	}
	defer stopStore()
	cfg := auditor.DefaultConfig()
	cfg.CheckpointInterval, cfg.ReconcileInterval = 0, 0
	if cache > 0 {
		cfg.VerifyChainCache = cache
	}
	a, err := auditor.New(nc, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = a.Run(actx) }()

	s := &seeder{js: js, apart: apart}
	if err := s.init(); err != nil {
		return err
	}
	layout := "adjacent"
	if apart {
		layout = "apart (each step's resolutions after its quarantined records)"
	}
	fmt.Printf("auditor bench: GOMAXPROCS=%d, records of %d bytes in chains of 2, %s, verify chain cache %d, server in a child process\n",
		runtime.GOMAXPROCS(0), s.recordSize, layout, cfg.VerifyChainCache)
	fmt.Printf("%-10s %-9s %10s %12s %14s\n", "operation", "records", "seconds", "records/s", "peak RSS MiB")
	for step := 1; step <= steps; step++ {
		target := n * step / steps
		if err := s.seed(ctx, target); err != nil {
			return err
		}
		// Let the auditor's live view catch up (it serves list and groups).
		if _, err := a.Checkpoint(ctx); err != nil {
			return err
		}
		freeMemory()
		resetPeak()
		if profile != nil {
			_ = pprof.StartCPUProfile(profile)
		}
		rep, err := a.Verify(ctx, api.VerifyRequest{})
		if profile != nil {
			pprof.StopCPUProfile()
			profile = nil // one run: the last step's is overwritten otherwise
		}
		if err != nil {
			return err
		}
		if !rep.OK || rep.Records != uint64(target) {
			return fmt.Errorf("verify: ok=%v records %d problems %d", rep.OK, rep.Records, rep.ProblemCount)
		}
		if err := rawRead(ctx, js, target); err != nil {
			return err
		}
		fmt.Printf("%-10s %-9d %10.2f %12.0f %14.1f\n", "verify", rep.Records, rep.Seconds, float64(rep.Records)/rep.Seconds, peakMiB())
		freeMemory()
		resetPeak()
		rrep, err := a.Reconcile(ctx, api.ReconcileRequest{Grace: "0s"})
		if err != nil {
			return err
		}
		if rrep.Events != target || rrep.Counts[api.ReconcileCommitted] != target {
			return fmt.Errorf("reconcile: %d events, counts %v", rrep.Events, rrep.Counts)
		}
		fmt.Printf("%-10s %-9d %10.2f %12.0f %14.1f\n", "reconcile", rrep.Events, rrep.Seconds, float64(rrep.Events)/rrep.Seconds, peakMiB())
	}
	return nil
}

// rawRead reads QUARANTINE with an ordered consumer and does nothing
// else: the ceiling for verify on this machine.
func rawRead(ctx context.Context, js jetstream.JetStream, n int) error {
	start := time.Now()
	if err := benchenv.ReadQuarantine(ctx, js, n, false); err != nil {
		return err
	}
	d := time.Since(start).Seconds()
	fmt.Printf("%-10s %-9d %10.2f %12.0f %14s\n", "read only", n, d, float64(n)/d, "-")
	return nil
}

// profile receives the CPU profile of the first verify, when asked.
var profile *os.File

// seeder writes records, events and commit states.
type seeder struct {
	js         jetstream.JetStream
	gate       *gate.Gate
	first      record.Record
	recordSize int
	records    int
	events     int
	apart      bool // resolutions after the step's quarantined records
}

func (s *seeder) init() error {
	g, err := gate.New(0)
	if err != nil {
		return err
	}
	s.gate = g
	t := time.Now().UTC().Add(-time.Hour)
	body := make([]byte, 0, 1024)
	body = append(body, `{"transaction_id":"TX-1","note":"`...)
	body = append(body, strings.Repeat("x", 1000)...)
	body = append(body, `"}`...)
	s.first = record.FromFailure(record.Failure{
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
	r := s.first
	if err := record.Seal(&r); err != nil {
		return err
	}
	b, err := record.Marshal(r)
	s.recordSize = len(b)
	return err
}

// seed writes records and events up to target each.
func (s *seeder) seed(ctx context.Context, target int) error {
	pending := 0
	flush := func() error {
		select {
		case <-s.js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			return errors.New("seeding timed out")
		}
		pending = 0
		return nil
	}
	publish := func(subject string, data []byte, opts ...jetstream.PublishOpt) error {
		if _, err := s.js.PublishAsync(subject, data, opts...); err != nil {
			return err
		}
		if pending++; pending == 4096 {
			return flush()
		}
		return nil
	}
	type held struct {
		subject string
		data    []byte
	}
	var later []held // resolutions held back (apart)
	for ; s.records < target; s.records += 2 {
		r := s.first
		r.DLQID = fmt.Sprintf("pharmacy_%032x", s.records)
		r.IdempotencyKey = r.DLQID
		if err := record.Seal(&r); err != nil {
			return err
		}
		done := r
		done.Index, done.Kind, done.PrevHash, done.Payload, done.Headers, done.Attempts = 1, record.KindResolved, r.AuditHash, nil, nil, nil
		done.Actor, done.Reason, done.AuditHash = "bench", "closed", ""
		if err := record.Seal(&done); err != nil {
			return err
		}
		for i, rec := range []record.Record{r, done} {
			b, err := record.Marshal(rec)
			if err != nil {
				return err
			}
			if i == 1 && s.apart {
				later = append(later, held{subjects.Quarantine(rec.Domain, rec.DLQID), b})
				continue
			}
			if err := publish(subjects.Quarantine(rec.Domain, rec.DLQID), b); err != nil {
				return err
			}
		}
	}
	for _, h := range later {
		if err := publish(h.subject, h.data); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	info, err := s.js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		return err
	}
	for ; s.events < target; s.events++ {
		body := []byte(`{"transaction_id":"TX-` + strconv.Itoa(s.events) + `","registrant_dea":"BW4829137","ndc":"00406-0512-01",` +
			`"lot":"L24A0917","expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense",` +
			`"dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412"}`)
		env, err := s.gate.Check(subjects.Event(pharmacy.Name, pharmacy.Dispense), body)
		if err != nil {
			return err
		}
		ack, err := s.js.Publish(ctx, subjects.Event(pharmacy.Name, pharmacy.Dispense), body) // sync: the commit state names its sequence
		if err != nil {
			return err
		}
		st, _ := json.Marshal(idempotency.KeyState{State: idempotency.StateCommitted, Domain: pharmacy.Name, EventType: pharmacy.Dispense,
			SourceSeq: ack.Sequence, LedgerSeq: ack.Sequence, CommittedAt: time.Now().UTC()})
		if err := publish("$KV."+subjects.IdempotencyBucket+"."+env.IdempotencyKey, st); err != nil {
			return err
		}
	}
	_ = info
	return flush()
}

// freeMemory collects garbage and returns the free heap to the OS, so the
// peak measured next is the operation's, not what the previous one left
// mapped.
func freeMemory() { debug.FreeOSMemory() }

// resetPeak resets the process's peak RSS (Linux).
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakMiB returns the process's peak RSS since the last reset, in MiB.
func peakMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
