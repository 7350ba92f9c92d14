package quarantiner

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// failures returns n structural failures for distinct events (distinct
// chains), keyed by their chain's subject.
func failures(n int) (list []record.Failure, bySubject map[string]record.Failure) {
	bySubject = make(map[string]record.Failure, n)
	for i := range n {
		seq := uint64(1000 + i)
		f := structural("events.pharmacy.dispense", seq, []byte(fmt.Sprintf(`{"transaction_id":"TX-%d",`, seq)), codes.MalformedJSON)
		list = append(list, f)
		bySubject[subjects.Quarantine(f.Domain, record.DLQIDFor(f))] = f
	}
	return list, bySubject
}

// holdFirstBatch returns a beforeGather hook that, for the first batch
// only, waits (up to 10 s) until queued more records are waiting behind
// the first, so that they all go in one batch; then it runs then (if set).
func holdFirstBatch(queued int, then func(first *nats.Msg)) func(*writer, *nats.Msg) {
	var once sync.Once
	return func(w *writer, first *nats.Msg) {
		once.Do(func() {
			// A poll of the queue's length, in the writer's goroutine.
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(10 * time.Second)
		wait:
			for w.queued() < queued {
				select {
				case <-tick.C:
				case <-deadline:
					break wait
				}
			}
			if then != nil {
				then(first)
			}
		})
	}
}

// verifyOnePerFailure checks that QUARANTINE holds exactly one record per
// failure, each the only record of its chain, seals and links verified
// by chain.Reader.
func (e *env) verifyOnePerFailure(tb testing.TB, fs []record.Failure) {
	tb.Helper()
	e.waitRecords(tb, len(fs))
	e.intakeEmpty(tb)
	rd := chain.NewReader(e.js)
	for _, f := range fs {
		ch, err := rd.Read(context.Background(), f.Domain, record.DLQIDFor(f))
		if err != nil {
			tb.Fatalf("chain of seq %d: %v", f.Seq, err)
		}
		if len(ch.Records) != 1 || ch.FoldErr != nil || ch.Records[0].SourceSeq != f.Seq || ch.Records[0].Kind != record.KindQuarantined {
			tb.Fatalf("chain of seq %d: %d records, fold %v", f.Seq, len(ch.Records), ch.FoldErr)
		}
	}
}

// TestBatchOfDistinctChains: failures for distinct chains ready at the
// same time are stored as one atomic batch, one sealed record each.
func TestBatchOfDistinctChains(t *testing.T) {
	const n = 50
	e := newEnv(t)
	fs, _ := failures(n)
	q := e.start(t, testConfig(), &testHooks{beforeGather: holdFirstBatch(n-1, nil)})
	for _, f := range fs {
		e.reportFailure(t, f)
	}
	e.verifyOnePerFailure(t, fs)
	if b, r := testutil.ToFloat64(q.metrics.batches), testutil.ToFloat64(q.metrics.batched); b != 1 || r != n {
		t.Fatalf("%v batches of %v records, want 1 of %d", b, r, n)
	}
}

// TestRefusedBatchFallsBack: a second instance stores the record of one
// failure of a batch after the batch was built (that chain moved on); the
// server refuses the batch, its records are written one by one, and the
// one whose chain moved on is recognised as already quarantined: exactly
// one record per failure.
func TestRefusedBatchFallsBack(t *testing.T) {
	const n = 20
	e := newEnv(t)
	fs, bySubject := failures(n)
	other, err := New(e.srv.Connect(t), testConfig(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	if other.chains, err = newChains(e.js, other.tr, 0, nil); err != nil {
		t.Fatal(err)
	}
	var raced error
	q := e.start(t, testConfig(), &testHooks{beforeGather: holdFirstBatch(n-1, func(first *nats.Msg) {
		_, raced = other.ingest(context.Background(), bySubject[first.Subject])
	})})
	for _, f := range fs {
		e.reportFailure(t, f)
	}
	e.verifyOnePerFailure(t, fs)
	if raced != nil {
		t.Fatalf("the other instance's write: %v", raced)
	}
	for name, tc := range map[string]struct {
		got  float64
		want float64
	}{
		"refused batches":            {testutil.ToFloat64(q.metrics.refusedBatches), 1},
		"stored batches":             {testutil.ToFloat64(q.metrics.batches), 0},
		"already quarantined (race)": {testutil.ToFloat64(q.metrics.duplicates.WithLabelValues("same_source")), 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
}

// TestRestartAfterBatchBeforeAck: an instance dies after its batch is
// stored and before it acknowledges the intake messages; the restarted
// one recognises every redelivered failure as quarantined and writes
// nothing twice.
func TestRestartAfterBatchBeforeAck(t *testing.T) {
	const n = 20
	e := newEnv(t)
	fs, _ := failures(n)
	cfg := testConfig()
	stored := make(chan struct{})
	release := make(chan struct{})
	var dead *running
	dead = e.start(t, cfg, &testHooks{
		beforeGather: holdFirstBatch(n-1, nil),
		afterBatch: func([]*nats.Msg) {
			dead.nc.Close()
			close(stored)
			<-release
		},
	})
	t.Cleanup(func() { close(release) })
	for _, f := range fs {
		e.reportFailure(t, f)
	}
	select {
	case <-stored:
	case <-time.After(30 * time.Second):
		t.Fatal("no batch stored")
	}
	q := e.start(t, cfg, nil)
	e.verifyOnePerFailure(t, fs)
	if got := testutil.ToFloat64(q.metrics.duplicates.WithLabelValues("same_source")); got != n {
		t.Fatalf("the restarted instance found %v failures already quarantined, want %d", got, n)
	}
	if got := testutil.ToFloat64(q.metrics.written.WithLabelValues(string(record.KindQuarantined), string(record.ClassValidation), string(codes.MalformedJSON))); got != 0 {
		t.Fatalf("the restarted instance wrote %v records", got)
	}
}

// quarantineWrites is how many writes QUARANTINE took for records
// records: one per batch, and one per record written by itself
// (BenchmarkQuarantine reports it).
func (s *Service) quarantineWrites(records int) float64 {
	batched := testutil.ToFloat64(s.metrics.batched)
	return testutil.ToFloat64(s.metrics.batches) + float64(records) - batched
}
