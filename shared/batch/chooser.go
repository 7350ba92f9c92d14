package batch

import (
	"sync"
	"time"
)

// Chooser decides, group by group, whether a batcher writes a group of
// messages as one atomic batch or one message at a time (concurrently):
// where the servers fsync every write, as a batch when it holds
// SyncMinBatch messages or more (SyncAlways); on single-replica streams
// that the servers do not fsync every write, always one message at a time
// (Replicas 1); else by measuring both. Every batcher of the project asks
// one: whether a batch pays off depends on the server, not on the caller.
//
// An atomic batch saves one fsync per message under sync_interval: always,
// and on a replicated (R3) stream folds many messages into one Raft entry.
// But on a single server with a file stream, nats-server 2.15 stages every
// atomic batch in a file store of its own (newBatchStore in
// server/jetstream_batching.go: a directory, meta files written with
// O_SYNC and a directory fsync, even when the server does not fsync), so a
// batch has a fixed cost of about 1 ms of CPU and of the stream's write
// loop, whatever its size and the fsync mode. Measured on one R1 file
// stream with 530 B messages (tests/bench/writepath): pipelined
// one-message writes reach 10,790 msg/s under sync_interval: always and
// 87,471 without fsync (18 µs of CPU each); atomic batches of 2 about
// 1,300 msg/s either way (~500 µs of CPU each), of 32 12,128–13,234
// (always) and 16,790–19,480 (no fsync), of 512 54,334 and
// 80,206–87,778. So under sync_interval: always a batch pays off from about
// 16–32 messages; without fsync it never beats one-message writes on R1.
//
// So the Chooser measures the wall time per message of groups of at least
// MinGroup messages written each way, uses the cheaper, and tries the
// other now and then (ExploreEvery) to notice a change (the fsync setting,
// a cluster's replication). Before anything is measured it tries batches
// first, then a whole group one message at a time. A Chooser is safe for
// concurrent use; its zero value is ready.
//
// Two things keep a busy pipeline from paying for what it measures:
//
//   - Each way's cost is a moving average that gives a new measurement a
//     quarter of the weight (Weight), so that one slow group does not flip
//     the choice: in a sync-always drain, where every stage shares one
//     disk, groups' wall times vary several-fold.
//   - While batches are preferred, one message at a time is tried first on
//     a sample (Plan: MinGroup messages of a group of at least 2·MinGroup,
//     the rest still batched), a probe: a whole group of 80 records written
//     one at a time costs 80 fsyncs where its batch costs one. A probe's
//     measure does not count, because a busy group's wall time is mostly
//     waiting that a few messages do not share out (8 events committed one
//     at a time took 72 ms, 9 ms each, where a group of 245 took 50 ms,
//     0.2 ms each): a probe that is no dearer per message than batches
//     (Probed) makes the next try a whole group, whose measure counts.
//
// Counted as a whole group's, probes kept batches preferred by mistake:
// ingest without fsync ran 10 % slower.
//
// What no measure of a group shows is the fsync a message written alone
// costs every other stream on the disk: under sync_interval: always the
// measures of both ways are dominated by that shared wait and come out
// within 1.3–2.2 times of each other, so a measuring chooser still writes
// many groups one message at a time. Where the servers fsync every write,
// SyncAlways says so and nothing is measured: a group of SyncMinBatch or
// more is a batch, a smaller one is written one message at a time.
//
// And where the servers do not fsync every write, on single-replica
// streams, what the measures show is mostly noise, and a batch's cost that
// they miss is latency: at half the highest ingest rate (5,643 events/s, no
// fsync, 2 cores) the measuring chooser wrote between 1 % and 75 % of the
// events in batches from one run to the next, and each batch's staging
// (above) held its events for tens of milliseconds (p50 from publish to
// LEDGER commit 7–28 ms where it batched, 1.7–1.9 ms one event at a time).
// The writepath figures above say one-message writes win there anyway
// (ingest at its highest rate ran 19–26 % faster so, in three interleaved
// pairs of 50,000 events), so Replicas 1 writes every group one message at
// a time and measures nothing.
type Chooser struct {
	// SyncAlways: the servers fsync every write (streams.Options.SyncAlways).
	// Every group of SyncMinBatch messages or more is then one atomic batch,
	// a smaller one is written one message at a time, and nothing is
	// measured: a message written alone costs an fsync that a group's wall
	// time does not show (20,000-record drains under sync_interval: always
	// ran at 1,011–1,040 records/s with the measuring chooser, which wrote
	// whole groups of 80 one record at a time, 1,435–1,517 with every group
	// batched). Set it before the first use.
	SyncAlways bool
	// Replicas is the streams' replication factor
	// (streams.Options.Replicas). 1 without SyncAlways: every group is
	// written one message at a time and nothing is measured (a batch never
	// beats one-message writes on one replica without fsync, and holds its
	// messages for its staging). 0 (not said) or more than 1: measured,
	// since on a replicated stream a batch folds many messages into one
	// Raft entry. Set it before the first use.
	Replicas int

	mu sync.Mutex
	// costBatch, costEach: nanoseconds per message of a group written as
	// a batch, and one message at a time (0: not measured yet), each a
	// moving average (Weight).
	costBatch, costEach float64
	// groups counts the measured groups chosen for; explored is the
	// group at which the dearer way was last tried.
	groups, explored uint64
	// whole: a probe was no dearer than batches; the next group is
	// written one message at a time, whole.
	whole bool
}

// ExploreEvery is how often (in measured groups) a Chooser tries the way
// it does not prefer, when both cost about the same; a way k times dearer
// is tried k times less often, and at least every MaxExploreEvery groups,
// so that trying takes about 1/ExploreEvery of the time whatever k.
const (
	ExploreEvery    = 8
	MaxExploreEvery = 256
)

// Weight is the share of a new measurement in a way's cost (a moving
// average).
const Weight = 0.25

// MinGroup is the smallest group a Chooser measures: below it, a batch's
// fixed cost is not shared by enough messages to be compared fairly with
// one-message writes. Smaller groups follow the preferred way, and never
// explore. It is also the size of a probe.
const MinGroup = 8

// SyncMinBatch is the smallest group a Chooser with SyncAlways writes as
// one atomic batch; smaller groups are written one message at a time
// (concurrently). A batch's staging costs the server about as much as 16
// one-message writes whatever its size (the writepath figures above: 1,300
// msg/s in batches of 2 against 10,790 pipelined), so a small group gains
// nothing from a batch but waits for the staging. A group grows past it
// as soon as the writes fall behind (what arrives during a group's write
// is the next group), so a loaded pipeline still batches. Measured in
// seven interleaved pairs of 5,000-event runs under sync_interval: always
// (2 cores): ingest/raw 51.8–75.4 % against 58.1–74.5 % with every group
// of two or more batched (no difference the noise lets through), and at
// half the highest ingest rate a p50 from publish to LEDGER commit of
// 12.8–22.7 ms against 18.2–27.1 ms (lower in 4 pairs of 4), 20,000-record
// drains alike (1,196 and 1,517 records/s against 1,255 and 1,473).
const SyncMinBatch = 16

// Plan says how the next group, of n messages, is written: its first each
// messages one at a time (concurrently), then the rest, if any, as one
// atomic batch. each is 0 (the whole group batched) or n (none batched),
// except for a probe: when one message at a time is tried while batches
// are preferred, only the first MinGroup of a group of at least
// 2·MinGroup. A lone message is never a batch. The caller reports a probe
// with Probed, a whole group with Observe (Write does both).
func (c *Chooser) Plan(n int) (each int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case n < 2:
		return n
	case c.SyncAlways:
		if n < SyncMinBatch {
			return n
		}
		return 0
	case c.oneAtATime():
		return n
	case n >= MinGroup && c.whole:
		c.groups++
		c.whole = false
		return n
	case c.choose(n):
		return 0
	case n >= 2*MinGroup && c.costEach != 0 && c.costBatch <= c.costEach:
		return MinGroup
	}
	return n
}

// Write writes a group of n messages the way Plan says and measures it
// (Observe, Probed): each(lo, hi) writes messages lo to hi-1 one at a time
// (concurrently) and returns once all are written; batched(lo, hi) writes
// them as one atomic batch and reports whether it measured a stored batch
// (a refused one is not). A lone message is written by each, which the
// batchers do themselves and wait for, like a batch, so that the messages
// arriving meanwhile gather into the next group: were it handed back to its
// caller, the batcher would take the next one alone at once, and under load
// every message would cost a write (and, under sync_interval: always, an
// fsync) of its own. Every batcher of the project writes its groups
// through it.
func (c *Chooser) Write(n int, each func(lo, hi int), batched func(lo, hi int) bool) {
	k := c.Plan(n)
	if k > 0 {
		start := time.Now()
		each(0, k)
		if k < n {
			c.Probed(time.Since(start), k)
		} else {
			c.Observe(false, time.Since(start), k)
		}
	}
	if rest := n - k; rest > 0 { // two or more (Plan)
		start := time.Now()
		if batched(k, n) {
			c.Observe(true, time.Since(start), rest)
		}
	}
}

// Choose reports whether the next group, of n messages, is written as one
// atomic batch (true) or one message at a time (a whole group: Plan may
// try a sample instead).
func (c *Chooser) Choose(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.choose(n)
}

func (c *Chooser) choose(n int) bool {
	if c.SyncAlways {
		return n >= SyncMinBatch
	}
	if c.oneAtATime() {
		return false
	}
	if n < MinGroup {
		return c.prefersBatches()
	}
	c.groups++
	switch {
	case c.costBatch == 0:
		return true
	case c.costEach == 0:
		return false
	}
	prefer := c.costBatch <= c.costEach
	ratio := max(c.costBatch, c.costEach) / min(c.costBatch, c.costEach)
	every := uint64(min(float64(ExploreEvery)*ratio, MaxExploreEvery))
	if c.groups-c.explored >= every {
		c.explored = c.groups
		return !prefer
	}
	return prefer
}

// Observe records that writing a group of n messages took d, as a batch
// (batched) or one message at a time. Groups smaller than MinGroup are not
// measured (nor any with SyncAlways or on one replica, which do not choose
// by measures).
func (c *Chooser) Observe(batched bool, d time.Duration, n int) {
	if n < MinGroup || c.SyncAlways || c.oneAtATime() {
		return
	}
	per := float64(d) / float64(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	cost := &c.costEach
	if batched {
		cost = &c.costBatch
	}
	if *cost == 0 {
		*cost = per
	} else {
		*cost += (per - *cost) * Weight
	}
}

// Probed records that a probe (Plan) of n messages written one at a time
// took d. It counts for nothing unless it was no dearer per message than
// batches: then the next group is written one message at a time, whole,
// and measured.
func (c *Chooser) Probed(d time.Duration, n int) {
	if n < 1 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if float64(d)/float64(n) <= c.costBatch {
		c.whole = true
	}
}

// PrefersBatches reports whether batches are measured the cheaper way
// (false while they are not measured yet): what a batcher's metric shows.
func (c *Chooser) PrefersBatches() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prefersBatches()
}

func (c *Chooser) prefersBatches() bool {
	return c.SyncAlways || !c.oneAtATime() && c.costBatch != 0 && (c.costEach == 0 || c.costBatch <= c.costEach)
}

// OneAtATime reports whether every group is written one message at a
// time, whatever is measured: single-replica streams that the servers do
// not fsync every write (Replicas). A batcher may then hand nothing over:
// its callers can write their messages themselves.
func (c *Chooser) OneAtATime() bool { return c.oneAtATime() }

func (c *Chooser) oneAtATime() bool { return !c.SyncAlways && c.Replicas == 1 }
