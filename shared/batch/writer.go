package batch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of a Writer's Config.
const (
	// DefaultMaxBytes bounds the payload bytes of one group.
	DefaultMaxBytes = 8 << 20
	// DefaultTimeout bounds one batch's write, and one message's.
	DefaultTimeout = 10 * time.Second
)

// Writer is the project's one batch writer. Its callers hand it messages
// (Write waits for the outcome, Submit hands it to a callback); it gathers
// the messages queued while it is free into a group (up to Max messages
// and MaxBytes bytes, after an optional Linger), asks its Chooser how the
// group is written, and writes it: as one atomic batch (Publish), or one
// message at a time (concurrently, Config.Alone). A batch that is not
// stored as a whole (refused, or its outcome unknown after a timeout) is
// written again one message at a time, each with its own expectation, so
// that the conditional write of each says what became of it. Every
// message gets its own Result.
//
// Nothing waits to fill a group unless Linger says so: a group is what
// arrived while the previous one was written (InFlight groups are written
// at once). A group holds one message per subject (the server refuses a
// batch that writes a subject twice, 10164): a second message on a
// subject is written alone, after the group's batch. A message larger
// than the connection's max payload is written alone too, where its own
// publish fails with a clear error instead of failing the batch.
//
// A stream without allow_atomic (ErrDisabled) turns batches off for the
// Writer's life: every later message is written alone, as it is before
// Start and after Stop.
//
// What a message means and what its outcome means stay with the caller:
// T is the caller's item, Config.Msg its message; Config.Prepare may look
// a group up before its batch (the validator's LEDGER look-up), and
// Config.AfterBatch may write what follows a stored batch (the validator's
// IDEMPOTENCY marks).
type Writer[T any] struct {
	cfg     Config[T]
	chooser *Chooser
	log     *slog.Logger

	mu    sync.Mutex
	queue []*item[T]
	state int
	wake  chan struct{}
	stop  chan struct{}

	disabled atomic.Bool
	// calls counts Submit's callbacks not yet returned.
	calls sync.WaitGroup
}

// Writer states.
const (
	idle = iota
	running
	stopped
)

// Config says what a Writer writes and how.
type Config[T any] struct {
	// JS is where the messages are written. Required.
	JS jetstream.JetStream
	// Stream names the stream written, in logs.
	Stream string
	// Msg returns the message of an item (called more than once: return
	// the same message). Required.
	Msg func(T) *nats.Msg
	// Chooser plans each group; nil: a Chooser of its own (zero value).
	Chooser *Chooser
	// Max is the most messages a group holds (0 or more than MaxMessages:
	// MaxMessages).
	Max int
	// MaxBytes bounds the payload bytes of a group (0: DefaultMaxBytes); a
	// first message larger than it is a group of its own.
	MaxBytes int
	// Linger is how long a group smaller than Max waits for more (0: it
	// does not wait).
	Linger time.Duration
	// InFlight is how many groups are written at once (0: 1).
	InFlight int
	// Timeout bounds one batch's write, and the default Alone's publish
	// (0: DefaultTimeout).
	Timeout time.Duration

	// Alone writes one item by itself, conditional as every write of the
	// project, and returns its outcome (Alone set). nil: a plain publish
	// of its message (Ack and Err are the publish's).
	Alone func(ctx context.Context, v T) Result
	// Prepare, when set, runs before a group of two or more is written as
	// a batch and says what becomes of each item (the zero Verdict: in the
	// batch). Fewer than two left in the batch are written alone.
	Prepare func(vs []T) []Verdict
	// AfterBatch, when set, runs once a batch is stored, with its items
	// and their stream sequences, before the items' outcomes are
	// reported; it returns each item's error (nil slice: none).
	AfterBatch func(vs []T, seqs []uint64) []error
	// BeforeGather, when set, runs when a group's first item is taken from
	// the queue, before the others are (tests).
	BeforeGather func(first T)

	// OnBatch, OnNotStored, OnAlone and OnPrefer, when set, count: a
	// batch of n stored; a batch of n not stored (err: why; its items are
	// then written alone); n items written alone (one at a time, or after
	// all); and whether the Chooser prefers batches, after each group (and
	// once at NewWriter).
	OnBatch     func(n int)
	OnNotStored func(n int, err error)
	OnAlone     func(n int)
	OnPrefer    func(batches bool)

	// Log receives the Writer's own lines (ids and counts only); nil:
	// none.
	Log *slog.Logger
}

// Verdict is what Config.Prepare says of one item of a group about to be
// batched. Its zero value keeps the item in the batch.
type Verdict struct {
	// Alone: written by itself (Config.Alone), after the batch.
	Alone bool
	// End, when set, is the item's outcome: Prepare ended it, and it is
	// written neither in the batch nor alone.
	End *Result
}

// Result is the outcome of one item.
type Result struct {
	// Seq is the message's stream sequence (0 on error).
	Seq uint64
	// Batch is the size of the atomic batch that stored it (0: written
	// alone).
	Batch int
	// Alone: the item was written by itself (Config.Alone); Ack and Err
	// are that write's.
	Alone bool
	// Ack is the acknowledgement of a message the default Alone wrote.
	Ack *jetstream.PubAck
	// Err is the item's error: its write's, AfterBatch's, or the caller's
	// context's when it stopped waiting.
	Err error
}

type item[T any] struct {
	v    T
	ctx  context.Context
	size int
	// report receives the item's result, once.
	report func(Result)
}

// NewWriter returns a Writer of cfg; Start starts it. Before Start, every
// message is written alone.
func NewWriter[T any](cfg Config[T]) *Writer[T] {
	if cfg.Max <= 0 || cfg.Max > MaxMessages {
		cfg.Max = MaxMessages
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	w := &Writer[T]{cfg: cfg, chooser: cfg.Chooser, log: cfg.Log, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if w.chooser == nil {
		w.chooser = &Chooser{}
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if cfg.OnPrefer != nil {
		cfg.OnPrefer(w.chooser.PrefersBatches()) // true from the start with SyncAlways
	}
	return w
}

// Start starts writing groups, until ctx ends or Stop. The returned func
// waits until the last group is written (what was queued at the stop is
// written first) and every Submit callback has returned. A Writer starts
// once.
func (w *Writer[T]) Start(ctx context.Context) (wait func()) {
	w.mu.Lock()
	if w.state != idle {
		w.mu.Unlock()
		return func() {}
	}
	w.state = running
	w.mu.Unlock()
	unhook := context.AfterFunc(ctx, w.Stop)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unhook()
		w.run()
	}()
	return func() {
		<-done
		w.calls.Wait()
	}
}

// Stop stops gathering: the groups queued are still written, and every
// message handed over later is written alone.
func (w *Writer[T]) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stopped {
		w.state = stopped
		close(w.stop)
	}
}

// Write hands v over and waits for its outcome, or for ctx (Err then
// ctx's: the item may still be written). Before Start, after Stop and once
// batches are off, it writes v alone itself.
func (w *Writer[T]) Write(ctx context.Context, v T) Result {
	done := make(chan Result, 1)
	if !w.enqueue(ctx, v, func(r Result) { done <- r }) {
		return w.alone(ctx, v)
	}
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	}
}

// Submit hands v over and returns at once: then receives its outcome on
// a goroutine of its own (the wait of Start waits for it, so Submit is
// not called once that wait has begun).
func (w *Writer[T]) Submit(ctx context.Context, v T, then func(Result)) {
	if !w.enqueue(ctx, v, func(r Result) { w.calls.Go(func() { then(r) }) }) {
		w.calls.Go(func() { then(w.alone(ctx, v)) })
	}
}

// Queued returns how many items wait for a group (not counting a group's
// first, taken already).
func (w *Writer[T]) Queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// Disable turns batches off for the Writer's life (a store without
// allow_atomic that its caller found, e.g. in AfterBatch): every later
// item is written alone. It logs why once.
func (w *Writer[T]) Disable(why error) {
	if !w.disabled.Swap(true) {
		w.log.Warn("the stream does not allow atomic publish: writing one message at a time; provision it again to turn batches on", "stream", w.cfg.Stream, "err", why)
	}
}

// Disabled reports whether batches are off (Disable).
func (w *Writer[T]) Disabled() bool { return w.disabled.Load() }

// enqueue queues v; false when the writer does not run or batches are
// off (the caller writes it alone).
func (w *Writer[T]) enqueue(ctx context.Context, v T, report func(Result)) bool {
	if w.disabled.Load() {
		return false
	}
	it := &item[T]{v: v, ctx: ctx, size: len(w.cfg.Msg(v).Data), report: report}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != running {
		return false
	}
	w.queue = append(w.queue, it)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// run writes groups, up to InFlight at once, until Stop and the queue is
// empty.
func (w *Writer[T]) run() {
	slots := make(chan struct{}, w.cfg.InFlight)
	var groups sync.WaitGroup
	for {
		slots <- struct{}{} // a free slot first: the group gathers meanwhile
		g := w.gather()
		if g == nil {
			break
		}
		groups.Go(func() {
			var once sync.Once
			release := func() { once.Do(func() { <-slots }) }
			defer release()
			w.write(g, release)
		})
	}
	groups.Wait()
}

// gather waits for a first item and returns the group that follows it
// (Linger, Max, MaxBytes); nil once stopped with nothing queued.
func (w *Writer[T]) gather() []*item[T] {
	w.mu.Lock()
	for len(w.queue) == 0 {
		if w.state == stopped {
			w.mu.Unlock()
			return nil
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.stop:
		}
		w.mu.Lock()
	}
	first := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	short := len(w.queue)+1 < w.cfg.Max
	w.mu.Unlock()
	if w.cfg.BeforeGather != nil {
		w.cfg.BeforeGather(first.v)
	}
	if w.cfg.Linger > 0 && short {
		t := time.NewTimer(w.cfg.Linger)
		select {
		case <-t.C:
		case <-w.stop:
			t.Stop()
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n, size := 0, first.size
	for n < len(w.queue) && n+1 < w.cfg.Max {
		size += w.queue[n].size
		if size > w.cfg.MaxBytes {
			break
		}
		n++
	}
	g := make([]*item[T], n+1)
	g[0] = first
	copy(g[1:], w.queue)
	clear(w.queue[:n])
	w.queue = w.queue[n:]
	if len(w.queue) == 0 {
		w.queue = nil // let the backing array go
	}
	return g
}

// write writes one group the way the Chooser plans it and reports each
// item. release gives the group's slot back early: a whole group written
// one at a time where that is the preferred way holds nothing up that a
// batch would save.
func (w *Writer[T]) write(g []*item[T], release func()) {
	if w.disabled.Load() {
		w.each(g)
		return
	}
	maxPayload := int(w.cfg.JS.Conn().MaxPayload())
	seen := make(map[string]bool, len(g))
	first := make([]*item[T], 0, len(g))
	var again []*item[T]
	for _, it := range g {
		m := w.cfg.Msg(it.v)
		if seen[m.Subject] || maxPayload > 0 && msgSize(m) > maxPayload {
			again = append(again, it)
			continue
		}
		seen[m.Subject] = true
		first = append(first, it)
	}
	w.chooser.Write(len(first), func(lo, hi int) {
		if hi-lo == len(first) && !w.chooser.PrefersBatches() {
			release()
		}
		w.each(first[lo:hi])
	}, func(lo, hi int) bool { return w.batch(first[lo:hi]) })
	if w.cfg.OnPrefer != nil {
		w.cfg.OnPrefer(w.chooser.PrefersBatches())
	}
	w.each(again)
}

// msgSize is about what a message weighs against the max payload: its
// data and headers.
func msgSize(m *nats.Msg) int {
	n := len(m.Data)
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// batch writes g as one atomic batch (after Prepare) and reports each
// item; it returns whether a batch was stored (what the Chooser measures).
func (w *Writer[T]) batch(g []*item[T]) bool {
	in := g
	var alone []*item[T]
	if w.cfg.Prepare != nil {
		vs := make([]T, len(g))
		for i, it := range g {
			vs[i] = it.v
		}
		verdicts := w.cfg.Prepare(vs)
		in = make([]*item[T], 0, len(g))
		for i, it := range g {
			var v Verdict
			if i < len(verdicts) {
				v = verdicts[i]
			}
			switch {
			case v.End != nil:
				it.report(*v.End)
			case v.Alone:
				alone = append(alone, it)
			default:
				in = append(in, it)
			}
		}
	}
	defer w.each(alone)
	if len(in) < 2 {
		w.each(in)
		return false
	}
	msgs := make([]*nats.Msg, len(in))
	for i, it := range in {
		msgs[i] = w.cfg.Msg(it.v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.Timeout)
	seqs, err := Publish(ctx, w.cfg.JS, msgs)
	cancel()
	if err != nil {
		if errors.Is(err, ErrDisabled) {
			w.Disable(err)
		} else {
			// Refused as a whole (one message at fault, unnamed) or an
			// unknown outcome: each message's own conditional write says
			// which.
			w.log.Debug("batch not stored as a whole: writing its messages one at a time", "stream", w.cfg.Stream, "messages", len(in), "err", err)
		}
		if w.cfg.OnNotStored != nil {
			w.cfg.OnNotStored(len(in), err)
		}
		w.each(in)
		return false
	}
	if w.cfg.OnBatch != nil {
		w.cfg.OnBatch(len(in))
	}
	var errs []error
	if w.cfg.AfterBatch != nil {
		vs := make([]T, len(in))
		for i, it := range in {
			vs[i] = it.v
		}
		errs = w.cfg.AfterBatch(vs, seqs)
	}
	for i, it := range in {
		r := Result{Seq: seqs[i], Batch: len(in)}
		if i < len(errs) {
			r.Err = errs[i]
		}
		it.report(r)
	}
	return true
}

// each writes items alone, concurrently, reports each, and returns once
// all are reported (a group's wall time then compares with a batch's).
func (w *Writer[T]) each(items []*item[T]) {
	if len(items) == 0 {
		return
	}
	if w.cfg.OnAlone != nil {
		w.cfg.OnAlone(len(items))
	}
	if len(items) == 1 {
		items[0].report(w.alone(items[0].ctx, items[0].v))
		return
	}
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { it.report(w.alone(it.ctx, it.v)) })
	}
	wg.Wait()
}

// alone writes v by itself: Config.Alone, or a plain publish of its
// message.
func (w *Writer[T]) alone(ctx context.Context, v T) Result {
	if w.cfg.Alone != nil {
		r := w.cfg.Alone(ctx, v)
		r.Alone = true
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	ack, err := w.cfg.JS.PublishMsg(ctx, w.cfg.Msg(v))
	r := Result{Alone: true, Ack: ack, Err: err}
	if err == nil && ack != nil {
		r.Seq = ack.Sequence
	}
	return r
}
