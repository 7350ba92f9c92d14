// Command ingest measures deadletter's ingest path against raw JetStream on
// one embedded server and one set of payloads, and prints three figures:
// the raw async-publish rate into a stream configured like EVENTS, the
// end-to-end ingest rate (publish → validate → idempotent commit to LEDGER),
// and their ratio. `make bench` runs it.
//
// With -trace-endpoint (an OTLP/HTTP base URL, e.g. the Jaeger of
// `make jaeger-run`: http://127.0.0.1:4318) the ingest phase is traced at
// 100 % sampling as in production (batch span processor): the publisher
// starts a producer span per event and injects its context, the validator
// its validate span; the spans are flushed after the
// measurement and the flush time is printed. With -trace-sink the spans go
// instead to a trace sink in a child process (sink.go), a stand-in for a
// collector on another machine, which counts them: the figure then is what
// tracing costs the ingest process itself, and the run shows that no span
// was dropped. Jaeger on the same two cores also takes CPU from the ingest.
//
// With -trace-ab N (and a sink or endpoint) the traced phase gives way to
// N rounds of an untraced and a traced phase in ABBA order in one process
// (compare.go), which prints tracing's cost directly: in a traced phase the
// validator traces, and so does the publisher unless -trace-publisher=false.
//
// With -rounds (and -batch, -poison, -latency) it runs instead the goal
// mode of issue #17 (goals.go): interleaved rounds of raw publishing and
// ingest with the same producer mode, the open-loop latency phase, and
// FIGURE lines for tests/bench/goals.
//
// With -floor it also measures the store-bound floor (floor.go): the same
// consumer settings and per-event stores with no validation at all, the
// ceiling no validator code can pass on this machine.
package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/runner"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

func main() {
	n := flag.Int("n", 50000, "events per phase")
	sync := flag.Bool("sync-always", false, "fsync every write (sync_interval: always)")
	workers := flag.Int("workers", validator.DefaultConfig().Workers, "validator workers")
	flag.BoolVar(&floorConsumerR1Memory, "floor-consumer-r1-memory", false, "the floors' consumer keeps its state in memory on one server (Replicas 1), whatever the stream's replicas")
	flag.BoolVar(&latencyFloor, "latency-floor", false, "with -latency: also the latency floors at the same rate (implied by -floors)")
	flag.BoolVar(&latencySeries, "latency-series", false, "with -latency: also print the slowest commit of the events sent in each 100 ms (where the tail comes from)")
	flag.IntVar(&commitBatch, "commit-batch", 0, "the validator's CommitBatch (0: its default; 1: one event at a time)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the ingest phase (goal mode: the latency phase) to this file, its execution trace to FILE.trace and the heap live at its end to FILE.heap")
	traceEndpoint := flag.String("trace-endpoint", "", "trace the ingest phase at 100% sampling, exporting OTLP/HTTP to this base URL (e.g. http://127.0.0.1:4318)")
	traceSink := flag.Bool("trace-sink", false, "trace the ingest phase at 100% sampling, exporting to a trace sink in a child process (a stand-in for a collector on another machine) that counts the spans it receives")
	tracePublisher := flag.Bool("trace-publisher", true, "with -trace-endpoint or -trace-sink, also trace the publisher (a producer span per event); false: only the validator's spans, roots of their traces")
	remotePublisher := flag.Bool("remote-publisher", false, "with -trace-publisher: the publisher traces on another machine: its spans are not made here, each event carries a sampled traceparent made up front (the validator's spans continue those traces)")
	abRounds := flag.Int("trace-ab", 0, "with -trace-sink or -trace-endpoint: instead of one traced phase, this many rounds of an untraced and a traced phase (the validator and, with -trace-publisher, the publisher traced) in ABBA order, each of -n events, in one process (compare.go)")
	floorFlag := flag.Bool("floor", false, "also measure the store-bound floor: the same stores and consumer settings with no validation (floor.go)")
	rounds := flag.Int("rounds", 0, "goal mode of issue #17 (goals.go): this many interleaved rounds (ABBA) of raw async publish and async-producer ingest, each of -n events, with figures for tests/bench/goals")
	batch := flag.Int("batch", 0, "goal mode: also the batching producer, raw (into RAW_ATOMIC) and ingest, in atomic batches of this many events")
	batchPublishers := flag.Int("batch-publishers", 4, "goal mode: the batching producer's batches in flight at once")
	poison := flag.Float64("poison", 0, "goal mode: the share of invalid (poison) events in every phase")
	latency := flag.Bool("latency", false, "goal mode: add the open-loop latency phase (publish → LEDGER commit) of -n events")
	redelivered := flag.Bool("redelivered", false, "goal mode: add the phase of events redelivered after a crash (LEDGER written, marks missing: the per-event path)")
	floors := flag.Bool("floors", false, "goal mode: add the floors of the best design (batched writes, LEDGER only, consume and ack only, and one at a time), no validation")
	latencyRate := flag.Float64("latency-rate", 0, "goal mode: the latency phase's publish rate in events/s (0: half the highest async ingest round of this run)")
	serveSinkFlag := flag.Bool("serve-sink", false, "internal: run the trace sink")
	serveNode := flag.Bool(benchenv.ServeNodeFlag, false, "internal: run one node of -cluster's cluster (arguments after the flags)")
	serverProcess := flag.Bool("server-process", false, "goal mode: the server runs in a process of its own, as a deployment runs it (the validator and the publisher stay in this one, with their own collector), instead of embedded in this process")
	nodes := flag.Int("cluster", 1, "goal mode: run the phases on a cluster of this many nodes on this machine (each a process of its own), every stream with that many replicas (issue #17's goal 2: -cluster 3 -sync-always)")
	flag.Parse()
	if *serveNode {
		if err := benchenv.ServeNode(flag.Args()); err != nil {
			log.Fatal(err)
		}
		return
	}
	runner.TuneGC(runner.DefaultGCPercent) // as deadletter's processes do
	if *serveSinkFlag {
		if err := serveSink(); err != nil {
			log.Fatal(err)
		}
		return
	}
	storeSyncAlways, storeReplicas = *sync, max(1, *nodes)
	if *rounds > 0 || *latency {
		g := goalConfig{n: *n, rounds: *rounds, workers: *workers, syncAlways: *sync, batch: *batch, batchPublishers: *batchPublishers,
			poison: *poison, latency: *latency, latencyRate: *latencyRate, redelivered: *redelivered, floors: *floors, cpuprofile: *cpuprofile, nodes: *nodes, serverProcess: *serverProcess}
		if err := runGoals(context.Background(), g); err != nil {
			log.Fatal(err)
		}
		return
	}
	var snk *sink
	if *traceSink {
		if *traceEndpoint != "" {
			log.Fatal("-trace-endpoint and -trace-sink are exclusive")
		}
		var err error
		if snk, err = startSink(); err != nil {
			log.Fatal(err)
		}
		*traceEndpoint = snk.url
	}
	if *abRounds > 0 {
		if *traceEndpoint == "" {
			log.Fatal("-trace-ab needs -trace-sink or -trace-endpoint")
		}
	}
	err := run(*n, *sync, *workers, *cpuprofile, *traceEndpoint, *tracePublisher, *remotePublisher, *floorFlag, *abRounds, snk)
	if snk != nil {
		_ = snk.close()
	}
	if err != nil {
		log.Fatal(err)
	}
}

// cpuTime is the CPU time so far of every process of the bench's system:
// this one, and the cluster's nodes in goal mode with -cluster.
var cpuTime = benchenv.CPUTime

// floorConsumerR1Memory is -floor-consumer-r1-memory.
var floorConsumerR1Memory bool

// latencySeries is -latency-series; latencyFloor is -latency-floor.
var latencySeries, latencyFloor bool

// commitBatch is -commit-batch, the validators' CommitBatch (0: default).
var commitBatch int

// storeSyncAlways is -sync-always: the validators are told whether the
// server fsyncs every write (streams.Options.SyncAlways), as an operator
// tells them with DEADLETTER_SYNC_ALWAYS.
var storeSyncAlways bool

// storeReplicas is the streams' replicas (-cluster), which the validators
// are told as an operator tells them with DEADLETTER_REPLICAS.
var storeReplicas int

type event struct {
	subject string
	data    []byte
}

func run(n int, syncAlways bool, workers int, cpuprofile, traceEndpoint string, tracePublisher, remotePublisher, withFloor bool, abRounds int, snk *sink) error {
	ctx := context.Background()
	env, err := benchenv.Start(ctx, syncAlways)
	if err != nil {
		return err
	}
	defer env.Close()
	srv, js, o := env.Server, env.JS, env.Options
	raw := streams.Events(o)
	raw.Name, raw.Subjects, raw.Sources = "RAW", []string{"raw.>"}, nil
	if _, err := js.CreateStream(ctx, raw); err != nil {
		return err
	}
	all, err := makeEvents(n * max(1, 2*abRounds))
	if err != nil {
		return err
	}
	events := all[:n]
	var bytes int
	for _, e := range events {
		bytes += len(e.data)
	}
	fmt.Printf("deadletter ingest benchmark: %d events (mean %d B), %d CPUs, sync_always=%v, %d validator workers, tracing=%s\n",
		n, bytes/n, runtime.NumCPU(), syncAlways, workers, orOff(traceEndpoint))
	tracing, err := newTracing(ctx, traceEndpoint, tracePublisher, n)
	tracing.remote = tracePublisher && remotePublisher
	if err != nil {
		return err
	}

	// Phase 1: raw JetStream async publish of the same payloads.
	start := time.Now()
	if err := publishAll(ctx, js, events, func(e event) string { return "raw." + strings.TrimPrefix(e.subject, "events.") }); err != nil {
		return err
	}
	rawRate := float64(n) / time.Since(start).Seconds()
	var floorOne phase
	floorBatched := make([]phase, 3) // by benchenv.FloorWrites
	if withFloor {
		if _, floorOne, err = floor(ctx, srv.ClientURL(), js, o, events, 0, 0, false); err != nil {
			return err
		}
		for w := range floorBatched {
			if _, floorBatched[w], err = floor(ctx, srv.ClientURL(), js, o, events, validator.DefaultConfig().CommitBatch, benchenv.FloorWrites(w), false); err != nil {
				return err
			}
		}
	}

	if abRounds > 0 {
		var sets [][]event
		for i := range 2 * abRounds {
			sets = append(sets, all[i*n:(i+1)*n])
		}
		fmt.Printf("raw JetStream async publish: %8.0f msg/s\n", rawRate)
		if err := compareTracing(ctx, srv.ClientURL(), js, workers, tracing, sets, snk); err != nil {
			return err
		}
		if err := tracing.shutdown(ctx); err != nil {
			return err
		}
		if snk != nil {
			got, err := snk.spans(ctx)
			if err != nil {
				return err
			}
			want := int64(abRounds * n)
			if tracing.on && !tracing.remote {
				want *= 2 // the publisher's spans too
			}
			fmt.Printf("spans received by the sink: %d of %d exported (%d dropped)\n", got, want, want-got)
		}
		return nil
	}

	// Phase 2: the same payloads through the validator into LEDGER.
	var sinkStart time.Duration
	var stopProfile func()
	ph, err := validatorPhase(ctx, srv.ClientURL(), js, workers, tracing.validator, uint64(n), 0,
		func() error {
			if stopProfile, err = benchenv.CPUProfile(cpuprofile); err != nil {
				return err
			}
			if snk != nil {
				sinkStart, err = snk.cpu(ctx)
			}
			return err
		},
		func() error { return tracing.publishAll(ctx, js, events) }, nil)
	if stopProfile != nil {
		stopProfile()
	}
	if err != nil {
		return err
	}
	ingestRate, cpuPerEvent := ph.rate, ph.cpuPerEvent
	if traceEndpoint != "" {
		flushStart := time.Now()
		if err := tracing.shutdown(ctx); err != nil {
			return err
		}
		fmt.Printf("spans flushed after the run in %v\n", time.Since(flushStart).Round(time.Millisecond))
		if snk != nil {
			got, err := snk.spans(ctx)
			if err != nil {
				return err
			}
			// Each event: the validator's validate span (which stands for
			// the commit too: no downstream), and the publisher's
			// producer span when it traces.
			want := int64(n)
			if tracePublisher {
				want += int64(n)
			}
			fmt.Printf("spans received by the sink: %d of %d exported (%d dropped)\n", got, want, want-got)
			sinkCPU, err := snk.cpu(ctx)
			if err != nil {
				return err
			}
			fmt.Printf("trace sink CPU: %v during the run and the flush (%.1f µs per event)\n",
				(sinkCPU - sinkStart).Round(time.Millisecond), float64((sinkCPU-sinkStart).Nanoseconds())/1000/float64(n))
		}
	}
	fmt.Printf("raw JetStream async publish: %8.0f msg/s\n", rawRate)
	fmt.Printf("end-to-end ingest:           %8.0f events/s (publish → validate → commit to LEDGER)\n", ingestRate)
	fmt.Printf("ratio:                       %8.1f %%\n", 100*ingestRate/rawRate)
	if withFloor {
		fmt.Printf("store-bound floor:           %8.0f events/s (%.1f %% of raw, %.1f µs CPU/event: the same consumer and stores, no validation, one event at a time)\n",
			floorOne.rate, 100*floorOne.rate/rawRate, float64(floorOne.cpuPerEvent.Nanoseconds())/1000)
		for w, what := range []string{"LEDGER and IDEMPOTENCY in atomic batches of the events ready together", "LEDGER only, batched", "no writes: consume and ack only"} {
			f := floorBatched[w]
			fmt.Printf("floor, %-22s%8.0f events/s (%.1f %% of raw, %.1f µs CPU/event: %s)\n", fmt.Sprintf("%d:", w), f.rate, 100*f.rate/rawRate, float64(f.cpuPerEvent.Nanoseconds())/1000, what)
		}
	}
	fmt.Printf("CPU per ingested event:      %8.1f µs (user+sys of this process: server, validator, publisher)\n",
		float64(cpuPerEvent.Nanoseconds())/1000)
	return nil
}

func orOff(endpoint string) string {
	if endpoint == "" {
		return "off"
	}
	return "100% to " + endpoint
}

// tracing is the bench's tracing: no-op providers when off.
type tracing struct {
	publisher, validator trace.TracerProvider
	shutdown             func(context.Context) error
	// on: the publisher traces (a span per event, context in the headers).
	on bool
	// remote: the publisher traces elsewhere: the events carry a
	// traceparent, but no span is made here (compareTracing only).
	remote bool
}

// newTracing sets up a publisher and a validator provider exporting to
// endpoint at 100 % sampling with the batch span processor (production's),
// or no-ops when endpoint is empty.
//
// The publisher stands for many publishers: it sends a phase's n events as
// fast as the server takes them, ending n producer spans within a second or
// so, so its queue holds them all (deadletter's processes end spans at the
// pace of the events they consume, and keep the default queue).
func newTracing(ctx context.Context, endpoint string, tracePublisher bool, n int) (*tracing, error) {
	if endpoint == "" {
		return &tracing{publisher: noop.NewTracerProvider(), validator: noop.NewTracerProvider(),
			shutdown: func(context.Context) error { return nil }}, nil
	}
	pub, shutP, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "bench-publisher", Endpoint: endpoint, Sampler: sdktrace.AlwaysSample(),
		MaxQueueSize: max(telemetry.DefaultMaxQueueSize, n)})
	if err != nil {
		return nil, err
	}
	val, shutV, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "deadletter-validator", Endpoint: endpoint, Sampler: sdktrace.AlwaysSample()})
	if err != nil {
		return nil, err
	}
	if !tracePublisher {
		pub = noop.NewTracerProvider()
	}
	return &tracing{publisher: pub, validator: val, on: tracePublisher, shutdown: func(ctx context.Context) error {
		return errors.Join(shutP(ctx), shutV(ctx))
	}}, nil
}

// publishAll publishes the events to their subjects, each inside a producer
// span whose context travels in the headers when tracing is on.
func (t *tracing) publishAll(ctx context.Context, js jetstream.JetStream, events []event) error {
	if !t.on {
		return publishAll(ctx, js, events, func(e event) string { return e.subject })
	}
	tr := telemetry.NewTracer(t.publisher, nil)
	for _, e := range events {
		msg := nats.NewMsg(e.subject)
		msg.Data = e.data
		_, span := tr.StartPublish(ctx, msg)
		_, err := js.PublishMsgAsync(msg, stallWait)
		span.End() // the span covers the asynchronous send, not its ack
		if err != nil {
			return err
		}
	}
	return waitAcks(ctx, js)
}

// phase is what one validator phase measured.
type phase struct {
	rate        float64       // events committed per second
	cpuPerEvent time.Duration // user+sys CPU of this process per event
}

// validatorPhase runs a validator traced by tp (a no-op provider: untraced)
// on the EVENTS consumer, calls ready once its consumer exists, then
// publish, and measures until LEDGER holds want messages, the validator has
// routed poison invalid events to FAILURES, and finish (when not nil) has
// returned; it stops the validator and checks that it committed every valid
// event of the phase and failed every invalid one. The rate counts both.
func validatorPhase(ctx context.Context, url string, js jetstream.JetStream, workers int, tp trace.TracerProvider,
	want, poison uint64, ready, publish, finish func() error) (phase, error) {
	return validatorPhaseAdopting(ctx, url, js, workers, tp, want, poison, 0, ready, publish, finish)
}

// validatorPhaseAdopting is validatorPhase where adopt more events are
// published whose LEDGER messages exist already (a validator died after
// writing them, before their marks): the validator adopts and marks them,
// and counts them committed.
func validatorPhaseAdopting(ctx context.Context, url string, js jetstream.JetStream, workers int, tp trace.TracerProvider,
	want, poison, adopt uint64, ready, publish, finish func() error) (phase, error) {
	ledger, err := js.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return phase{}, err
	}
	info, err := ledger.Info(ctx)
	if err != nil {
		return phase{}, err
	}
	n := want - info.State.Msgs
	vnc, err := nats.Connect(url)
	if err != nil {
		return phase{}, err
	}
	defer vnc.Close()
	cfg := validator.DefaultConfig()
	cfg.Workers = workers
	cfg.Streams.SyncAlways, cfg.Streams.Replicas = storeSyncAlways, storeReplicas
	if commitBatch > 0 {
		cfg.CommitBatch = commitBatch
	}
	cfg.Provision = false
	cfg.TracerProvider = tp
	v, err := validator.New(vnc, cfg, nil)
	if err != nil {
		return phase{}, err
	}
	vctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- v.Run(vctx) }()
	if err := waitConsumer(ctx, js); err != nil {
		return phase{}, err
	}
	if err := ready(); err != nil {
		return phase{}, err
	}
	start := time.Now()
	cpuStart := cpuTime()
	if err := publish(); err != nil {
		return phase{}, err
	}
	for {
		info, err := ledger.Info(ctx)
		if err != nil {
			return phase{}, err
		}
		if st := v.Stats(); info.State.Msgs >= want && st.Structural >= poison && st.Committed >= n+adopt {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return phase{}, fmt.Errorf("ingest stalled at %d of %d (stats %+v)", info.State.Msgs, want, v.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if finish != nil {
		if err := finish(); err != nil {
			return phase{}, err
		}
	}
	ph := phase{
		rate:        float64(n+adopt+poison) / time.Since(start).Seconds(),
		cpuPerEvent: (cpuTime() - cpuStart) / time.Duration(n+adopt+poison),
	}
	stop()
	if err := <-done; err != nil {
		return phase{}, err
	}
	if st := v.Stats(); st.Committed != n+adopt || st.Structural != poison || st.Transient != 0 {
		return phase{}, fmt.Errorf("unexpected validator stats %+v", st)
	}
	return ph, nil
}

// publishAll publishes every event asynchronously and waits for all acks.
// publishRemote publishes the events as a publisher tracing on another
// machine would: each with a sampled traceparent of its own (made before
// the call, as that publisher's spans are not this process's work).
func publishRemote(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) error {
	for _, m := range msgs {
		if _, err := js.PublishMsgAsync(m, stallWait); err != nil {
			return err
		}
	}
	return waitAcks(ctx, js)
}

// withTraceparents returns the events as messages, each with a sampled
// traceparent of a new trace.
func withTraceparents(events []event) []*nats.Msg {
	msgs := make([]*nats.Msg, len(events))
	for i, e := range events {
		var tid [16]byte
		var sid [8]byte
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64()|1)
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64()|1)
		m := nats.NewMsg(e.subject)
		m.Data = e.data
		m.Header.Set("traceparent", "00-"+hex.EncodeToString(tid[:])+"-"+hex.EncodeToString(sid[:])+"-01")
		msgs[i] = m
	}
	return msgs
}

func publishAll(ctx context.Context, js jetstream.JetStream, events []event, subject func(event) string) error {
	for _, e := range events {
		if _, err := js.PublishAsync(subject(e), e.data, stallWait); err != nil {
			return err
		}
	}
	return waitAcks(ctx, js)
}

// stallWait lets a publisher that is 4000 acknowledgements ahead wait up to
// 5 s for the server (the default, 200 ms, fails the run on a loaded
// machine with ErrTooManyStalledMsgs).
var stallWait = jetstream.WithStallWait(5 * time.Second)

// waitAcks waits for every outstanding asynchronous publish acknowledgement.
func waitAcks(ctx context.Context, js jetstream.JetStream) error {
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("publish acks timed out")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func waitConsumer(ctx context.Context, js jetstream.JetStream) error {
	for range 500 {
		if _, err := js.Consumer(ctx, subjects.EventsStream, subjects.ValidatorConsumer); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("validator consumer never appeared")
}

// makeEvents builds n distinct valid events, round-robin over every valid
// example of the three domains (package sample), each with its own identity.
func makeEvents(n int) ([]event, error) {
	set, err := sample.Load()
	if err != nil {
		return nil, err
	}
	out := make([]event, 0, n)
	for i := range n {
		e, err := set.Valid(i)
		if err != nil {
			return nil, err
		}
		out = append(out, event{subject: e.Subject, data: e.Data})
	}
	return out, nil
}
