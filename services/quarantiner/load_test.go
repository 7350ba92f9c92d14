package quarantiner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// publishFailures reports n structural failures for EVENTS sequences
// first..first+n-1, paced at rate per second (0: as fast as possible), and
// returns when every report is stored in FAILURES.
func (e *env) publishFailures(tb testing.TB, first uint64, n, rate int) {
	tb.Helper()
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
	}
	futures := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		if tick != nil {
			<-tick.C
		}
		seq := first + uint64(i)
		data := []byte(fmt.Sprintf(`{"transaction_id":"TX-%d",`, seq))
		f := structural("events.pharmacy.dispense", seq, data, codes.MalformedJSON)
		b, err := json.Marshal(f)
		if err != nil {
			tb.Fatal(err)
		}
		if len(futures)%1000 == 999 {
			// Under sync-always the server answers slower than this
			// producer sends: bound what is outstanding.
			select {
			case <-e.js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				tb.Fatal("failure reports not acknowledged")
			}
		}
		fut, err := e.js.PublishAsync(subjects.Failure("pharmacy"), b)
		if err != nil {
			tb.Fatal(err)
		}
		futures = append(futures, fut)
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		tb.Fatal("failure reports not acknowledged")
	}
	// Every report must be stored, not only answered: a refused or lost
	// publish would show later as a "missing" record.
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			tb.Fatalf("failure report %d not stored: %v", i, err)
		}
	}
}

// TestTenThousandFailures: 10,000 failures reported at once are all
// quarantined, none lost, none twice.
func TestTenThousandFailures(t *testing.T) {
	natstest.Long(t, "ten thousand failures, minutes under the race detector")
	const n = 10000
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	e.publishFailures(t, 1, n, 0)
	e.waitRecordsWithin(t, n, 3*time.Minute)
	e.intakeEmpty(t)
	seen := make(map[uint64]bool, n)
	ids := make(map[string]bool, n)
	for _, r := range e.allRecords(t) {
		if seen[r.SourceSeq] || ids[r.DLQID] {
			t.Fatalf("source %d / dlq id %s quarantined twice", r.SourceSeq, r.DLQID)
		}
		seen[r.SourceSeq], ids[r.DLQID] = true, true
	}
	for seq := uint64(1); seq <= n; seq++ {
		if !seen[seq] {
			t.Fatalf("failure for seq %d lost", seq)
		}
	}
}

func (e *env) waitRecordsWithin(tb testing.TB, n int, total time.Duration) {
	tb.Helper()
	natstest.CheckFor(tb, total, 50*time.Millisecond, func() error {
		s, err := e.js.Stream(context.Background(), subjects.QuarantineStream)
		if err != nil {
			return err
		}
		info, err := s.Info(context.Background())
		if err != nil {
			return err
		}
		if info.State.Msgs != uint64(n) {
			return fmt.Errorf("QUARANTINE holds %d of %d records", info.State.Msgs, n)
		}
		return nil
	})
}

// BenchmarkQuarantine measures the time from a failure being reported to its
// sealed record being stored, at a steady 1,000 failures/s (and 300/s, under sync-always) and for a burst
// of 10,000 at once, and the records/s of the burst; the sync-always cases
// run the server with sync_interval: always (the product's default), where
// each write to QUARANTINE costs an fsync unless it is part of a batch, and
// add a backlog of 10,000 failures stored before the quarantiner starts
// (records/s of the quarantiner alone). Where the quarantiner batches, it
// reports qwrites (writes to QUARANTINE: batches plus records written by
// themselves) and fsyncs_saved (records minus writes). Run with
// go test -run '^$' -bench Quarantine -benchtime 1x ./services/quarantiner/
func BenchmarkQuarantine(b *testing.B) {
	for _, bc := range []struct {
		name    string
		n       int
		rate    int
		sync    bool
		backlog bool
	}{
		{"steady-1000-per-s", 10000, 1000, false, false},
		{"burst-10000", 10000, 0, false, false},
		{"sync-always/steady-300-per-s", 3000, 300, true, false},
		{"sync-always/steady-1000-per-s", 10000, 1000, true, false},
		{"sync-always/burst-10000", 10000, 0, true, false},
		{"sync-always/backlog-10000", 10000, 0, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				e := newEnvSync(b, bc.sync)
				var q *running
				if !bc.backlog {
					q = e.start(b, DefaultConfig(), nil)
				}
				nc := e.srv.Connect(b)
				var mu sync.Mutex
				lat := make([]time.Duration, 0, bc.n)
				var last time.Time
				done := make(chan struct{})
				sub, err := nc.Subscribe(subjects.QuarantineAll, func(m *nats.Msg) {
					var r record.Record
					if err := json.Unmarshal(m.Data, &r); err != nil {
						return
					}
					now := time.Now()
					mu.Lock()
					defer mu.Unlock()
					lat = append(lat, now.Sub(r.Attempts[len(r.Attempts)-1].At))
					last = now
					if len(lat) == bc.n {
						close(done)
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				_ = sub.SetPendingLimits(-1, -1)
				start := time.Now()
				e.publishFailures(b, 1, bc.n, bc.rate)
				if bc.backlog {
					start = time.Now()
					q = e.start(b, DefaultConfig(), nil)
				}
				select {
				case <-done:
				case <-time.After(5 * time.Minute):
					mu.Lock()
					got := len(lat)
					mu.Unlock()
					b.Fatalf("only %d records seen on %s; %s", got, subjects.QuarantineAll, e.storeState(b))
				}
				mu.Lock()
				slices.Sort(lat)
				if !bc.backlog {
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
				}
				b.ReportMetric(float64(bc.n)/last.Sub(start).Seconds(), "records/s")
				mu.Unlock()
				if w, ok := any(q.Service).(interface{ quarantineWrites(int) float64 }); ok {
					writes := w.quarantineWrites(bc.n)
					b.ReportMetric(writes, "qwrites")
					b.ReportMetric(float64(bc.n)-writes, "fsyncs_saved")
				}
			}
		})
	}
}

// newEnvSync is newEnv, the server fsyncing every write when syncAlways.
func newEnvSync(tb testing.TB, syncAlways bool) *env {
	tb.Helper()
	srv := natstest.StartConfig(tb, embedded.Config{SyncAlways: syncAlways})
	srv.Provision(tb, streams.DefaultOptions())
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	return &env{srv: srv, js: srv.JetStream(tb), gate: g}
}
