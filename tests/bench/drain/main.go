// Command drain measures a redriver drain end to end: n quarantined
// exhausted records, drained with no rate ceiling through the full
// validator (gate + idempotent commit to LEDGER) and the quarantiner's
// lifecycle appends. It prints the drain's records per second and the
// redriver's peak RSS, the redriver running in its own process (this
// command re-executed with -child) so that its memory is measured alone.
// `make bench` runs it.
//
// The records are written straight into QUARANTINE, sealed and chained as
// the quarantiner writes them (what is measured is the drain, not the
// quarantining).
//
// With -canary N it measures what a canary adds to a drain: -rounds rounds,
// each of a drain of n fresh records with canary N and one without, in
// alternating order, and prints each drain's time and the medians.
//
// With -floor it measures instead what no drain can beat on the machine at
// hand: the same records drained by the stores and reads alone (floor.go),
// with -floor-compute plus the computations every drain must do.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/runner"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// replayBatch, commitBatch and floorBatch are -replay-batch,
// -commit-batch and -floor-batch.
var replayBatch, commitBatch, floorBatch int

// floorReplays is -floor-replays.
var floorReplays bool

func main() {
	n := flag.Int("n", 100000, "quarantined records to drain")
	concurrency := flag.Int("concurrency", 512, "the drain's max_concurrency")
	syncAlways := flag.Bool("sync-always", false, "fsync every write (sync_interval: always)")
	dryRun := flag.Bool("dry-run", false, "only a dry run (selection memory), no replay")
	qworkers := flag.Int("quarantine-append-workers", quarantiner.DefaultConfig().AppendWorkers, "each quarantiner's AppendWorkers (append requests served at once)")
	quarantiners := flag.Int("quarantiners", 1, "quarantiner instances")
	child := flag.String("child", "", "internal: run only a redriver against this NATS URL")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the server, validator and quarantiner (this process) during the drain")
	redriverProfile := flag.String("redriver-cpuprofile", "", "write a CPU profile of the redriver (the child process) to this file")
	floorOnly := flag.Bool("floor", false, "instead of a drain, measure the store-bound floor: the stores and reads a drain requires per record, with none of deadletter's code (see floor.go)")
	floorCompute := flag.Bool("floor-compute", false, "with -floor: add the computations every drain must do (verify the chain's seal, validate, seal the records written)")
	floorDirect := flag.Bool("floor-direct", false, "with -floor: the drainer writes its chain records itself instead of through a writer standing for the quarantiner (which the WORM rules forbid; a reference)")
	canary := flag.Int("canary", 0, "measure a drain with this canary against one without, interleaved over -rounds rounds of n fresh records each")
	rounds := flag.Int("rounds", 5, "with -canary: rounds")
	childLogCanary := flag.Bool("child-log-canary", false, "internal: the child redriver logs its DRAIN_CANARY lines to stderr")
	flag.IntVar(&replayBatch, "replay-batch", -1, "the redriver's ReplayBatch (-1: its default; 0 or 1: each replay written alone)")
	flag.IntVar(&floorBatch, "floor-batch", 0, "with -floor: write the chain records (claims, outcomes) in atomic batches of up to this many, the ready ones together, and commit LEDGER and IDEMPOTENCY in batches as the validator's batcher does (0: one at a time)")
	flag.BoolVar(&floorReplays, "floor-replays", false, "with -floor: publish each replay to REPLAYS, which EVENTS sources, as the redriver did before it published straight to EVENTS (default: straight to EVENTS, as the redriver does)")
	flag.IntVar(&commitBatch, "commit-batch", 0, "the validator's CommitBatch (0: its default; 1: one event at a time)")
	flag.Parse()
	if *child != "" {
		runner.TuneGC(redriver.GCPercent) // as the redriver's own process does
		var logger *slog.Logger
		if *childLogCanary {
			logger = slog.New(canaryLines{slog.NewTextHandler(os.Stderr, nil)})
		}
		if err := runChild(*child, *concurrency, *redriverProfile, logger); err != nil {
			log.Fatal(err)
		}
		return
	}
	runner.TuneGC(runner.DefaultGCPercent) // as deadletter's processes do
	// The services (here and in the child redriver, which inherits the
	// environment) are told whether the server fsyncs every write, as an
	// operator tells them (streams.Options.SyncAlways).
	if err := os.Setenv("DEADLETTER_SYNC_ALWAYS", strconv.FormatBool(*syncAlways)); err != nil {
		log.Fatal(err)
	}
	if *floorOnly {
		if *floorDirect && *floorCompute {
			log.Fatal("-floor-direct writes unsealed stand-in records: it does not combine with -floor-compute")
		}
		if err := runFloor(*n, *concurrency, *syncAlways, *floorDirect, *floorCompute); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *canary > 0 {
		if err := runCanary(*n, *concurrency, *canary, *rounds, *syncAlways); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*n, *concurrency, *quarantiners, *qworkers, *syncAlways, *dryRun, *cpuprofile, *redriverProfile); err != nil {
		log.Fatal(err)
	}
}

// runChild runs one redriver until interrupted, profiling it to profile
// when set.
func runChild(url string, concurrency int, profile string, logger *slog.Logger) error {
	nc, err := nats.Connect(url, nats.Name("bench-redriver"))
	if err != nil {
		return err
	}
	defer nc.Close()
	stopProfile, err := benchenv.CPUProfile(profile)
	if err != nil {
		return err
	}
	defer stopProfile()
	cfg := redriver.DefaultConfig()
	cfg.LoadEnv(config.NewEnv(os.LookupEnv))
	if replayBatch >= 0 {
		cfg.ReplayBatch = replayBatch
	}
	cfg.Provision = false
	cfg.AllowAnonymous = true // a server without accounts: no caller to attach
	cfg.InstanceID = "bench-redriver"
	cfg.MaxConcurrency = max(cfg.MaxConcurrency, concurrency)
	r, err := redriver.New(nc, cfg, logger)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return r.Run(ctx)
}

func run(n, concurrency, quarantiners, qworkers int, syncAlways, dryRun bool, profile, redriverProfile string) error {
	ctx := context.Background()
	env, err := benchenv.Start(ctx, syncAlways)
	if err != nil {
		return err
	}
	defer env.Close()
	srv, nc, js := env.Server, env.NC, env.JS
	fmt.Printf("deadletter drain benchmark: %d quarantined exhausted records, %d CPUs, sync_always=%v, max_concurrency %d, %d quarantiner(s)\n",
		n, runtime.NumCPU(), syncAlways, concurrency, quarantiners)

	start := time.Now()
	if _, err := seed(ctx, js, 0, n); err != nil {
		return err
	}
	fmt.Printf("seeded QUARANTINE:           %d records in %s\n", n, time.Since(start).Round(time.Millisecond))

	if !dryRun {
		stopServices, err := startPipeline(srv.ClientURL(), quarantiners, qworkers)
		if err != nil {
			return err
		}
		defer stopServices()
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	stopProfile, err := benchenv.CPUProfile(profile)
	if err != nil {
		return err
	}
	defer stopProfile()
	args := []string{"-child", srv.ClientURL(), "-concurrency", strconv.Itoa(concurrency), "-replay-batch", strconv.Itoa(replayBatch)}
	if redriverProfile != "" {
		args = append(args, "-redriver-cpuprofile", redriverProfile)
	}
	cmd := exec.Command(exe, args...)
	benchenv.DieWithParent(cmd)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	if err := waitPing(nc, "redriver"); err != nil {
		return err
	}

	if dryRun {
		start = time.Now()
		var rep api.DrainStartReply
		if err := request(nc, api.DrainStart, api.DrainStartRequest{DryRun: true}, &rep, 10*time.Minute); err != nil {
			return err
		}
		fmt.Printf("dry run:                     %d selected, %d keys in %s\n", rep.Plan.Selected, rep.Plan.Keys, time.Since(start).Round(time.Millisecond))
		fmt.Printf("redriver peak RSS:           %s\n", peakRSS(cmd.Process.Pid))
		return nil
	}

	writes0, err := streamWrites(ctx, js)
	if err != nil {
		return err
	}
	cpu0, childCPU0 := benchenv.CPUTime(), benchenv.ChildCPUTime(cmd.Process.Pid)
	var rep api.DrainStartReply
	if err := request(nc, api.DrainStart, api.DrainStartRequest{RatePerSecond: new(float64), MaxConcurrency: concurrency, NoGuard: true}, &rep, 10*time.Second); err != nil {
		return err
	}
	var st api.DrainState
	maxRSS, maxKB := "", 0
	for {
		time.Sleep(time.Second)
		if err := request(nc, api.DrainStatus, api.DrainIDRequest{DrainID: rep.DrainID}, &st, 10*time.Second); err != nil {
			return err
		}
		maxRSS, maxKB = peakRSS(cmd.Process.Pid), max(maxKB, peakKB(cmd.Process.Pid))
		if st.FinishedAt != nil {
			break
		}
		fmt.Fprintf(os.Stderr, "  %s: %s, %d/%d done, %.0f/s, redriver peak RSS %s\n", time.Since(st.StartedAt).Round(time.Second),
			st.Status, st.Done(), st.Selected, st.CurrentRate, maxRSS)
	}
	took := st.FinishedAt.Sub(st.StartedAt)
	cpu, childCPU := benchenv.CPUTime()-cpu0, benchenv.ChildCPUTime(cmd.Process.Pid)-childCPU0
	fmt.Printf("drain:                       %s; selected %d, committed %d, skipped %d, failed %d, pending %d, errors %d\n",
		st.Status, st.Selected, st.Committed, st.SkippedDuplicate, st.ReplayFailed, st.Pending, st.Errors)
	fmt.Printf("drain rate:                  %8.0f records/s (%s, select → replay → validate → commit → replayed)\n",
		float64(st.Committed)/took.Seconds(), took.Round(time.Millisecond))
	fmt.Printf("redriver peak RSS:           %s (max in flight %d)\n", maxRSS, st.MaxInFlight)
	if st.Committed > 0 {
		fmt.Printf("CPU per record:              %s (server, validator, quarantiner %s; redriver %s; polled each second, so ±1 s of CPU)\n",
			((cpu + childCPU) / time.Duration(st.Committed)).Round(time.Microsecond),
			(cpu / time.Duration(st.Committed)).Round(time.Microsecond), (childCPU / time.Duration(st.Committed)).Round(time.Microsecond))
	}
	if writes1, err := streamWrites(ctx, js); err == nil && st.Committed > 0 {
		fmt.Print("writes per record:          ")
		for _, name := range slices.Sorted(maps.Keys(writes1)) {
			if d := writes1[name] - writes0[name]; d > 0 {
				fmt.Printf(" %s %.2f", name, float64(d)/float64(st.Committed))
			}
		}
		fmt.Println(" (messages stored in each stream during the drain, by last sequence)")
	}
	if st.Committed != n {
		return fmt.Errorf("committed %d of %d", st.Committed, n)
	}
	figure := func(key string, v float64, unit string) {
		fmt.Printf("FIGURE key=%s value=%.6g unit=%s fsync=%s events=%d rounds=1\n", key, v, unit, map[bool]string{false: "off", true: "always"}[syncAlways], n)
	}
	figure("drain", float64(st.Committed)/took.Seconds(), "records/s")
	figure("drain_cpu", float64(((cpu+childCPU)/time.Duration(st.Committed)).Nanoseconds())/1000, "us/record")
	figure("drain_rss", float64(maxKB)/1024, "MiB")
	return nil
}

// runFloor seeds n records as run does and measures the drain's
// store-bound floor on them.
func runFloor(n, concurrency int, syncAlways, direct, compute bool) error {
	ctx := context.Background()
	env, err := benchenv.Start(ctx, syncAlways)
	if err != nil {
		return err
	}
	defer env.Close()
	fmt.Printf("deadletter drain floor: %d quarantined exhausted records, %d CPUs, sync_always=%v, %d at once, records written %s, required computations %v\n",
		n, runtime.NumCPU(), syncAlways, concurrency, map[bool]string{false: "through a writer", true: "directly"}[direct], compute)
	start := time.Now()
	recs, err := seed(ctx, env.JS, 0, n)
	if err != nil {
		return err
	}
	fmt.Printf("seeded QUARANTINE:           %d records in %s\n", n, time.Since(start).Round(time.Millisecond))
	cpu0 := benchenv.CPUTime()
	rate, err := floor(ctx, env.URL(), env.JS, recs, benchPayload(0), concurrency, direct, compute)
	if err != nil {
		return err
	}
	cpu := (benchenv.CPUTime() - cpu0) / time.Duration(n)
	what := "selection scan; per record: chain read, key read, claim, replay publish, LEDGER + IDEMPOTENCY + ack, outcome"
	if compute {
		what += "; seal check, validation, records sealed"
	}
	if floorBatch > 1 {
		what += fmt.Sprintf("; chain records and commits in atomic batches of up to %d", floorBatch)
	}
	if floorReplays {
		what += "; replays through REPLAYS, sourced by EVENTS"
	}
	fmt.Printf("drain floor:                 %8.0f records/s (%s)\n", rate, what)
	fmt.Printf("CPU per record:              %s (server, drainer and committer, all in this process)\n", cpu.Round(time.Microsecond))
	figure := func(key string, v float64, unit string) {
		fmt.Printf("FIGURE key=%s value=%.6g unit=%s fsync=%s events=%d rounds=1\n", key, v, unit, map[bool]string{false: "off", true: "always"}[syncAlways], n)
	}
	figure("floor", rate, "records/s")
	figure("floor_cpu", float64(cpu.Nanoseconds())/1000, "us/record")
	return nil
}

// startPipeline runs the validator (LEDGER only, no downstream) and the
// quarantiners in this process.
func startPipeline(url string, quarantiners, qworkers int) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var conns []*nats.Conn
	done := make(chan error, 1+quarantiners)
	vnc, err := nats.Connect(url)
	if err != nil {
		cancel()
		return nil, err
	}
	conns = append(conns, vnc)
	vcfg := validator.DefaultConfig()
	vcfg.LoadEnv(config.NewEnv(os.LookupEnv))
	if commitBatch > 0 {
		vcfg.CommitBatch = commitBatch
	}
	vcfg.Provision = false
	v, err := validator.New(vnc, vcfg, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { done <- v.Run(ctx) }()
	for range quarantiners {
		qnc, err := nats.Connect(url)
		if err != nil {
			cancel()
			return nil, err
		}
		conns = append(conns, qnc)
		qcfg := quarantiner.DefaultConfig()
		qcfg.LoadEnv(config.NewEnv(os.LookupEnv))
		qcfg.Provision = false
		qcfg.AppendWorkers = qworkers
		q, err := quarantiner.New(qnc, qcfg, nil)
		if err != nil {
			cancel()
			return nil, err
		}
		go func() { done <- q.Run(ctx) }()
	}
	for _, name := range []string{"validator", "quarantiner"} {
		if err := waitPing(vnc, name); err != nil {
			cancel()
			return nil, err
		}
	}
	return func() {
		cancel()
		for range 1 + quarantiners {
			<-done
		}
		for _, c := range conns {
			c.Close()
		}
	}, nil
}

// benchPayload is the i-th event quarantined: a pharmacy dispense with its
// own idempotency and ordering key.
func benchPayload(i int) []byte {
	return fmt.Appendf(nil, `{"transaction_id":"BENCH-%09d","registrant_dea":"BW4829137","ndc":"00406-0512-01",`+
		`"lot":"L%09d","expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense",`+
		`"dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412"}`, i, i)
}

// seed writes n sealed first records of exhausted pharmacy events, each
// with its own idempotency and ordering key, and returns their dlq ids and
// keys in storage order.
func seed(ctx context.Context, js jetstream.JetStream, from, n int) ([]seeded, error) {
	g, err := gate.New(0)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	recs := make([]seeded, 0, n)
	for i := from; i < from+n; i++ {
		subject := subjects.Event(pharmacy.Name, pharmacy.Dispense)
		payload := benchPayload(i)
		env, err := g.Check(subject, payload)
		if err != nil {
			return nil, err
		}
		f := record.Failure{
			Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Detail: "downstream answered HTTP 503",
			Domain: pharmacy.Name, Subject: subject, Stream: subjects.EventsStream, Seq: uint64(i + 1), Deliveries: 5,
			Published: now, Payload: payload, Envelope: &env, FailedAt: now,
			Attempts: []record.Attempt{{At: now, Stage: record.StageCommit, Code: codes.DownstreamUnavailable, Reason: "downstream answered HTTP 503", Delivery: 5}},
		}
		r := record.FromFailure(f, now)
		if err := record.Seal(&r); err != nil {
			return nil, err
		}
		b, err := record.Marshal(r)
		if err != nil {
			return nil, err
		}
		// Under sync-always the acknowledgements come at the disk's fsync
		// rate: wait for room among the pending publishes rather than fail
		// after the default 200 ms stall.
		if _, err := js.PublishAsync(subjects.Quarantine(r.Domain, r.DLQID), b,
			jetstream.WithExpectLastSequencePerSubject(0), jetstream.WithStallWait(time.Minute)); err != nil {
			return nil, err
		}
		recs = append(recs, seeded{id: r.DLQID, key: env.IdempotencyKey})
		if i%10000 == 9999 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return nil, fmt.Errorf("seed acks timed out")
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return recs, nil
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("seed acks timed out")
	}
}

func request(nc *nats.Conn, subject string, v, out any, timeout time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m, err := nc.Request(subject, b, timeout)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return fmt.Errorf("%s: %s: %s", subject, code, m.Header.Get(micro.ErrorHeader))
	}
	return json.Unmarshal(m.Data, out)
}

func waitPing(nc *nats.Conn, name string) error {
	for range 300 {
		if _, err := nc.Request("$SRV.PING."+name, nil, 200*time.Millisecond); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered", name)
}

// peakRSS returns the peak resident set size (VmHWM) of a process.
func peakRSS(pid int) string {
	kb := peakKB(pid)
	if kb == 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

// peakKB is the peak resident set size (VmHWM) of a process in KiB, 0 when
// it can't be read.
func peakKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return kb
		}
	}
	return 0
}

// streamWrites returns the last sequence of every stream: what each has
// stored so far.
func streamWrites(ctx context.Context, js jetstream.JetStream) (map[string]uint64, error) {
	out := map[string]uint64{}
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		out[info.Config.Name] = info.State.LastSeq
	}
	return out, l.Err()
}
