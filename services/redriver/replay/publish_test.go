package replay

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// replayMsg is replay i of a test as publishAndObserve builds it: on its
// own redriven subject (chain <prefix>_<i>, replay 1), expecting that
// subject empty, with its Nats-Msg-Id.
func replayMsg(prefix string, i int) *nats.Msg {
	m := nats.NewMsg(subjects.Redriven("pharmacy", "dispense", fmt.Sprintf("%s_%d", prefix, i), 1))
	m.Data = fmt.Appendf(nil, `{"n":%d}`, i)
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", prefix, i))
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	return m
}

// TestReplayBatcher: replays published at once by many lanes are stored in
// atomic batches on EVENTS, each acknowledged with its own sequence, each
// stored once; a batch the server refuses (a replay already stored on its
// subject: a resumed replay) falls back to one publish per replay, where
// the stored one resolves to its sequence and the others are stored once;
// a stopped batcher writes each replay alone.
func TestReplayBatcher(t *testing.T) {
	js, replays, ctx := newEvents(t)
	stored := func(t *testing.T) uint64 {
		t.Helper()
		info, err := replays.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	// publishAll publishes msgs from one goroutine each and returns their
	// acknowledgements.
	publishAll := func(t *testing.T, b *replayBatcher, msgs []*nats.Msg) []*jetstream.PubAck {
		t.Helper()
		acks := make([]*jetstream.PubAck, len(msgs))
		errs := make([]error, len(msgs))
		var wg sync.WaitGroup
		for i, m := range msgs {
			wg.Go(func() { acks[i], errs[i] = b.publish(ctx, m) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replay %d: %v", i, err)
			}
		}
		return acks
	}
	for _, tc := range []struct {
		name string
		// earlier are published alone first (replays already stored).
		earlier    []int
		n          int
		stopped    bool
		wantNew    int
		wantBatch  bool
		wantUnbatc bool
	}{
		{name: "many lanes at once", n: 300, wantNew: 300, wantBatch: true},
		{name: "a resumed replay in the batch", earlier: []int{7, 150}, n: 300, wantNew: 298, wantUnbatc: true},
		{name: "one lane", n: 1, wantNew: 1},
		{name: "stopped", n: 20, stopped: true, wantNew: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMetrics()
			b := newReplayBatcher(js, slog.New(slog.DiscardHandler), m, 1000, 0, streams.Options{})
			rctx, stop := context.WithCancel(ctx)
			t.Cleanup(stop)
			prefix := fmt.Sprintf("t%d", time.Now().UnixNano())
			earlierSeq := map[int]uint64{}
			for _, i := range tc.earlier {
				ack, err := publishAlone(ctx, js, replayMsg(prefix, i))
				if err != nil {
					t.Fatal(err)
				}
				earlierSeq[i] = ack.Sequence
			}
			before := stored(t)
			msgs := make([]*nats.Msg, tc.n)
			for i := range msgs {
				msgs[i] = replayMsg(prefix, i)
			}
			var acks []*jetstream.PubAck
			switch {
			case tc.stopped:
				wait := b.run(rctx)
				stop()
				wait()
				acks = publishAll(t, b, msgs)
			case tc.n == 1:
				wait := b.run(rctx)
				t.Cleanup(func() { stop(); wait() })
				acks = publishAll(t, b, msgs)
			default:
				// The lanes' replays queue up behind the first group's first,
				// as a drain's do while a batch is in flight.
				b.beforeGather = holdFirstGroup(b, tc.n-1)
				wait := b.run(rctx)
				t.Cleanup(func() { stop(); wait() })
				acks = publishAll(t, b, msgs)
			}
			if got := stored(t) - before; got != uint64(tc.wantNew) {
				t.Fatalf("EVENTS gained %d messages, want %d", got, tc.wantNew)
			}
			seen := map[uint64]int{}
			for i, ack := range acks {
				if ack.Stream != subjects.EventsStream {
					t.Fatalf("replay %d acked by %q", i, ack.Stream)
				}
				if prev, ok := seen[ack.Sequence]; ok {
					t.Fatalf("replays %d and %d share sequence %d", prev, i, ack.Sequence)
				}
				seen[ack.Sequence] = i
				if want, ok := earlierSeq[i]; ok && ack.Sequence != want {
					t.Fatalf("resumed replay %d acked at %d, stored at %d", i, ack.Sequence, want)
				}
				got, err := replays.GetMsg(ctx, ack.Sequence)
				if err != nil {
					t.Fatal(err)
				}
				if string(got.Data) != string(msgs[i].Data) || got.Header.Get(jetstream.MsgIDHeader) != msgs[i].Header.Get(jetstream.MsgIDHeader) {
					t.Fatalf("sequence %d holds another replay than %d", ack.Sequence, i)
				}
			}
			if got := testutil.ToFloat64(m.Batches) > 0; got != tc.wantBatch {
				t.Errorf("batches stored: %v, want %v", got, tc.wantBatch)
			}
			if got := testutil.ToFloat64(m.Unbatched) > 0; got != tc.wantUnbatc {
				t.Errorf("batches refused: %v, want %v", got, tc.wantUnbatc)
			}
		})
	}
}

// holdFirstGroup returns a beforeGather hook that, for the first group
// only, waits (up to 10 s) until queued more replays wait behind its
// first, so that they all go in one group.
func holdFirstGroup(b *replayBatcher, queued int) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			natstest.Until(10*time.Second, time.Millisecond, func() bool { return b.queued() >= queued })
		})
	}
}

// preferBatches makes c prefer batches (batches) or one publish each, by
// measured costs so far apart that it does not explore the other way
// within a test.
func preferBatches(c *batch.Chooser, batches bool) {
	cheap, dear := time.Duration(batch.MinGroup), time.Duration(math.MaxInt64)
	c.Observe(batches, cheap, batch.MinGroup)
	c.Observe(!batches, dear, batch.MinGroup)
}

// TestReplayBatcherTakesThePreferredWay: lanes replaying at the same time
// (each lane its next replay once the last is acknowledged) are written
// as atomic batches when the batcher's chooser prefers them or the servers
// fsync every write, and by the flushers one publish each when it prefers
// that; either way each replay
// is stored once, acknowledged with its own sequence, in its lane's order.
func TestReplayBatcherTakesThePreferredWay(t *testing.T) {
	const lanes, perLane = 24, 4
	js, replays, ctx := newEvents(t)
	for _, tc := range []struct {
		name string
		// batches: what the chooser measured cheaper; syncAlways: the
		// servers fsync every write (batches, whatever was measured).
		batches, syncAlways bool
	}{
		{"one publish each preferred (no fsync, one server)", false, false},
		{"batches preferred (measured)", true, false},
		{"the servers fsync every write: batches, one publish each measured cheaper", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMetrics()
			b := newReplayBatcher(js, slog.New(slog.DiscardHandler), m, 1000, 0, streams.Options{SyncAlways: tc.syncAlways})
			if got := testutil.ToFloat64(m.Batching); tc.syncAlways && got != 1 {
				t.Fatalf("batching gauge %v before the first replay, want 1 (SyncAlways)", got)
			}
			preferBatches(&b.chooser, tc.batches)
			info, err := replays.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before := info.State.Msgs
			prefix := fmt.Sprintf("t%d", time.Now().UnixNano())
			// The lanes' first replays queue up behind the first group's
			// first, so that the first group is large enough to be measured.
			b.beforeGather = holdFirstGroup(b, lanes-1)
			rctx, stop := context.WithCancel(ctx)
			wait := b.run(rctx)
			seqs := make([][]uint64, lanes)
			errs := make([]error, lanes)
			var wg sync.WaitGroup
			for l := range lanes {
				wg.Go(func() {
					for i := range perLane {
						ack, err := b.publish(ctx, replayMsg(prefix, l*perLane+i))
						if err != nil {
							errs[l] = fmt.Errorf("replay %d: %w", i, err)
							return
						}
						seqs[l] = append(seqs[l], ack.Sequence)
					}
				})
			}
			wg.Wait()
			stop()
			wait()
			for l, err := range errs {
				if err != nil {
					t.Fatalf("lane %d: %v", l, err)
				}
			}
			info, err = replays.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.State.Msgs - before; got != lanes*perLane {
				t.Fatalf("EVENTS gained %d messages, want %d", got, lanes*perLane)
			}
			for l, lane := range seqs {
				for i, seq := range lane {
					if i > 0 && seq <= lane[i-1] {
						t.Fatalf("lane %d: replay %d stored at %d, before replay %d (%d)", l, i, seq, i-1, lane[i-1])
					}
					got, err := replays.GetMsg(ctx, seq)
					if err != nil {
						t.Fatal(err)
					}
					if want := replayMsg(prefix, l*perLane+i); string(got.Data) != string(want.Data) || got.Header.Get(jetstream.MsgIDHeader) != want.Header.Get(jetstream.MsgIDHeader) {
						t.Fatalf("sequence %d holds another replay than lane %d's %d", seq, l, i)
					}
				}
			}
			batches, batched := testutil.ToFloat64(m.Batches), testutil.ToFloat64(m.Batched)
			if tc.batches || tc.syncAlways {
				if batches == 0 || batched < lanes {
					t.Fatalf("%v batches of %v replays, want the first %d replays in one at least", batches, batched, lanes)
				}
			} else if batches != 0 || batched != 0 {
				t.Fatalf("%v batches of %v replays, want none", batches, batched)
			}
			if got, want := testutil.ToFloat64(m.Batching), map[bool]float64{true: 1, false: 0}[tc.batches || tc.syncAlways]; got != want {
				t.Errorf("batching gauge %v, want %v", got, want)
			}
		})
	}
}

// TestReplayStoredOnce: a replay published again after its first publish
// was stored (its acknowledgement lost, or a resume by this or another
// instance) is refused by EVENTS and resolves to the first copy's
// sequence, whichever path writes it (alone, through a batcher that
// writes it alone, or in a batch of one publish each); its subject holds
// one message, and the replay after it (n+1) is stored as usual.
func TestReplayStoredOnce(t *testing.T) {
	js, events, ctx := newEvents(t)
	count := func(t *testing.T, subject string) uint64 {
		t.Helper()
		info, err := events.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[subject]
	}
	unbatched := newReplayBatcher(js, slog.New(slog.DiscardHandler), testMetrics(), 1, 0, streams.Options{})
	for _, tc := range []struct {
		name  string
		again func(*nats.Msg) (*jetstream.PubAck, error)
	}{
		{"alone", func(m *nats.Msg) (*jetstream.PubAck, error) { return publishAlone(ctx, js, m) }},
		{"through an unbatched batcher", func(m *nats.Msg) (*jetstream.PubAck, error) { return unbatched.publish(ctx, m) }},
		{"one publish each", func(m *nats.Msg) (*jetstream.PubAck, error) {
			b := newReplayBatcher(js, slog.New(slog.DiscardHandler), testMetrics(), 1000, 0, streams.Options{})
			rctx, stop := context.WithCancel(ctx)
			wait := b.run(rctx)
			defer func() { stop(); wait() }()
			// A group of one: published alone by the writer.
			return b.publish(ctx, m)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := fmt.Sprintf("once%d", time.Now().UnixNano())
			first, err := publishAlone(ctx, js, replayMsg(prefix, 1))
			if err != nil {
				t.Fatal(err)
			}
			if first.Stream != subjects.EventsStream || first.Duplicate {
				t.Fatalf("first publish acked %+v", first)
			}
			again, err := tc.again(replayMsg(prefix, 1))
			if err != nil {
				t.Fatalf("second publish: %v", err)
			}
			if again.Stream != subjects.EventsStream || again.Sequence != first.Sequence || !again.Duplicate {
				t.Fatalf("second publish acked %+v, want EVENTS %d (duplicate)", again, first.Sequence)
			}
			subject := replayMsg(prefix, 1).Subject
			if n := count(t, subject); n != 1 {
				t.Fatalf("%d messages on %s, want 1", n, subject)
			}
			next := replayMsg(prefix, 1)
			next.Subject = subjects.Redriven("pharmacy", "dispense", prefix+"_1", 2)
			ack, err := tc.again(next)
			if err != nil || ack.Duplicate || ack.Sequence <= first.Sequence {
				t.Fatalf("the next replay: %+v, %v", ack, err)
			}
		})
	}
}

// newEvents starts a provisioned server and returns its JetStream, its
// EVENTS stream and a context bounding the test to a minute.
func newEvents(t *testing.T) (jetstream.JetStream, jetstream.Stream, context.Context) {
	t.Helper()
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	js := srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	events, err := js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	return js, events, ctx
}

// testMetrics returns unregistered collectors.
func testMetrics() *Metrics {
	return &Metrics{Published: prometheus.NewCounter(prometheus.CounterOpts{Name: "published"}),
		Batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "batches"}), Batched: prometheus.NewCounter(prometheus.CounterOpts{Name: "batched"}),
		Unbatched: prometheus.NewCounter(prometheus.CounterOpts{Name: "unbatched"}), Batching: prometheus.NewGauge(prometheus.GaugeOpts{Name: "batching"})}
}
