package validator

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestBatchedCommits publishes distinct events, second copies of some, and
// events a validator that died after its LEDGER write left without a mark
// (their LEDGER message is there, their IDEMPOTENCY entry is not), to two
// validators committing in batches. Every key ends in LEDGER exactly once
// and marked committed; the earlier LEDGER messages are adopted, not
// written again; the copies are duplicates; and batches did carry more
// than one event (the LEDGER writes were fewer than the commits).
func TestBatchedCommits(t *testing.T) {
	for _, tc := range []struct {
		name             string
		distinct, copies int
		leftByDead       int
		commitBatch      int
		downstream       bool // a downstream failing every 7th call with 503
		// noFsync: the servers do not fsync every write and the streams
		// have one replica, where every event is committed on its own, in
		// its worker, with no batcher (batch.Chooser.OneAtATime).
		noFsync bool
	}{
		{"distinct events", 600, 0, 0, 256, false, false},
		{"with second copies", 400, 80, 0, 256, false, false},
		{"with LEDGER messages of a dead validator", 400, 40, 25, 256, false, false},
		{"one at a time", 100, 20, 5, 1, false, false},
		{"downstream: distinct events", 400, 0, 0, 256, true, false},
		{"downstream: second copies and LEDGER messages of a validator without one", 300, 40, 20, 256, true, false},
		{"one replica without fsync: second copies and LEDGER messages of a dead validator", 600, 80, 25, 256, false, true},
		{"one replica without fsync, downstream", 300, 40, 20, 256, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			set, err := sample.Load()
			if err != nil {
				t.Fatal(err)
			}
			g, err := gate.New(0)
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig()
			cfg.Workers, cfg.CommitBatch = 256, tc.commitBatch
			// Every group of batch.SyncMinBatch or more is batched, as
			// against servers that fsync every write (this one does not,
			// where the batcher would measure one-event writes cheaper and
			// soon stop batching).
			cfg.Streams.SyncAlways = !tc.noFsync
			// No redelivery while a loaded machine (the race detector)
			// takes its time: this test counts each delivery's outcome.
			// (The claim lease stays short: a copy of an event meeting the
			// original's live claim waits for it.)
			cfg.AckWait = 30 * time.Second
			var down *fakeDownstream
			if tc.downstream {
				down = newDownstream(t, func(call int64) int {
					if call%7 == 0 {
						return 503
					}
					return 200
				})
				cfg.DownstreamURL = down.URL
			}
			// The streams first (the validator provisions them), and the
			// LEDGER messages a dead validator left.
			first := startValidator(t, srv, cfg, nil)
			first.stop()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			events := make([]sample.Event, tc.distinct)
			for i := range events {
				if events[i], err = set.Valid(i); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tc.leftByDead {
				e := events[i]
				env, err := g.Check(e.Subject, e.Data)
				if err != nil {
					t.Fatal(err)
				}
				m := nats.NewMsg(subjects.Ledger(env.Domain, env.IdempotencyKey))
				m.Data = e.Data
				m.Header.Set(envelope.IdempotencyKey, env.IdempotencyKey)
				m.Header.Set(envelope.SourceStream, subjects.EventsStream)
				m.Header.Set(envelope.SourceSeq, strconv.Itoa(i+1))
				if _, err := js.PublishMsg(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			a := startValidator(t, srv, cfg, nil)
			b := startValidator(t, srv, cfg, nil)
			for _, e := range append(events, events[:tc.copies]...) {
				if _, err := js.PublishAsync(e.Subject, e.Data); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal("publishes not acknowledged")
			}
			total := uint64(tc.distinct + tc.copies)
			natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
				sa, sb := a.Stats(), b.Stats()
				if done := sa.Committed + sb.Committed + sa.Duplicates + sb.Duplicates; done != total {
					return fmt.Errorf("%d of %d settled", done, total)
				}
				return nil
			})
			sa, sb := a.Stats(), b.Stats()
			// An adopted LEDGER message is a commit of this event (its
			// mark was missing), not a duplicate.
			if c := sa.Committed + sb.Committed; c != uint64(tc.distinct) {
				t.Errorf("committed %d, want %d", c, tc.distinct)
			}
			if d := sa.Duplicates + sb.Duplicates; d != uint64(tc.copies) {
				t.Errorf("duplicates %d, want %d", d, tc.copies)
			}
			if n := streamMsgs(t, js, subjects.LedgerStream); n != uint64(tc.distinct) {
				t.Errorf("LEDGER holds %d messages, want %d", n, tc.distinct)
			}
			if down != nil {
				// Every key the downstream accepted is in LEDGER; the events
				// committed by the validator without one never reach it.
				if n := down.distinct(); n != tc.distinct-tc.leftByDead && n != tc.distinct {
					t.Errorf("the downstream accepted %d keys, want %d", n, tc.distinct-tc.leftByDead)
				}
			}
			for i, e := range events {
				env, err := g.Check(e.Subject, e.Data)
				if err != nil {
					t.Fatal(err)
				}
				if n := ledgerCount(t, js, env.Domain, env.IdempotencyKey); n != 1 {
					t.Fatalf("event %d: LEDGER holds %d messages of its key, want 1", i, n)
				}
				if st := keyState(t, js, env.IdempotencyKey); st.State != StateCommitted || st.LedgerSeq == 0 {
					t.Fatalf("event %d: key state %+v, want committed", i, st)
				}
			}
			if tc.commitBatch == 1 || tc.noFsync {
				if a.commit.batch != nil || b.commit.batch != nil {
					t.Fatal("a batcher where every event commits on its own")
				}
				return
			}
			batches := a.commit.batch.batches.Load() + b.commit.batch.batches.Load()
			t.Logf("%d commits in %d batches, %d one at a time", tc.distinct, batches,
				a.commit.batch.fallbacks.Load()+b.commit.batch.fallbacks.Load())
			if batches >= uint64(tc.distinct) {
				t.Errorf("%d batches for %d commits: no batch held more than one event", batches, tc.distinct)
			}
		})
	}
}

// TestSlowCommitsDoNotHoldOthers: where events are committed one at a
// time, events whose commit is held (here after their LEDGER write) do not
// keep the next events from committing: more are held than the batcher
// writes groups at once (inFlight), and the next event still commits. On
// one replica without fsync there is no batcher (each event commits in its
// worker); on replicated streams without fsync, where one-event writes are
// measured cheaper, a group written so gives its slot back as it starts.
func TestSlowCommitsDoNotHoldOthers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		batcher  bool
	}{
		{"one replica, no fsync: no batcher", 1, false},
		{"replicated, no fsync, one-event writes measured cheaper", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			set, err := sample.Load()
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig()
			cfg.Streams.SyncAlways = false
			cfg.AckWait = 30 * time.Second          // the held events are not redelivered
			startValidator(t, srv, cfg, nil).stop() // the streams, on this one server
			// The validator is told the replicas: on one server the streams
			// stay as provisioned.
			cfg.Streams.Replicas, cfg.Provision = tc.replicas, false
			const held = inFlight + 1
			reached := make(chan string, held)
			release := make(chan struct{})
			var calls atomic.Int32
			hooks := &testHooks{afterLedger: func(key string) {
				if calls.Add(1) <= held {
					reached <- key
					<-release
				}
			}}
			v := startValidator(t, srv, cfg, hooks)
			t.Cleanup(func() { close(release) }) // before v stops (cleanups run last first)
			if (v.commit.batch != nil) != tc.batcher {
				t.Fatalf("batcher %v, want %v", v.commit.batch != nil, tc.batcher)
			}
			if tc.batcher { // one-event writes measured far cheaper
				v.commit.batch.chooser.Observe(true, 100*time.Millisecond, 100)
				v.commit.batch.chooser.Observe(false, time.Millisecond, 100)
			}
			for i := range held {
				e, err := set.Valid(i)
				if err != nil {
					t.Fatal(err)
				}
				publish(t, js, e.Subject, e.Data, "")
				select {
				case <-reached:
				case <-time.After(10 * time.Second):
					t.Fatalf("event %d never reached its LEDGER write while %d were held", i, i)
				}
			}
			e, err := set.Valid(held)
			if err != nil {
				t.Fatal(err)
			}
			publish(t, js, e.Subject, e.Data, "")
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				if c := v.Stats().Committed; c != 1 {
					return fmt.Errorf("committed %d while %d are held, want the next one", c, held)
				}
				return nil
			})
		})
	}
}
