package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// goalConfig sizes the goal mode of issue #17 (-rounds, -batch, -poison,
// -latency): raw publishing and ingest with the same producer mode, in
// interleaved rounds on one server, and the open-loop latency phase.
type goalConfig struct {
	n, rounds, workers int
	syncAlways         bool
	// batch is the batching producer's events per atomic batch (0: no
	// batching pair); batchPublishers the batches in flight at once.
	batch, batchPublishers int
	// poison is the share of invalid events (the validator routes them to
	// FAILURES; nothing quarantines them in this process).
	poison float64
	// latency adds the open-loop phase; latencyRate is its publish rate
	// (0: half the highest async ingest rate of this run's rounds).
	latency bool
	// cpuprofile, when set, is where the latency phase's CPU profile (and
	// its execution trace, cpuprofile.trace) is written.
	cpuprofile string
	// nodes above 1 runs every phase on a cluster of that many nodes.
	nodes int
	// serverProcess runs the one server in a process of its own (as a
	// deployment does) instead of embedded in this one.
	serverProcess bool
	latencyRate   float64
	// redelivered adds the phase of events redelivered after a crash:
	// their LEDGER messages are there and their marks are not, so every
	// batch would be refused and each event takes the per-event path.
	redelivered bool
	// floors adds the floors of the best design (floor.go) on the same
	// server, after the rounds: what no validator can beat here.
	floors bool
}

// fsyncMode names the fsync mode for the figures.
func fsyncMode(syncAlways bool) string {
	if syncAlways {
		return "always"
	}
	return "off"
}

// figure prints one machine-readable line for tests/bench/goals, after the
// human-readable ones.
func (g goalConfig) figure(key string, value float64, unit string, events int) {
	fmt.Printf("FIGURE key=%s value=%.6g unit=%s fsync=%s events=%d rounds=%d\n",
		key, value, unit, fsyncMode(g.syncAlways), events, g.rounds)
}

// tally sums the phases of one kind over the rounds.
type tally struct {
	events int
	dur    time.Duration
	cpu    time.Duration
	rates  []float64
}

func (t *tally) add(events int, rate float64, cpuPerEvent time.Duration) {
	d := time.Duration(float64(events) / rate * float64(time.Second))
	t.events += events
	t.dur += d
	t.cpu += cpuPerEvent * time.Duration(events)
	t.rates = append(t.rates, rate)
}

func (t *tally) rate() float64 { return float64(t.events) / t.dur.Seconds() }

func (t *tally) cpuPerEvent() time.Duration {
	if t.events == 0 {
		return 0
	}
	return t.cpu / time.Duration(t.events)
}

func (t *tally) spread() string {
	var s []string
	for _, r := range t.rates {
		s = append(s, fmt.Sprintf("%.0f", r))
	}
	return strings.Join(s, " / ")
}

// runGoals is the goal mode: rounds of raw async publish and async-producer
// ingest (the order alternating, ABBA), with -batch the same for the
// batching producer, then with -latency the open-loop latency phase.
func runGoals(ctx context.Context, g goalConfig) error {
	start := func(ctx context.Context, sync bool) (*benchenv.Env, error) { return benchenv.Start(ctx, sync) }
	if g.nodes > 1 || g.serverProcess {
		start = func(ctx context.Context, sync bool) (*benchenv.Env, error) {
			return benchenv.StartCluster(ctx, max(1, g.nodes), sync)
		}
	}
	env, err := start(ctx, g.syncAlways)
	if err != nil {
		return err
	}
	defer env.Close()
	cpuTime = env.CPUTime
	js, o := env.JS, env.Options
	raw := streams.Events(o)
	raw.Name, raw.Subjects, raw.Sources = "RAW", []string{"raw.>"}, nil
	// A copy of EVENTS, but reserving 1 GiB, not EVENTS' 8: the server
	// refuses streams whose reservations exceed its store (75 % of the free
	// disk by default), and a run makes several.
	raw.MaxBytes = 1 << 30
	if _, err := js.CreateStream(ctx, raw); err != nil {
		return err
	}
	sets := g.rounds
	if g.batch > 0 {
		sets *= 2
		rawb := raw
		rawb.Name, rawb.Subjects, rawb.AllowAtomicPublish = "RAW_ATOMIC", []string{"rawb.>"}, true
		if _, err := js.CreateStream(ctx, rawb); err != nil {
			return err
		}
		events := streams.Events(o)
		if !events.AllowAtomicPublish {
			// The batching producer's ingest needs EVENTS to take atomic
			// batches; shared/streams does not allow them today, so this
			// server's EVENTS is given allow_atomic, nothing else changed.
			events.AllowAtomicPublish = true
			if _, err := js.UpdateStream(ctx, events); err != nil {
				return fmt.Errorf("EVENTS with allow_atomic: %w", err)
			}
			fmt.Println("note: EVENTS as provisioned (shared/streams) does not allow atomic publish; this bench's server gave it allow_atomic for the batching producer's ingest")
		}
	}
	if g.latency {
		sets++
	}
	if g.redelivered {
		sets++
	}
	all, poisons, err := makeMixedEvents(sets, g.n, g.poison)
	if err != nil {
		return err
	}
	perSet := func(i int) ([]event, int) { return all[i], poisons[i] }
	var bytes int
	for _, e := range all[0] {
		bytes += len(e.data)
	}
	fmt.Printf("deadletter ingest goals: %d events per phase (mean %d B, %.0f %% poison), %d rounds, sync_always=%v, %d validator workers, batch %d\n",
		g.n, bytes/g.n, 100*g.poison, g.rounds, g.syncAlways, g.workers, g.batch)

	var rawA, ingA, rawB, ingB tally
	var committed uint64
	set := 0
	ingest := func(events []event, poison int, publish func() error) (phase, error) {
		committed += uint64(len(events) - poison)
		return validatorPhase(ctx, env.URL(), js, g.workers, noop.NewTracerProvider(), committed, uint64(poison),
			func() error { return nil }, publish, nil)
	}
	for r := range g.rounds {
		events, poison := perSet(set)
		set++
		rawFirst := r%2 == 0
		for step := range 2 {
			if (step == 0) == rawFirst {
				rate, cpu, err := timed(len(events), func() error {
					return publishAll(ctx, js, events, func(e event) string { return "raw." + strings.TrimPrefix(e.subject, "events.") })
				})
				if err != nil {
					return err
				}
				rawA.add(len(events), rate, cpu)
				fmt.Printf("round %d raw async publish:     %8.0f msg/s     %6.1f µs CPU/msg\n", r+1, rate, us(cpu))
			} else {
				ph, err := ingest(events, poison, func() error {
					return publishAll(ctx, js, events, func(e event) string { return e.subject })
				})
				if err != nil {
					return err
				}
				ingA.add(len(events), ph.rate, ph.cpuPerEvent)
				fmt.Printf("round %d ingest, async producer: %8.0f events/s  %6.1f µs CPU/event\n", r+1, ph.rate, us(ph.cpuPerEvent))
			}
		}
		if g.batch == 0 {
			continue
		}
		events, poison = perSet(set)
		set++
		for step := range 2 {
			if (step == 0) == rawFirst {
				rate, cpu, err := timed(len(events), func() error {
					return publishBatches(ctx, js, events, g.batch, g.batchPublishers, func(e event) string { return "rawb." + strings.TrimPrefix(e.subject, "events.") })
				})
				if err != nil {
					return err
				}
				rawB.add(len(events), rate, cpu)
				fmt.Printf("round %d raw batch publish:     %8.0f msg/s     %6.1f µs CPU/msg (RAW_ATOMIC)\n", r+1, rate, us(cpu))
			} else {
				ph, err := ingest(events, poison, func() error {
					return publishBatches(ctx, js, events, g.batch, g.batchPublishers, func(e event) string { return e.subject })
				})
				if err != nil {
					return err
				}
				ingB.add(len(events), ph.rate, ph.cpuPerEvent)
				fmt.Printf("round %d ingest, batch producer: %8.0f events/s  %6.1f µs CPU/event\n", r+1, ph.rate, us(ph.cpuPerEvent))
			}
		}
	}
	cpuNote := "CPU: user+sys of this process (server, validator, publisher)"
	if g.nodes > 1 {
		cpuNote = fmt.Sprintf("a %d-node cluster, every stream R%d; CPU: user+sys of the nodes' processes and of this one (validator, publisher)", g.nodes, g.nodes)
	}
	if g.rounds > 0 {
		fmt.Printf("async producer (one message per publish, async), %d rounds of %d, fsync %s; %s\n", g.rounds, g.n, fsyncMode(g.syncAlways), cpuNote)
		fmt.Printf("  raw async publish:   %8.0f msg/s    (rounds %s)\n", rawA.rate(), rawA.spread())
		fmt.Printf("  ingest:              %8.0f events/s (rounds %s), %.1f µs CPU/event\n", ingA.rate(), ingA.spread(), us(ingA.cpuPerEvent()))
		fmt.Printf("  ratio:               %8.1f %%\n", 100*ingA.rate()/rawA.rate())
		g.figure("raw_async", rawA.rate(), "msg/s", g.n)
		g.figure("raw_async_cpu", us(rawA.cpuPerEvent()), "us/msg", g.n)
		g.figure("ingest_async", ingA.rate(), "events/s", g.n)
		g.figure("ingest_async_cpu", us(ingA.cpuPerEvent()), "us/event", g.n)
	}
	if g.batch > 0 {
		fmt.Printf("batching producer (atomic batches of %d, %d in flight, jetstreamext.PublishMsgBatch AckFirst=false), %d rounds of %d, fsync %s\n",
			g.batch, g.batchPublishers, g.rounds, g.n, fsyncMode(g.syncAlways))
		fmt.Printf("  raw batch publish:   %8.0f msg/s    (rounds %s; into RAW_ATOMIC, a copy of EVENTS with allow_atomic)\n", rawB.rate(), rawB.spread())
		fmt.Printf("  ingest:              %8.0f events/s (rounds %s), %.1f µs CPU/event\n", ingB.rate(), ingB.spread(), us(ingB.cpuPerEvent()))
		fmt.Printf("  ratio:               %8.1f %%\n", 100*ingB.rate()/rawB.rate())
		g.figure("raw_batch", rawB.rate(), "msg/s", g.n)
		g.figure("ingest_batch", ingB.rate(), "events/s", g.n)
		g.figure("ingest_batch_cpu", us(ingB.cpuPerEvent()), "us/event", g.n)
	}
	if g.floors {
		if err := g.floorPhases(ctx, env, all[0]); err != nil {
			return err
		}
	}
	if g.redelivered {
		events, poison := perSet(set)
		set++
		if err := g.redeliveredPhase(ctx, env, events, poison); err != nil {
			return err
		}
		committed += uint64(len(events) - poison)
	}
	if !g.latency {
		return nil
	}
	rate := g.latencyRate
	source := "given"
	if rate == 0 {
		if len(ingA.rates) == 0 {
			return fmt.Errorf("-latency needs -rounds or -latency-rate")
		}
		rate, source = slices.Max(ingA.rates)/2, "half the highest async ingest round of this run"
	}
	events, poison := perSet(set)
	committed += uint64(len(events) - poison)
	stopProfile, err := benchenv.CPUProfile(g.cpuprofile)
	if err != nil {
		return err
	}
	lat, ph, err := latencyPhase(ctx, env, g.workers, events, poison, committed, rate)
	stopProfile()
	if err != nil {
		return err
	}
	fmt.Printf("open-loop latency, publish → LEDGER commit (the LEDGER message's stored timestamp), %d events at %.0f events/s (%s), fsync %s:\n",
		len(events), rate, source, fsyncMode(g.syncAlways))
	fmt.Printf("  p50 %s  p90 %s  p99 %s  max %s  (ingest kept up at %.0f events/s, %.1f µs CPU/event)\n",
		lat[0], lat[1], lat[2], lat[3], ph.rate, us(ph.cpuPerEvent))
	g.rounds = 1 // one latency phase
	for i, k := range []string{"p50", "p90", "p99", "max"} {
		g.figure("latency_"+k, float64(lat[i].Microseconds())/1000, "ms", len(events))
	}
	g.figure("latency_rate", rate, "events/s", len(events))
	if g.floors || latencyFloor {
		// The same load on the floors of the work a validator must do
		// (validation, then LEDGER and IDEMPOTENCY), written one event at
		// a time and in atomic batches: the lower p99 of the two is the
		// latency floor of this machine at this load.
		best := [4]time.Duration{}
		for _, f := range []struct {
			batch int
			what  string
		}{{0, "one event at a time"}, {validator.DefaultConfig().CommitBatch, "batched"}} {
			_, fph, fq, err := floorAt(ctx, env.URL(), env.JS, env.Options, events, f.batch, benchenv.FloorLedgerAndState, true, rate)
			if err != nil {
				return fmt.Errorf("latency floor: %w", err)
			}
			fmt.Printf("  floor, validation + LEDGER and IDEMPOTENCY %s, same rate: p50 %s  p90 %s  p99 %s  max %s  (%.1f µs CPU/event)\n",
				f.what, fq[0], fq[1], fq[2], fq[3], us(fph.cpuPerEvent))
			if best[2] == 0 || fq[2] < best[2] {
				best = fq
			}
		}
		for i, k := range []string{"p50", "p90", "p99", "max"} {
			g.figure("latency_floor_"+k, float64(best[i].Microseconds())/1000, "ms", len(events))
		}
	}
	return nil
}

// timed runs f and returns n over its duration and this process's CPU per
// one of the n.
func timed(n int, f func() error) (float64, time.Duration, error) {
	start, cpu0 := time.Now(), cpuTime()
	if err := f(); err != nil {
		return 0, 0, err
	}
	return float64(n) / time.Since(start).Seconds(), (cpuTime() - cpu0) / time.Duration(n), nil
}

// publishBatches publishes the events in atomic batches of size, at most
// inFlight batches at once, each with jetstreamext.PublishMsgBatch without
// waiting for the first message's ack (AckFirst false): one round trip and,
// under sync-always, one fsync per batch.
func publishBatches(ctx context.Context, js jetstream.JetStream, events []event, size, inFlight int, subject func(event) string) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	batches := (len(events) + size - 1) / size
	for range max(1, inFlight) {
		wg.Go(func() {
			for {
				b := int(next.Add(1) - 1)
				if b >= batches {
					return
				}
				part := events[b*size : min(len(events), (b+1)*size)]
				msgs := make([]*nats.Msg, len(part))
				for i, e := range part {
					msgs[i] = &nats.Msg{Subject: subject(e), Data: e.data, Header: nats.Header{}}
				}
				pctx, cancel := context.WithTimeout(ctx, time.Minute)
				_, err := jetstreamext.PublishMsgBatch(pctx, js, msgs, jetstreamext.BatchFlowControl{AckFirst: false})
				cancel()
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("batch %d: %w", b, err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// latencyPhase publishes the events open-loop at rate (a 1 ms ticker; each
// tick publishes, asynchronously, every event due by then) to a validator,
// and measures each valid event from just before its publish to its LEDGER
// message's stored timestamp (the key is the subject's last token), read
// from LEDGER once every event is committed (commitLatencies). It returns
// p50, p90, p99 and max.
func latencyPhase(ctx context.Context, env *benchenv.Env, workers int, events []event, poison int, want uint64, rate float64) ([4]time.Duration, phase, error) {
	var out [4]time.Duration
	g, err := gate.New(0)
	if err != nil {
		return out, phase{}, err
	}
	index := map[string]int{}
	for i, e := range events {
		if env, err := g.Check(e.subject, e.data); err == nil {
			index[env.IdempotencyKey] = i
		}
	}
	sent := make([]atomic.Int64, len(events)) // unix nanoseconds before publish
	ledger, err := env.JS.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return out, phase{}, err
	}
	info, err := ledger.Info(ctx)
	if err != nil {
		return out, phase{}, err
	}
	ph, err := validatorPhase(ctx, env.URL(), env.JS, workers, noop.NewTracerProvider(), want, uint64(poison),
		func() error { return nil },
		func() error {
			return publishOpenLoop(ctx, env.JS, events, rate, func(e event) string { return e.subject }, sent)
		}, nil)
	if err != nil {
		return out, phase{}, err
	}
	lat, err := commitLatencies(ctx, env.JS, subjects.LedgerStream, info.State.LastSeq+1, len(index), func(key string) (int, bool) {
		i, ok := index[key]
		return i, ok
	}, sent)
	if err != nil {
		return out, phase{}, err
	}
	return quantiles(lat), ph, nil
}

// commitLatencies reads stream from sequence from on until it has seen
// want messages whose key (the subject's last token) event maps to an
// event, and returns for each the time from that event's publish (sent,
// unix nanoseconds) to the message's stored timestamp. It reads after the
// phase, not during it, so the observer takes no CPU from what it
// measures. With -latency-series it also prints the slowest commit of the
// events sent in each 100 ms (where the tail comes from).
func commitLatencies(ctx context.Context, js jetstream.JetStream, stream string, from uint64, want int, event func(key string) (int, bool), sent []atomic.Int64) ([]time.Duration, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	lat := make([]time.Duration, 0, want)
	var series [][2]int64 // (sent, latency) of every event, with -latency-series
	deadline := time.AfterFunc(time.Minute, it.Stop)
	defer deadline.Stop()
	for len(lat) < want {
		m, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("latency: read %d of %d commits from %s: %w", len(lat), want, stream, err)
		}
		s := m.Subject()
		i, ok := event(s[strings.LastIndexByte(s, '.')+1:])
		meta, err := m.Metadata()
		if !ok || err != nil {
			continue
		}
		at := sent[i].Load()
		lat = append(lat, meta.Timestamp.Sub(time.Unix(0, at)))
		if latencySeries {
			series = append(series, [2]int64{at, int64(lat[len(lat)-1])})
		}
	}
	if len(series) > 0 {
		slices.SortFunc(series, func(a, b [2]int64) int { return int(a[0] - b[0]) })
		t0 := series[0][0]
		bucket := map[int64]time.Duration{}
		for _, d := range series {
			k := (d[0] - t0) / int64(100*time.Millisecond)
			bucket[k] = max(bucket[k], time.Duration(d[1]))
		}
		fmt.Print("  slowest commit of the events sent in each 100 ms:")
		for k := int64(0); k <= (series[len(series)-1][0]-t0)/int64(100*time.Millisecond); k++ {
			fmt.Printf(" %s", bucket[k].Round(time.Millisecond))
		}
		fmt.Println()
	}
	return lat, nil
}

// quantiles sorts lat and returns its p50, p90, p99 and max.
func quantiles(lat []time.Duration) [4]time.Duration {
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(10 * time.Microsecond)
	}
	return [4]time.Duration{q(0.50), q(0.90), q(0.99), lat[len(lat)-1].Round(10 * time.Microsecond)}
}

// publishOpenLoop publishes the events asynchronously at rate events/s
// (in bursts each millisecond, whatever the acknowledgements do), storing
// in sent[i] the time just before event i is published, and waits for
// every acknowledgement.
func publishOpenLoop(ctx context.Context, js jetstream.JetStream, events []event, rate float64, subject func(event) string, sent []atomic.Int64) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start := time.Now()
	for next := 0; next < len(events); {
		<-t.C
		due := min(len(events), int(rate*time.Since(start).Seconds()))
		for ; next < due; next++ {
			e := events[next]
			sent[next].Store(time.Now().UnixNano())
			if _, err := js.PublishAsync(subject(e), e.data, stallWait); err != nil {
				return err
			}
		}
	}
	return waitAcks(ctx, js)
}

// makeMixedEvents builds sets of n distinct events each, a share poison of
// every set invalid (evenly spread: event i of a set is invalid when
// floor((i+1)·poison) passes floor(i·poison); sample.Set.Invalid, each a
// distinct event), the rest valid as makeEvents builds them. It returns the
// sets and how many invalid events each holds.
func makeMixedEvents(sets, n int, poison float64) ([][]event, []int, error) {
	valid, err := makeEvents(sets * n)
	if err != nil {
		return nil, nil, err
	}
	set, err := sample.Load()
	if err != nil {
		return nil, nil, err
	}
	out, counts, bad := make([][]event, sets), make([]int, sets), 0
	for k := range sets {
		out[k] = valid[k*n : (k+1)*n]
		for i := range n {
			if int(float64(i+1)*poison) > int(float64(i)*poison) {
				e := set.Invalid(bad)
				bad++
				out[k][i] = event{subject: e.Subject, data: e.Data}
				counts[k]++
			}
		}
	}
	return out, counts, nil
}

// redeliveredPhase measures the path of events redelivered after a
// validator died between its LEDGER writes and its marks: the LEDGER
// message of every valid event is written first (in batches, as that
// validator did), then the events are published and ingested. Each is
// found in LEDGER before its group's batch and takes the per-event path:
// adopt the message, mark the key.
func (g goalConfig) redeliveredPhase(ctx context.Context, env *benchenv.Env, events []event, poison int) error {
	gt, err := gate.New(0)
	if err != nil {
		return err
	}
	var msgs []*nats.Msg
	for _, e := range events {
		en, err := gt.Check(e.subject, e.data)
		if err != nil {
			continue
		}
		m := nats.NewMsg(subjects.Ledger(en.Domain, en.IdempotencyKey))
		m.Data = e.data
		m.Header.Set(envelope.IdempotencyKey, en.IdempotencyKey)
		msgs = append(msgs, m)
	}
	for start := 0; start < len(msgs); start += 500 {
		if _, err := batch.Publish(ctx, env.JS, msgs[start:min(len(msgs), start+500)]); err != nil {
			return fmt.Errorf("LEDGER messages of the dead validator: %w", err)
		}
	}
	ledger, err := env.JS.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return err
	}
	info, err := ledger.Info(ctx)
	if err != nil {
		return err
	}
	ph, err := validatorPhaseAdopting(ctx, env.URL(), env.JS, g.workers, noop.NewTracerProvider(), info.State.Msgs, uint64(poison), uint64(len(msgs)),
		func() error { return nil }, func() error {
			return publishAll(ctx, env.JS, events, func(e event) string { return e.subject })
		}, nil)
	if err != nil {
		return err
	}
	fmt.Printf("redelivered after a crash (LEDGER written, marks missing: the per-event path), %d events, fsync %s: %8.0f events/s, %.1f µs CPU/event\n",
		len(events), fsyncMode(g.syncAlways), ph.rate, us(ph.cpuPerEvent))
	r := g
	r.rounds = 1
	r.figure("ingest_redelivered", ph.rate, "events/s", len(events))
	r.figure("ingest_redelivered_cpu", us(ph.cpuPerEvent), "us/event", len(events))
	return nil
}

// floorPhases measures, on the goal run's server, the floors of the best
// design with the payloads of the first round: LEDGER and IDEMPOTENCY in
// atomic batches of the events ready together (what the validator's
// batcher writes, with no validation, key derivation or tracing), LEDGER
// only, and consume-and-ack only (the ceiling of any design that consumes
// EVENTS), beside the one-event-at-a-time floor; the two batched floors
// again with the validation gate charged (work no design can drop); and
// the same writes pipelined (every message of a group its own asynchronous
// publish, no atomic batch), which a replicated stream's leader packs into
// its append entries without staging a batch.
func (g goalConfig) floorPhases(ctx context.Context, env *benchenv.Env, events []event) error {
	b := validator.DefaultConfig().CommitBatch
	for _, f := range []struct {
		key      string
		batch    int
		writes   benchenv.FloorWrites
		validate bool
		what     string
	}{
		{"floor_one", 0, benchenv.FloorLedgerAndState, false, "LEDGER and IDEMPOTENCY, one event at a time"},
		{"floor_batched", b, benchenv.FloorLedgerAndState, false, "LEDGER and IDEMPOTENCY in atomic batches"},
		{"floor_ledger", b, benchenv.FloorLedgerOnly, false, "LEDGER only, batched"},
		{"floor_ack", b, benchenv.FloorAckOnly, false, "consume and ack only"},
		{"floor_validated", b, benchenv.FloorLedgerAndState, true, "validation gate + LEDGER and IDEMPOTENCY batched"},
		{"floor_validated_ledger", b, benchenv.FloorLedgerOnly, true, "validation gate + LEDGER only, batched"},
		{"floor_pipelined", b, benchenv.FloorPipelined, false, "LEDGER and IDEMPOTENCY pipelined, no batch"},
		{"floor_ledger_pipelined", b, benchenv.FloorLedgerPipelined, false, "LEDGER only, pipelined"},
		{"floor_validated_pipelined", b, benchenv.FloorPipelined, true, "validation gate + LEDGER and IDEMPOTENCY pipelined"},
	} {
		_, ph, err := floor(ctx, env.URL(), env.JS, env.Options, events, f.batch, f.writes, f.validate)
		if err != nil {
			return fmt.Errorf("%s: %w", f.key, err)
		}
		fmt.Printf("floor, %-44s %8.0f events/s  %6.1f µs CPU/event\n", f.what+":", ph.rate, us(ph.cpuPerEvent))
		g.figure(f.key, ph.rate, "events/s", len(events))
		g.figure(f.key+"_cpu", us(ph.cpuPerEvent), "us/event", len(events))
	}
	return nil
}
