// Command goals runs the benchmark phases of issue #17 in one run and prints
// every goal's figure next to its reference, measured in the same run, in
// one table at the end. `make bench` runs it last.
//
// The phases are the other benchmark commands, built once and run as
// children in turn (their own output passes through; their FIGURE lines are
// collected):
//
//   - goal 1, goal 5 sync-always: tests/bench/ingest -sync-always, rounds of
//     raw async publish and async-producer ingest interleaved, the batching
//     producer's pair, the open-loop latency phase; then with the server
//     in a process of its own (-server-process: as a deployment runs it;
//     the validator and the publisher keep their process and collector)
//     a round of raw and ingest and the latency phase at half that
//     ingest (the server's messages cross a socket, which costs CPU: half
//     the embedded rate would be a different load);
//
//   - goal 2: tests/bench/ingest -cluster 3 -sync-always (goal 1's
//     workload, rounds and floors on a 3-node R3 cluster of this machine,
//     each node a process), then tests/bench/cluster -raw -async -r3-only
//     (2b: every service a process, with a downstream);
//
//   - goal 3, goal 5 no fsync: rounds of tests/bench/ingest (10 % poison)
//     alternating with the Watermill peer (../shared/peers/watermill-bench,
//     built with `go build` in its folder, outside the workspace), then the
//     latency phase at half the highest ingest round, then the same with
//     the server in a process of its own, as for sync-always;
//
//   - goal 4: tests/bench/drain in both fsync modes, and the drain's
//     floors (no fsync one record at a time; sync-always batched).
//
//     go run ./tests/bench/goals -n 50000 -sync-n 5000 -rounds 3
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/deadletter/deadletter/tests/internal/benchenv"
	"github.com/deadletter/deadletter/tests/internal/chaos"
)

func main() {
	n := flag.Int("n", 50000, "events per phase without fsync (goal 3 and its latency phase)")
	syncN := flag.Int("sync-n", 5000, "events per phase with sync_interval: always (goal 1 and its latency phase)")
	rounds := flag.Int("rounds", 3, "interleaved rounds of every compared pair")
	batch := flag.Int("batch", 100, "events per atomic batch of the batching producer (goal 1's second pair)")
	clusterN := flag.Int("cluster-n", 10000, "events of the R3 cluster run (goal 2)")
	drainN := flag.Int("drain-n", 100000, "exhausted records drained (goal 4), in each fsync mode")
	rss1M := flag.Bool("drain-rss-1m", false, "also drain 1,000,000 records without fsync for the redriver's peak RSS (goal 4; long: seeding and draining take minutes)")
	peerDir := flag.String("peer", "", "the Watermill peer's folder (default ../shared/peers/watermill-bench beside the repository)")
	skip := flag.String("skip", "", "comma-separated phases to leave out: sync, cluster, nofsync, drain")
	flag.Parse()
	root := chaos.Root()
	if *peerDir == "" {
		*peerDir = filepath.Join(root, "..", "shared", "peers", "watermill-bench")
	}
	skipped := map[string]bool{}
	for _, s := range strings.Split(*skip, ",") {
		skipped[strings.TrimSpace(s)] = true
	}
	b := &bench{figures: map[string]figure{}}
	if err := b.run(root, *peerDir, *n, *syncN, *rounds, *batch, *clusterN, *drainN, *rss1M, skipped); err != nil {
		b.table(os.Stdout)
		log.Fatal(err)
	}
	b.table(os.Stdout)
}

// figure is one FIGURE line of a phase.
type figure struct {
	value         float64
	unit, fsync   string
	events, round int
}

func (f figure) String() string {
	return fmt.Sprintf("%s %s", num(f.value), f.unit)
}

// label says a figure's fsync mode, events and rounds.
func (f figure) label() string {
	return fmt.Sprintf("fsync %s, %d events, %d rounds", f.fsync, f.events, f.round)
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

type bench struct {
	bins    map[string]string
	figures map[string]figure // by phase prefix + key
	notes   []string
}

func (b *bench) run(root, peerDir string, n, syncN, rounds, batch, clusterN, drainN int, rss1M bool, skip map[string]bool) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "deadletter-bench-goals-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if !skip["nofsync"] {
		if st, err := os.Stat(filepath.Join(peerDir, "go.mod")); err != nil || st.IsDir() {
			return fmt.Errorf("the Watermill peer is not at %s (needed for goal 3; -peer names its folder, -skip nofsync leaves goal 3 out): %v", peerDir, err)
		}
	}
	b.bins = map[string]string{}
	start := time.Now()
	for _, name := range []string{"ingest", "cluster", "drain"} {
		out := filepath.Join(dir, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./tests/bench/"+name)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s: %w", name, err)
		}
		b.bins[name] = out
	}
	if !skip["nofsync"] {
		out := filepath.Join(dir, "watermill-bench")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
		cmd.Dir, cmd.Stdout, cmd.Stderr = peerDir, os.Stderr, os.Stderr
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build the Watermill peer in %s: %w", peerDir, err)
		}
		b.bins["watermill"] = out
	}
	fmt.Printf("goals: built in %s\n", time.Since(start).Round(time.Second))
	phase := func(name string) {
		fmt.Printf("\n==== %s (%s since start)\n", name, time.Since(start).Round(time.Second))
	}

	if !skip["sync"] {
		phase("goals 1 and 5, sync always: ingest vs raw, async and batching producers, open-loop latency")
		if err := b.child("sync.", "ingest", "-sync-always", "-n", itoa(syncN), "-rounds", itoa(rounds), "-batch", itoa(batch), "-latency", "-redelivered", "-floors"); err != nil {
			return err
		}
		phase("goal 5, sync always: the server in a process of its own (as deployed): a round of raw and ingest, then the latency phase at half that ingest")
		if err := b.child("sync.proc.", "ingest", "-sync-always", "-server-process", "-n", itoa(syncN), "-rounds", "1", "-latency", "-latency-floor"); err != nil {
			return err
		}
	}
	if !skip["cluster"] {
		phase("goal 2, 3-node R3 cluster on this machine, sync always: ingest vs raw (goal 1's workload and producer), and the floors")
		if err := b.child("r3.", "ingest", "-cluster", "3", "-sync-always", "-n", itoa(syncN), "-rounds", itoa(rounds), "-floors"); err != nil {
			return err
		}
		phase("goal 2b, the same cluster with every service a process of its own (two validators, two quarantiners, a downstream 5 % of events exhaust): ingest vs raw, async producer")
		if err := b.child("cluster.", "cluster", "-n", itoa(clusterN), "-rounds", "1", "-raw", "-async", "-r3-only"); err != nil {
			return err
		}
	}
	if !skip["nofsync"] {
		var ing, wm, raw, ingCPU, wmCPU tallied
		maxRound := 0.0
		for r := range rounds {
			ingFirst := r%2 == 0
			for step := range 2 {
				if (step == 0) == ingFirst {
					phase(fmt.Sprintf("goal 3 round %d: deadletter ingest, no fsync, 10 %% poison", r+1))
					args := []string{"-n", itoa(n), "-rounds", "1", "-poison", "0.1"}
					if r == 0 {
						args = append(args, "-floors") // once: the floors of the best design, no validation
					}
					if err := b.child("nofsync.", "ingest", args...); err != nil {
						return err
					}
					f := b.figures["nofsync.ingest_async"]
					ing.add(n, f.value)
					maxRound = max(maxRound, f.value)
					raw.add(n, b.figures["nofsync.raw_async"].value)
					ingCPU.addCPU(n, b.figures["nofsync.ingest_async_cpu"].value)
				} else {
					phase(fmt.Sprintf("goal 3 round %d: the Watermill peer, no fsync, 10 %% poison", r+1))
					rate, cpu, err := b.watermill(n)
					if err != nil {
						return err
					}
					wm.add(n, rate)
					wmCPU.addCPU(n, cpu)
				}
			}
		}
		set := func(key string, v float64, unit string) {
			b.figures["nofsync."+key] = figure{value: v, unit: unit, fsync: "off", events: n, round: rounds}
		}
		set("ingest_async", ing.rate(), "events/s")
		set("raw_async", raw.rate(), "msg/s")
		set("ingest_async_cpu", ingCPU.cpu(), "us/event")
		set("watermill", wm.rate(), "events/s")
		set("watermill_cpu", wmCPU.cpu(), "us/event")
		b.notes = append(b.notes, fmt.Sprintf("goal 3 rounds: deadletter %s events/s, Watermill %s events/s", ing.spread(), wm.spread()))
		phase("goal 5, no fsync: open-loop latency at half the highest ingest round")
		if err := b.child("nofsync.", "ingest", "-n", itoa(n), "-latency", "-latency-floor", "-latency-rate", strconv.FormatFloat(maxRound/2, 'f', 0, 64)); err != nil {
			return err
		}
		phase("goal 5, no fsync: the server in a process of its own (as deployed): a round of raw and ingest, then the latency phase at half that ingest")
		if err := b.child("nofsync.proc.", "ingest", "-server-process", "-n", itoa(n), "-rounds", "1", "-latency", "-latency-floor"); err != nil {
			return err
		}
	}
	if !skip["drain"] {
		phase("goal 4: drain, no fsync")
		if err := b.child("drain.off.", "drain", "-n", itoa(drainN)); err != nil {
			return err
		}
		floorN := itoa(max(1000, drainN/4))
		phase("goal 4: the drain's floor, no fsync, one record at a time (cheaper than batches without fsync)")
		if err := b.child("drain.floor.off.", "drain", "-n", floorN, "-floor", "-floor-compute"); err != nil {
			return err
		}
		phase("goal 4: drain, sync always")
		if err := b.child("drain.always.", "drain", "-n", itoa(drainN), "-sync-always"); err != nil {
			return err
		}
		phase("goal 4: the drain's floor, sync always, batched, replays straight into EVENTS")
		if err := b.child("drain.floor.always.", "drain", "-n", floorN, "-sync-always", "-floor", "-floor-compute", "-floor-batch", "256"); err != nil {
			return err
		}
		phase("goal 4: the drain's floor, sync always, batched, replays through REPLAYS (sourced by EVENTS)")
		if err := b.child("drain.floorr.always.", "drain", "-n", floorN, "-sync-always", "-floor", "-floor-compute", "-floor-batch", "256", "-floor-replays"); err != nil {
			return err
		}
		if rss1M {
			phase("goal 4: drain of 1,000,000 records, no fsync, for the redriver's peak RSS")
			t := time.Now()
			if err := b.child("drain.1m.", "drain", "-n", "1000000"); err != nil {
				return err
			}
			b.notes = append(b.notes, fmt.Sprintf("the 1,000,000-record drain took %s (seeding included)", time.Since(t).Round(time.Second)))
		}
	}
	fmt.Printf("\ngoals: every phase done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// tallied sums rounds of a rate (events over time) or of CPU per event.
type tallied struct {
	events  int
	seconds float64
	cpuUS   float64
	rates   []string
}

func (t *tallied) add(n int, rate float64) {
	t.events += n
	t.seconds += float64(n) / rate
	t.rates = append(t.rates, num(rate))
}

func (t *tallied) addCPU(n int, us float64) {
	t.events += n
	t.cpuUS += us * float64(n)
}

func (t *tallied) rate() float64  { return float64(t.events) / t.seconds }
func (t *tallied) cpu() float64   { return t.cpuUS / float64(t.events) }
func (t *tallied) spread() string { return strings.Join(t.rates, " / ") }

// child runs a built benchmark, passing its output through and keeping its
// FIGURE lines under prefix.
func (b *bench) child(prefix, name string, args ...string) error {
	// The dirty pages an earlier phase left (a no-fsync phase writes
	// gigabytes the kernel flushes later) would slow this phase's fsyncs:
	// flush them first, so that every phase starts from a clean disk.
	syscall.Sync()
	cmd := exec.Command(b.bins[name], args...)
	benchenv.DieWithParent(cmd)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "FIGURE ") {
			fmt.Println(line)
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		v, _ := strconv.ParseFloat(kv["value"], 64)
		ev, _ := strconv.Atoi(kv["events"])
		rd, _ := strconv.Atoi(kv["rounds"])
		b.figures[prefix+kv["key"]] = figure{value: v, unit: kv["unit"], fsync: kv["fsync"], events: ev, round: rd}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// watermill runs the Watermill phase of the peer once on n events (its own
// server, 10 % invalid events routed to its poison queue) and returns its
// events/s and its process's CPU per event (user+sys of the whole process:
// its server, the pre-publish of the n events, the pipeline).
func (b *bench) watermill(n int) (float64, float64, error) {
	cmd := exec.Command(b.bins["watermill"], "-n", itoa(n), "-phase", "watermill")
	benchenv.DieWithParent(cmd)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("the Watermill peer: %w", err)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	rate, err := strconv.ParseFloat(kv["watermill_pipeline_events_per_s"], 64)
	if err != nil {
		return 0, 0, fmt.Errorf("the Watermill peer printed no rate: %q", out)
	}
	if kv["watermill_ledger"] != kv["watermill_expected_ledger"] || kv["watermill_poison"] != kv["watermill_expected_poison"] {
		return 0, 0, errors.New("the Watermill peer's ledger or poison count is not the expected one: " + string(out))
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	fmt.Printf("Watermill pipeline: %.0f events/s (ledger %s, poison %s), %.1f µs CPU/event (its whole process)\n",
		rate, kv["watermill_ledger"], kv["watermill_poison"], float64(cpu.Microseconds())/float64(n))
	return rate, float64(cpu.Microseconds()) / float64(n), nil
}

// table prints the goals' table from the figures gathered so far.
func (b *bench) table(w io.Writer) {
	fmt.Fprintf(w, "\n==== issue #17 goals, one run (%d CPUs)\n", runtime.NumCPU())
	fmt.Fprintf(w, "%-44s %-20s %-20s %-9s %-8s %-4s %s\n", "goal", "figure", "reference", "ratio", "goal", "met", "measured")
	get := func(k string) (figure, bool) { f, ok := b.figures[k]; return f, ok }
	ratio := func(name, fig, ref string, goal float64, times bool) {
		f, ok1 := get(fig)
		r, ok2 := get(ref)
		if !ok1 || !ok2 {
			fmt.Fprintf(w, "%-44s not measured\n", name)
			return
		}
		x := f.value / r.value
		rs, gs := fmt.Sprintf("%.1f %%", 100*x), fmt.Sprintf("≥ %.0f %%", 100*goal)
		if times {
			rs, gs = fmt.Sprintf("%.2f×", x), fmt.Sprintf("≥ %.0f×", goal)
		}
		met := "-"
		if goal > 0 {
			met = map[bool]string{true: "yes", false: "no"}[x >= goal]
		} else {
			gs = "reported"
		}
		fmt.Fprintf(w, "%-44s %-20s %-20s %-9s %-8s %-4s %s\n", name, f, r, rs, gs, met, f.label())
	}
	bound := func(name, fig string, limit float64, below bool) {
		f, ok := get(fig)
		if !ok {
			fmt.Fprintf(w, "%-44s not measured\n", name)
			return
		}
		met, gs := f.value >= limit, "≥ "+num(limit)
		if below {
			met, gs = f.value < limit, "< "+num(limit)
		}
		fmt.Fprintf(w, "%-44s %-20s %-20s %-9s %-8s %-4s %s\n", name, f, "", "", gs, map[bool]string{true: "yes", false: "no"}[met], f.label())
	}
	info := func(name, fig string) {
		if f, ok := get(fig); ok {
			fmt.Fprintf(w, "%-44s %-20s %-20s %-9s %-8s %-4s %s\n", name, f, "", "", "", "", f.label())
		}
	}
	ratio("1 ingest / raw, async producer", "sync.ingest_async", "sync.raw_async", 0.80, false)
	ratio("1b ingest / raw, batching producer", "sync.ingest_batch", "sync.raw_batch", 0, false)
	ratio("  floor: batched writes, no validation / raw", "sync.floor_batched", "sync.raw_async", 0, false)
	ratio("  floor: LEDGER only, batched / raw", "sync.floor_ledger", "sync.raw_async", 0, false)
	ratio("  floor: consume and ack only / raw", "sync.floor_ack", "sync.raw_async", 0, false)
	ratio("  floor: validation + batched writes / raw", "sync.floor_validated", "sync.raw_async", 0, false)
	ratio("  floor: validation + LEDGER only / raw", "sync.floor_validated_ledger", "sync.raw_async", 0, false)
	ratio("  floor: pipelined writes, no validation / raw", "sync.floor_pipelined", "sync.raw_async", 0, false)
	ratio("  floor: LEDGER only, pipelined / raw", "sync.floor_ledger_pipelined", "sync.raw_async", 0, false)
	ratio("  floor: validation + pipelined writes / raw", "sync.floor_validated_pipelined", "sync.raw_async", 0, false)
	info("5 CPU per event, ingest async (sync)", "sync.ingest_async_cpu")
	info("5 CPU per event, ingest batching (sync)", "sync.ingest_batch_cpu")
	info("  redelivered after a crash (sync), events/s", "sync.ingest_redelivered")
	info("  its CPU per event", "sync.ingest_redelivered_cpu")
	ratio("2 R3 ingest / raw R3, async producer", "r3.ingest_async", "r3.raw_async", 0.60, false)
	ratio("  floor: batched writes, no validation / raw", "r3.floor_batched", "r3.raw_async", 0, false)
	ratio("  floor: LEDGER only, batched / raw", "r3.floor_ledger", "r3.raw_async", 0, false)
	ratio("  floor: consume and ack only / raw", "r3.floor_ack", "r3.raw_async", 0, false)
	ratio("  floor: validation + batched writes / raw", "r3.floor_validated", "r3.raw_async", 0, false)
	ratio("  floor: validation + LEDGER only / raw", "r3.floor_validated_ledger", "r3.raw_async", 0, false)
	ratio("  floor: pipelined writes, no validation / raw", "r3.floor_pipelined", "r3.raw_async", 0, false)
	ratio("  floor: LEDGER only, pipelined / raw", "r3.floor_ledger_pipelined", "r3.raw_async", 0, false)
	ratio("  floor: validation + pipelined writes / raw", "r3.floor_validated_pipelined", "r3.raw_async", 0, false)
	info("5 CPU per event, R3 ingest (3 nodes + this)", "r3.ingest_async_cpu")
	ratio("2b R3, services as processes / raw R3", "cluster.r3_ingest", "cluster.r3_raw", 0, false)
	info("5 CPU per event, 2b (all processes)", "cluster.r3_ingest_cpu")
	ratio("3 ingest / Watermill peer (10 % poison)", "nofsync.ingest_async", "nofsync.watermill", 2, true)
	ratio("3 ingest / raw, async producer", "nofsync.ingest_async", "nofsync.raw_async", 0.25, false)
	ratio("  floor: batched writes, no validation / Watermill", "nofsync.floor_batched", "nofsync.watermill", 0, true)
	ratio("  floor: LEDGER only, batched / Watermill", "nofsync.floor_ledger", "nofsync.watermill", 0, true)
	ratio("  floor: consume and ack only / Watermill", "nofsync.floor_ack", "nofsync.watermill", 0, true)
	ratio("  floor: validation + batched writes / Watermill", "nofsync.floor_validated", "nofsync.watermill", 0, true)
	ratio("  floor: validation + LEDGER only / Watermill", "nofsync.floor_validated_ledger", "nofsync.watermill", 0, true)
	ratio("  floor: pipelined writes, no validation / Watermill", "nofsync.floor_pipelined", "nofsync.watermill", 0, true)
	ratio("  floor: LEDGER only, pipelined / Watermill", "nofsync.floor_ledger_pipelined", "nofsync.watermill", 0, true)
	ratio("  floor: validation + pipelined writes / Watermill", "nofsync.floor_validated_pipelined", "nofsync.watermill", 0, true)
	info("  floor CPU per event: batched writes (no fsync)", "nofsync.floor_batched_cpu")
	info("  floor CPU per event: consume and ack (no fsync)", "nofsync.floor_ack_cpu")
	info("5 CPU per event, ingest (no fsync)", "nofsync.ingest_async_cpu")
	info("5 CPU per event, Watermill (its process)", "nofsync.watermill_cpu")
	bound("4 drain, no fsync", "drain.off.drain", 5000, false)
	info("5 CPU per drained record, no fsync", "drain.off.drain_cpu")
	info("  floor, no fsync, one record at a time", "drain.floor.off.floor")
	info("  its CPU per record", "drain.floor.off.floor_cpu")
	bound("4 drain, sync always", "drain.always.drain", 1500, false)
	info("5 CPU per drained record, sync always", "drain.always.drain_cpu")
	info("  floor, sync, batched, replays into EVENTS", "drain.floor.always.floor")
	info("  its CPU per record", "drain.floor.always.floor_cpu")
	info("  floor, sync, batched, replays via REPLAYS", "drain.floorr.always.floor")
	info("  its CPU per record", "drain.floorr.always.floor_cpu")
	if _, ok := get("drain.1m.drain_rss"); ok {
		bound("4 redriver peak RSS, 1,000,000 records", "drain.1m.drain_rss", 256, true)
	} else {
		info("4 redriver peak RSS (not at 1M: -drain-rss-1m)", "drain.off.drain_rss")
	}
	bound("5 p99 publish → LEDGER, sync always", "sync.latency_p99", 100, true)
	info("  floor p99 at the same rate (validation + writes)", "sync.latency_floor_p99")
	info("  ingest, server in its own process", "sync.proc.ingest_async")
	bound("  server in its own process, at half its rate", "sync.proc.latency_p99", 100, true)
	info("  its floor p99", "sync.proc.latency_floor_p99")
	bound("5 p99 publish → LEDGER, no fsync", "nofsync.latency_p99", 50, true)
	info("  floor p99 at the same rate (validation + writes)", "nofsync.latency_floor_p99")
	info("  ingest, server in its own process", "nofsync.proc.ingest_async")
	bound("  server in its own process, at half its rate", "nofsync.proc.latency_p99", 50, true)
	info("  its floor p99", "nofsync.proc.latency_floor_p99")
	for _, mode := range []string{"sync", "sync.proc", "nofsync", "nofsync.proc"} {
		p := []string{}
		for _, q := range []string{"p50", "p90", "p99", "max"} {
			if f, ok := get(mode + ".latency_" + q); ok {
				p = append(p, q+" "+f.String())
			}
		}
		if r, ok := get(mode + ".latency_rate"); ok {
			fmt.Fprintf(w, "  latency %s at %s (%s): %s\n", mode, r, r.label(), strings.Join(p, ", "))
		}
	}
	for _, n := range b.notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}
