package batch_test

import (
	"sync"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/batch"
)

// TestChooserPrefersTheCheaperWay: once both ways are measured, a Chooser
// picks the cheaper per message, and tries the dearer one now and then:
// a way k times dearer every ExploreEvery·k groups (at most
// MaxExploreEvery), so that trying costs about the same share of the time
// whatever k; groups smaller than MinGroup follow the preferred way and
// never explore.
func TestChooserPrefersTheCheaperWay(t *testing.T) {
	for _, tc := range []struct {
		name        string
		batch, each time.Duration // per message
		wantBatches bool
		every       int
	}{
		{"batches 10x cheaper (sync_interval: always)", 20 * time.Microsecond, 200 * time.Microsecond, true, 80},
		{"one at a time 4x cheaper (no fsync, R1)", 60 * time.Microsecond, 15 * time.Microsecond, false, 32},
		{"batches 100x cheaper", 2 * time.Microsecond, 200 * time.Microsecond, true, batch.MaxExploreEvery},
		{"the same cost", 50 * time.Microsecond, 50 * time.Microsecond, true, batch.ExploreEvery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c batch.Chooser
			c.Observe(true, tc.batch*100, 100)
			c.Observe(false, tc.each*100, 100)
			if got := c.PrefersBatches(); got != tc.wantBatches {
				t.Fatalf("PrefersBatches %v, want %v", got, tc.wantBatches)
			}
			explored := 0
			for range 4 * tc.every {
				if c.Choose(batch.MinGroup) != tc.wantBatches {
					explored++
				}
				if c.Choose(batch.MinGroup-1) != tc.wantBatches {
					t.Fatal("a small group did not follow the preferred way")
				}
			}
			if explored < 3 || explored > 5 {
				t.Fatalf("the dearer way tried %d times in %d groups, want about 4 (every %d)", explored, 4*tc.every, tc.every)
			}
		})
	}
}

// TestChooserBeforeMeasuring: with nothing measured a group is written as
// a batch first, then (batches measured only) one at a time; small groups
// follow the preferred way (one at a time while batches are not measured)
// and their observations do not count.
func TestChooserBeforeMeasuring(t *testing.T) {
	type step struct {
		observe     bool // else choose
		batched     bool
		n           int
		perMsg      time.Duration
		wantBatches bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"nothing measured: batches first", []step{{n: batch.MinGroup, wantBatches: true}}},
		{"nothing measured: a small group one at a time", []step{{n: 2, wantBatches: false}}},
		{"batches measured only: one at a time next", []step{
			{observe: true, batched: true, n: 100, perMsg: time.Microsecond},
			{n: batch.MinGroup, wantBatches: false},
			{n: 2, wantBatches: true},
		}},
		{"one at a time measured only: batches next", []step{
			{observe: true, n: 100, perMsg: time.Microsecond},
			{n: batch.MinGroup, wantBatches: true},
			{n: 2, wantBatches: false},
		}},
		{"small groups are not measured", []step{
			{observe: true, batched: true, n: batch.MinGroup - 1, perMsg: time.Microsecond},
			{n: batch.MinGroup, wantBatches: true},
			{n: 2, wantBatches: false},
		}},
		{"a change is followed", []step{
			{observe: true, batched: true, n: 100, perMsg: time.Microsecond},
			{observe: true, n: 100, perMsg: 2 * time.Microsecond},
			{n: 2, wantBatches: true},
			{observe: true, batched: true, n: 100, perMsg: 20 * time.Microsecond},
			{observe: true, batched: true, n: 100, perMsg: 20 * time.Microsecond},
			{n: 2, wantBatches: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c batch.Chooser
			for i, s := range tc.steps {
				if s.observe {
					c.Observe(s.batched, s.perMsg*time.Duration(s.n), s.n)
					continue
				}
				if got := c.Choose(s.n); got != s.wantBatches {
					t.Fatalf("step %d: Choose(%d) = %v, want %v", i, s.n, got, s.wantBatches)
				}
			}
		})
	}
}

// TestChooserConcurrent: a Chooser is shared by a batcher's flushers (go
// test -race).
func TestChooserConcurrent(t *testing.T) {
	var c batch.Chooser
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 100 {
				b := c.Choose(batch.MinGroup + i)
				c.Observe(b, time.Millisecond, batch.MinGroup+i)
				_ = c.PrefersBatches()
			}
		})
	}
	wg.Wait()
}
