package quarantiner

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// prefer returns a chooser hook that makes the writer's chooser prefer
// batches (batches) or one-by-one writes, by measured costs so far apart
// that it does not explore the other way within a test.
func prefer(batches bool) func(*batch.Chooser) {
	return func(c *batch.Chooser) {
		cheap, dear := time.Duration(batch.MinGroup), time.Duration(math.MaxInt64)
		if batches {
			c.Observe(true, cheap, batch.MinGroup)
			c.Observe(false, dear, batch.MinGroup)
		} else {
			c.Observe(false, cheap, batch.MinGroup)
			c.Observe(true, dear, batch.MinGroup)
		}
	}
}

// TestWriterTakesThePreferredWay: records of many chains, appended at the
// same time (each chain's next record once its last is stored), are
// written as atomic batches when the writer's chooser prefers them or the
// servers fsync every write, and by the writer one by one (conditional,
// with their Nats-Msg-Id) when it prefers that; either way every record is
// stored exactly once, in chain order, each linked to the one before.
func TestWriterTakesThePreferredWay(t *testing.T) {
	const chainsN, perChain = 24, 4
	for _, tc := range []struct {
		name string
		// batches: what the chooser measured cheaper.
		batches bool
		// syncAlways: the servers fsync every write (batches, whatever
		// was measured).
		syncAlways bool
		// atomicOff: QUARANTINE does not allow atomic publish (each
		// record is then written by its caller).
		atomicOff bool
	}{
		{name: "one by one preferred (no fsync, one server)"},
		{name: "batches preferred (measured)", batches: true},
		{name: "the servers fsync every write: batches, one by one measured cheaper", syncAlways: true},
		{name: "batches preferred, atomic publish off", batches: true, atomicOff: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.atomicOff {
				e.disallowAtomic(t)
			}
			m := newMetrics(nil)
			w := newWriter(e.js, testLogger(), m, &testHooks{
				chooser:      prefer(tc.batches),
				beforeGather: holdFirstBatch(chainsN-1, nil),
			}, 256, streams.Options{SyncAlways: tc.syncAlways}, batchTimeout)
			go w.run()
			c, err := newChains(e.js, telemetry.NewTracer(nil, nil), 0, w)
			if err != nil {
				t.Fatal(err)
			}
			fs, _ := failures(chainsN)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs := make([]error, len(fs))
			var wg sync.WaitGroup
			for i, f := range fs {
				wg.Go(func() {
					first := record.FromFailure(f, time.Now().UTC())
					var lastSeq uint64
					prevHash := ""
					for n := range perChain {
						r := first
						if n > 0 {
							r.Kind, r.Payload, r.Headers = record.KindReplayFailed, nil, nil
							r.ErrorDetail = fmt.Sprintf("replay %d failed", n)
						}
						seq, err := c.append(ctx, n, prevHash, lastSeq, &r)
						if err != nil {
							errs[i] = fmt.Errorf("record %d: %w", n, err)
							return
						}
						lastSeq, prevHash = seq, r.AuditHash
					}
				})
			}
			wg.Wait()
			w.close()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("chain %d: %v", i, err)
				}
			}
			e.waitRecords(t, chainsN*perChain)
			for _, f := range fs {
				raw := e.chainOf(t, f.Domain, record.DLQIDFor(f))
				if len(raw) != perChain {
					t.Fatalf("chain of seq %d holds %d records, want %d", f.Seq, len(raw), perChain)
				}
				prev := ""
				for n, b := range raw {
					var r record.Record
					if err := json.Unmarshal(b, &r); err != nil {
						t.Fatal(err)
					}
					if r.Index != n || r.PrevHash != prev || r.SourceSeq != f.Seq || r.ErrorCode != codes.MalformedJSON {
						t.Fatalf("chain of seq %d: record %d has index %d, prev %q (want %q)", f.Seq, n, r.Index, r.PrevHash, prev)
					}
					prev = r.AuditHash
				}
			}
			batches, batched := testutil.ToFloat64(m.batches), testutil.ToFloat64(m.batched)
			wantBatches := tc.batches || tc.syncAlways
			if wantBatches && !tc.atomicOff {
				if batches == 0 || batched < chainsN {
					t.Fatalf("%v batches of %v records, want the first %d records in one at least", batches, batched, chainsN)
				}
			} else if batches != 0 || batched != 0 {
				t.Fatalf("%v batches of %v records, want none", batches, batched)
			}
			if tc.atomicOff {
				if !w.w.Disabled() {
					t.Error("the writer did not turn batches off")
				}
				return
			}
			if got, want := testutil.ToFloat64(m.batching), map[bool]float64{true: 1, false: 0}[wantBatches]; got != want {
				t.Errorf("batching gauge %v, want %v", got, want)
			}
		})
	}
}

// disallowAtomic turns atomic publish off on QUARANTINE, as a store
// provisioned before it was on.
func (e *env) disallowAtomic(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
}
