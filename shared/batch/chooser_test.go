package batch_test

import (
	"slices"
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

// TestChooserPlan: Plan writes the whole group one way, except when one
// message at a time is tried while batches are measured cheaper: then only
// a probe of MinGroup messages of a group of at least 2·MinGroup goes one
// at a time, and the rest in a batch. One at a time is first measured on a
// whole group.
func TestChooserPlan(t *testing.T) {
	cheap, dear := 20*time.Microsecond, 200*time.Microsecond
	for _, tc := range []struct {
		name    string
		observe func(c *batch.Chooser)
		n       int
		// want is each's value at the first group, explore at the first
		// group that tries the other way (-1: none expected).
		want, explore int
	}{
		{"nothing measured: the whole group batched", func(*batch.Chooser) {}, 100, 0, -1},
		{"batches measured only: one at a time measured on a whole group", func(c *batch.Chooser) {
			c.Observe(true, cheap*100, 100)
		}, 100, 100, -1},
		{"batches cheaper: one at a time tried on a probe", func(c *batch.Chooser) {
			c.Observe(true, cheap*100, 100)
			c.Observe(false, dear*100, 100)
		}, 100, 0, batch.MinGroup},
		{"batches cheaper, a group too small to probe: tried whole", func(c *batch.Chooser) {
			c.Observe(true, cheap*100, 100)
			c.Observe(false, dear*100, 100)
		}, 2*batch.MinGroup - 1, 0, 2*batch.MinGroup - 1},
		{"one at a time cheaper: the whole group, batches tried on a whole group", func(c *batch.Chooser) {
			c.Observe(true, dear*100, 100)
			c.Observe(false, cheap*100, 100)
		}, 100, 100, 0},
		{"a small group follows the preferred way (one at a time)", func(c *batch.Chooser) {
			c.Observe(true, dear*100, 100)
			c.Observe(false, cheap*100, 100)
		}, batch.MinGroup - 1, batch.MinGroup - 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c batch.Chooser
			tc.observe(&c)
			if got := c.Plan(tc.n); got != tc.want {
				t.Fatalf("Plan(%d) = %d, want %d", tc.n, got, tc.want)
			}
			if tc.explore < 0 {
				return
			}
			for range batch.MaxExploreEvery {
				if got := c.Plan(tc.n); got != tc.want {
					if got != tc.explore {
						t.Fatalf("Plan(%d) tried the other way with %d, want %d", tc.n, got, tc.explore)
					}
					return
				}
			}
			t.Fatalf("Plan(%d) never tried the other way in %d groups", tc.n, batch.MaxExploreEvery)
		})
	}
}

// TestChooserProbe: a probe's measure does not count (a few messages
// carry a busy group's whole wait); a probe no dearer per message than
// batches makes the next group go one at a time, whole, and that
// measure counts.
func TestChooserProbe(t *testing.T) {
	const n = 100
	for _, tc := range []struct {
		name       string
		probePer   time.Duration // per message of the probe
		wantWhole  bool
		wantBefore bool // PrefersBatches after the probe
	}{
		{"a dear probe changes nothing", 9 * time.Millisecond, false, true},
		{"a cheap probe: the next group whole", 10 * time.Microsecond, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c batch.Chooser
			c.Observe(true, 20*time.Microsecond*n, n)
			c.Observe(false, 200*time.Microsecond*n, n)
			c.Probed(tc.probePer*batch.MinGroup, batch.MinGroup)
			if got := c.PrefersBatches(); got != tc.wantBefore {
				t.Fatalf("PrefersBatches %v after the probe, want %v", got, tc.wantBefore)
			}
			got := c.Plan(n)
			if whole := got == n; whole != tc.wantWhole {
				t.Fatalf("Plan(%d) = %d after the probe, want whole %v", n, got, tc.wantWhole)
			}
			if !tc.wantWhole {
				return
			}
			for range 12 { // one at a time, whole, measured cheaper: it is preferred
				c.Observe(false, 5*time.Microsecond*n, n)
			}
			if c.PrefersBatches() {
				t.Fatal("batches still preferred after whole groups one at a time measured cheaper")
			}
		})
	}
}

// TestChooserOneSlowGroupDoesNotFlip: a way's cost is a moving average, so
// one group that took several times as long (a busy disk shared with other
// streams) does not make the dearer way preferred; a lasting change does.
func TestChooserOneSlowGroupDoesNotFlip(t *testing.T) {
	var c batch.Chooser
	for range 4 {
		c.Observe(true, 100*time.Microsecond*100, 100)
		c.Observe(false, 150*time.Microsecond*100, 100)
	}
	c.Observe(true, 250*time.Microsecond*100, 100) // one slow batch
	if !c.PrefersBatches() {
		t.Fatal("one slow batch made one message at a time preferred")
	}
	for range 3 {
		c.Observe(true, 300*time.Microsecond*100, 100) // batches got dearer
	}
	if c.PrefersBatches() {
		t.Fatal("batches still preferred after they cost twice as much four groups running")
	}
}

// TestChooserSyncAlways: where the servers fsync every write, every group
// of SyncMinBatch or more is one batch and every smaller one is written one
// message at a time, whatever was measured (one message at a time measured
// 100 times cheaper here, then 100 times dearer), nothing is explored, and
// batches are what the metric shows.
func TestChooserSyncAlways(t *testing.T) {
	for _, tc := range []struct {
		name        string
		batch, each time.Duration // measured per group of 100
	}{
		{"one at a time measured cheaper", 100 * time.Millisecond, time.Millisecond},
		{"batches measured cheaper", time.Millisecond, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := batch.Chooser{SyncAlways: true}
			c.Observe(true, tc.batch, 100)
			c.Observe(false, tc.each, 100)
			if !c.PrefersBatches() {
				t.Fatal("batches not preferred")
			}
			for _, n := range []int{1, 2, batch.MinGroup, batch.SyncMinBatch - 1, batch.SyncMinBatch, 2 * batch.SyncMinBatch, 100, batch.MaxMessages} {
				want, wantEach := n >= batch.SyncMinBatch, 0
				if !want {
					wantEach = n
				}
				for range 2 * batch.MaxExploreEvery {
					if each := c.Plan(n); each != wantEach {
						t.Fatalf("Plan(%d) = %d, want %d one at a time", n, each, wantEach)
					}
					if got := c.Choose(n); got != want {
						t.Fatalf("Choose(%d) = %v, want %v", n, got, want)
					}
				}
			}
		})
	}
}

// TestChooserReplicas: on one replica, where the servers do not fsync
// every write, every group is written one message at a time, whatever was
// measured, and never a batch; with SyncAlways, or on more replicas (or
// none said), the rules of those apply (with SyncAlways to groups of
// SyncMinBatch or more here).
func TestChooserReplicas(t *testing.T) {
	for _, tc := range []struct {
		name       string
		c          *batch.Chooser
		oneAtATime bool
	}{
		{"one replica, no fsync", &batch.Chooser{Replicas: 1}, true},
		{"one replica, fsync every write", &batch.Chooser{Replicas: 1, SyncAlways: true}, false},
		{"three replicas, no fsync: measured", &batch.Chooser{Replicas: 3}, false},
		{"replicas not said: measured", &batch.Chooser{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.Observe(true, time.Millisecond, 100) // batches measured far cheaper
			c.Observe(false, 100*time.Millisecond, 100)
			if got := c.PrefersBatches(); got == tc.oneAtATime {
				t.Fatalf("PrefersBatches = %v", got)
			}
			// Measured, a chooser still tries the dearer way now and then.
			calls, alone := 0, 0
			for _, n := range []int{2, batch.MinGroup, 2 * batch.MinGroup, batch.MaxMessages} {
				if c.SyncAlways && n < batch.SyncMinBatch {
					continue // written one at a time: TestChooserSyncAlways
				}
				for range 2 * batch.MaxExploreEvery {
					calls += 2
					if c.Plan(n) == n {
						alone++
					}
					if !c.Choose(n) {
						alone++
					}
				}
			}
			if tc.oneAtATime && alone != calls {
				t.Fatalf("%d of %d plans and choices wrote a group one message at a time, want all", alone, calls)
			}
			if !tc.oneAtATime && alone > calls/10 {
				t.Fatalf("%d of %d plans and choices wrote a group one message at a time where batches are preferred", alone, calls)
			}
		})
	}
}

// TestChooserWrite: Write writes each part of a group the way Plan says,
// a lone message one at a time, and measures only what it may: a whole
// group one at a time, a stored batch; not a probe, nor a refused batch.
func TestChooserWrite(t *testing.T) {
	type call struct {
		batched bool
		lo, hi  int
	}
	measured := func(c *batch.Chooser) { // batches ten times cheaper
		c.Observe(true, 20*time.Microsecond*100, 100)
		c.Observe(false, 200*time.Microsecond*100, 100)
	}
	for _, tc := range []struct {
		name    string
		setup   func(c *batch.Chooser)
		n       int
		stored  bool // what batched reports
		want    []call
		prefers bool // PrefersBatches after
	}{
		{"a lone message", func(*batch.Chooser) {}, 1, true, []call{{false, 0, 1}}, false},
		{"sync always: one batch", func(c *batch.Chooser) { c.SyncAlways = true }, 100, true, []call{{true, 0, 100}}, true},
		{"sync always: a small group one at a time", func(c *batch.Chooser) { c.SyncAlways = true }, batch.SyncMinBatch - 1, true,
			[]call{{false, 0, batch.SyncMinBatch - 1}}, true},
		{"nothing measured: a batch first, measured", func(*batch.Chooser) {}, 100, true, []call{{true, 0, 100}}, true},
		{"nothing measured: a refused batch is not measured", func(*batch.Chooser) {}, 100, false, []call{{true, 0, 100}}, false},
		{"batches preferred", measured, 100, true, []call{{true, 0, 100}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c batch.Chooser
			tc.setup(&c)
			var got []call
			c.Write(tc.n, func(lo, hi int) { got = append(got, call{false, lo, hi}) },
				func(lo, hi int) bool { got = append(got, call{true, lo, hi}); return tc.stored })
			if !slices.Equal(got, tc.want) {
				t.Fatalf("calls %v, want %v", got, tc.want)
			}
			if c.PrefersBatches() != tc.prefers {
				t.Fatalf("PrefersBatches %v, want %v", c.PrefersBatches(), tc.prefers)
			}
		})
	}
	t.Run("a probe, then the rest batched; a cheap probe makes the next group whole", func(t *testing.T) {
		var c batch.Chooser
		measured(&c)
		for range batch.MaxExploreEvery {
			var got []call
			// The probe costs next to nothing per message: cheaper than
			// batches were measured (the batches here report themselves
			// refused, so that their cost stays as measured).
			c.Write(100, func(lo, hi int) { got = append(got, call{false, lo, hi}) },
				func(lo, hi int) bool { got = append(got, call{true, lo, hi}); return false })
			if len(got) == 1 {
				continue
			}
			if want := []call{{false, 0, batch.MinGroup}, {true, batch.MinGroup, 100}}; !slices.Equal(got, want) {
				t.Fatalf("calls %v, want %v", got, want)
			}
			got = nil
			c.Write(100, func(lo, hi int) { got = append(got, call{false, lo, hi}) },
				func(lo, hi int) bool { got = append(got, call{true, lo, hi}); return true })
			if want := []call{{false, 0, 100}}; !slices.Equal(got, want) {
				t.Fatalf("after a cheap probe: calls %v, want %v", got, want)
			}
			return
		}
		t.Fatal("no probe in", batch.MaxExploreEvery, "groups")
	})
}
