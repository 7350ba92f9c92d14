package batch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/natstest"
)

// tradeMsg is message i of a test: an event of the trade on a subject of
// its own, expecting that subject empty, with its Nats-Msg-Id.
func tradeMsg(prefix string, i int) *nats.Msg {
	m := nats.NewMsg(fmt.Sprintf("w.%s.%d", prefix, i))
	m.Data = fmt.Appendf(nil, `{"type":"ObjectEvent","action":"OBSERVE","bizStep":"shipping","readPoint":{"id":"urn:epc:id:sgln:0614141.00777.0"},`+
		`"sourceList":[{"type":"owning_party","source":"Müller & Söhne <Lager \"Nord\">"}],"destinationList":[{"type":"owning_party","source":"陈伟 药房 #%d"}]}`, i)
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", prefix, i))
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	return m
}

// counts is what a Writer's counters saw.
type counts struct {
	batches, batched, notStored, alone atomic.Int64
	refused                            atomic.Int64
}

// TestWriter: messages handed over at once are stored in atomic batches,
// each reported with its own sequence; a batch the server refuses (one
// subject written before) is written again one message at a time, where
// only the one at fault fails; a message larger than the connection allows
// fails alone without failing its group; a stream without atomic publish
// turns batches off; a writer not started, or stopped, writes each message
// alone; and a server restarted while a group is written leaves every
// message stored once or reported failed, none twice, and the writer
// writes batches again once it is back.
func TestWriter(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name string
		// taken: subjects (indexes) written before the group.
		taken []int
		// large: indexes of messages larger than the max payload.
		large []int
		// twice: message 7 is on message 3's subject (the server refuses
		// a batch that writes a subject twice).
		twice bool
		// atomicOff: the stream does not allow atomic publish.
		atomicOff bool
		// stopped: the writer is stopped before the messages are handed
		// over; notStarted: never started.
		stopped, notStarted bool
		// restart: the server restarts as the first group is gathered;
		// downPastTimeout: it comes back only once the group's batch timed
		// out (its outcome unknown).
		restart, downPastTimeout bool
		// wantBatches: at least one batch stored.
		wantBatches bool
		// wantRefused: a batch refused as a whole.
		wantRefused bool
	}{
		{name: "batches formed", wantBatches: true},
		{name: "a refused batch falls back per message", taken: []int{3, 27}, wantRefused: true},
		{name: "a subject twice in a group: the second written alone", twice: true, wantBatches: true},
		{name: "a message too large fails alone", large: []int{5}, wantBatches: true},
		{name: "atomic publish off", atomicOff: true},
		{name: "a stopped writer writes alone", stopped: true},
		{name: "a writer not started writes alone", notStarted: true},
		{name: "a server restart mid-batch", restart: true},
		{name: "a server down past the batch's timeout", restart: true, downPastTimeout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			nc := srv.Connect(t, nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "W", Subjects: []string{"w.>"},
				AllowAtomicPublish: !tc.atomicOff, Duplicates: time.Minute, Storage: jetstream.FileStorage})
			if err != nil {
				t.Fatal(err)
			}
			prefix := "p"
			for _, i := range tc.taken {
				if _, err := js.PublishMsg(ctx, tradeMsg(prefix, i)); err != nil {
					t.Fatal(err)
				}
			}
			msgs := make([]*nats.Msg, n)
			for i := range msgs {
				msgs[i] = tradeMsg(prefix, i)
			}
			for _, i := range tc.large {
				msgs[i].Data = []byte(`{"note":"` + strings.Repeat("Müller & Söhne <ä> ", int(nc.MaxPayload())/20+1) + `"}`)
			}
			if tc.twice {
				msgs[7].Subject = msgs[3].Subject
			}
			var c counts
			gathered, restarted := make(chan struct{}), make(chan struct{})
			var once sync.Once
			var hold atomic.Bool
			hold.Store(true)
			var w *batch.Writer[*nats.Msg]
			cfg := batch.Config[*nats.Msg]{
				JS: js, Stream: "W",
				Msg:     func(m *nats.Msg) *nats.Msg { return m },
				Chooser: &batch.Chooser{SyncAlways: true},
				Timeout: map[bool]time.Duration{false: 3 * time.Second, true: time.Second}[tc.downPastTimeout],
				// A message larger than the max payload still fits a group.
				MaxBytes: 4 * int(nc.MaxPayload()),
				// A held group waits for every message behind its first.
				BeforeGather: func(*nats.Msg) {
					if !hold.CompareAndSwap(true, false) {
						return
					}
					natstest.Until(10*time.Second, time.Millisecond, func() bool { return w.Queued() >= n-1 })
					once.Do(func() {
						if tc.restart {
							close(gathered)
							<-restarted
						}
					})
				},
				OnBatch: func(k int) {
					c.batches.Add(1)
					c.batched.Add(int64(k))
				},
				OnNotStored: func(_ int, err error) {
					c.notStored.Add(1)
					if errors.Is(err, batch.ErrRefused) {
						c.refused.Add(1)
					}
				},
				OnAlone: func(k int) { c.alone.Add(int64(k)) },
			}
			w = batch.NewWriter(cfg)
			if !tc.notStarted {
				wctx, stop := context.WithCancel(ctx)
				wait := w.Start(wctx)
				defer func() { stop(); wait() }()
				if tc.stopped {
					w.Stop()
				}
			}
			results := make([]batch.Result, n)
			var wg sync.WaitGroup
			for i, m := range msgs {
				wg.Go(func() { results[i] = w.Write(ctx, m) })
			}
			if tc.restart {
				// The group is gathered: the server goes down, the group's
				// batch is sent while it is down (the client buffers it
				// while it reconnects), and the server comes back.
				select {
				case <-gathered:
				case <-ctx.Done():
					t.Fatal("no group gathered")
				}
				srv.Stop()
				close(restarted)
				if tc.downPastTimeout {
					natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
						if c.notStored.Load() == 0 {
							return errors.New("the batch has not failed yet")
						}
						return nil
					})
				}
				srv.Restart()
			}
			wg.Wait()

			bad := map[int]bool{}
			for _, i := range append(tc.taken, tc.large...) {
				bad[i] = true
			}
			if tc.twice {
				bad[7] = true
			}
			for i, r := range results {
				switch {
				case bad[i] && r.Err == nil:
					t.Errorf("message %d: stored at %d, want an error", i, r.Seq)
				case !bad[i] && r.Err != nil && !tc.restart:
					t.Errorf("message %d: %v", i, r.Err)
				}
			}
			for _, i := range tc.large {
				if !errors.Is(results[i].Err, nats.ErrMaxPayload) || !results[i].Alone {
					t.Errorf("message %d too large: %+v, want ErrMaxPayload, written alone", i, results[i])
				}
			}
			// Every message reported stored is at its sequence; none is
			// stored twice; none reported failed was stored by this writer
			// unless the restart left its outcome unknown.
			natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
				_, err := stream.Info(ctx)
				return err
			})
			seen := map[uint64]int{}
			for i, r := range results {
				if r.Err != nil {
					continue
				}
				if prev, ok := seen[r.Seq]; ok {
					t.Fatalf("messages %d and %d share sequence %d", prev, i, r.Seq)
				}
				seen[r.Seq] = i
				got, err := stream.GetMsg(ctx, r.Seq)
				if err != nil {
					t.Fatalf("message %d at %d: %v", i, r.Seq, err)
				}
				if got.Subject != msgs[i].Subject || string(got.Data) != string(msgs[i].Data) {
					t.Fatalf("sequence %d holds %s, not message %d", r.Seq, got.Subject, i)
				}
				if (r.Batch > 0) == r.Alone {
					t.Fatalf("message %d: batch %d, alone %v", i, r.Batch, r.Alone)
				}
			}
			for i, m := range msgs {
				if bad[i] && tc.large != nil {
					continue
				}
				info, err := stream.Info(ctx, jetstream.WithSubjectFilter(m.Subject))
				if err != nil {
					t.Fatal(err)
				}
				if k := info.State.Subjects[m.Subject]; k > 1 || (k == 0 && results[i].Err == nil) {
					t.Fatalf("message %d: %d stored on its subject (result %+v)", i, k, results[i])
				}
			}
			if got := c.batches.Load() > 0; got != tc.wantBatches && !tc.restart {
				t.Errorf("batches stored: %v, want %v", got, tc.wantBatches)
			}
			if alone := len(tc.large) + map[bool]int{true: 1}[tc.twice]; tc.wantBatches && c.batched.Load() < int64(n-alone) {
				t.Errorf("%d messages batched, want the group of %d", c.batched.Load(), n-alone)
			}
			if got := c.refused.Load() > 0; got != tc.wantRefused {
				t.Errorf("batches refused: %v, want %v", got, tc.wantRefused)
			}
			if tc.atomicOff != w.Disabled() {
				t.Errorf("disabled %v, want %v", w.Disabled(), tc.atomicOff)
			}
			if tc.stopped || tc.notStarted {
				if c.batches.Load()+c.alone.Load() != 0 {
					t.Errorf("a writer not running wrote groups: %d batches, %d alone", c.batches.Load(), c.alone.Load())
				}
				for i, r := range results {
					if !r.Alone || r.Ack == nil {
						t.Fatalf("message %d: %+v, want written alone", i, r)
					}
				}
			}
			if tc.restart {
				t.Logf("%d batches of %d stored, %d not stored, %d written alone", c.batches.Load(), c.batched.Load(), c.notStored.Load(), c.alone.Load())
				// Back: the next group is a batch again.
				before := c.batches.Load()
				hold.Store(true)
				next := make([]*nats.Msg, n)
				res := make([]batch.Result, n)
				for i := range next {
					next[i] = tradeMsg("after", i)
				}
				var wg sync.WaitGroup
				for i, m := range next {
					wg.Go(func() { res[i] = w.Write(ctx, m) })
				}
				wg.Wait()
				for i, r := range res {
					if r.Err != nil {
						t.Fatalf("after the restart, message %d: %v", i, r.Err)
					}
				}
				if c.batches.Load() == before {
					t.Error("no batch after the restart")
				}
			}
		})
	}
}
