// Command writepath measures the server's write primitives on one R1 file
// stream, under sync_interval: always and without fsync, side by side in
// one run: one message per async publish (a window in flight), atomic
// batches of several sizes, and fast batches. It is the floor every write
// path of deadletter is built from: which primitive is cheapest for how
// many messages ready together.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"golang.org/x/sync/errgroup"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

func main() {
	n := flag.Int("n", 20000, "messages per measurement")
	size := flag.Int("size", 530, "payload bytes")
	sizes := flag.String("batch", "2,8,32,128,512", "atomic batch sizes")
	rounds := flag.Int("rounds", 2, "rounds (interleaved)")
	modes := flag.String("modes", "always,off", "fsync modes")
	flag.Parse()
	if err := run(*n, *size, *sizes, *rounds, *modes); err != nil {
		fmt.Fprintln(os.Stderr, "writepath:", err)
		os.Exit(1)
	}
}

type env struct {
	nc *nats.Conn
	js jetstream.JetStream
	i  int
}

func run(n, size int, sizes string, rounds int, modes string) error {
	ctx := context.Background()
	payload := []byte(strings.Repeat("x", size))
	var ks []int
	for _, f := range strings.Split(sizes, ",") {
		k, err := strconv.Atoi(f)
		if err != nil {
			return err
		}
		ks = append(ks, k)
	}
	for _, mode := range strings.Split(modes, ",") {
		dir, _ := os.MkdirTemp("", "writepath-")
		defer os.RemoveAll(dir)
		s, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1, SyncAlways: mode == "always"})
		if err != nil {
			return err
		}
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			return err
		}
		js, _ := jetstream.New(nc)
		e := &env{nc: nc, js: js}
		for r := 1; r <= rounds; r++ {
			measure(ctx, e, mode, r, "async publish, window 256", n, func(st string) error { return asyncPub(ctx, js, st, n, payload, 256) })
			for _, k := range ks {
				measure(ctx, e, mode, r, fmt.Sprintf("atomic batch %d, 1 in flight", k), n, func(st string) error { return atomic(ctx, js, st, n, payload, k, 1) })
				measure(ctx, e, mode, r, fmt.Sprintf("atomic batch %d, 4 in flight", k), n, func(st string) error { return atomic(ctx, js, st, n, payload, k, 4) })
			}
			measure(ctx, e, mode, r, "fast batch", n, func(st string) error { return fast(ctx, js, st, n, payload) })
		}
		nc.Close()
		s.Shutdown()
	}
	return nil
}

func measure(ctx context.Context, e *env, mode string, round int, name string, n int, f func(stream string) error) {
	e.i++
	st := fmt.Sprintf("W%d", e.i)
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: st, Subjects: []string{"w" + strconv.Itoa(e.i) + ".>"}, Storage: jetstream.FileStorage, AllowAtomicPublish: true, AllowBatchPublish: true}); err != nil {
		fmt.Println("create:", err)
		return
	}
	defer e.js.DeleteStream(ctx, st)
	cpu0 := benchenv.CPUTime()
	t0 := time.Now()
	err := f(st)
	d := time.Since(t0)
	cpu := benchenv.CPUTime() - cpu0
	if err != nil {
		fmt.Printf("fsync=%-6s round %d %-32s error: %v\n", mode, round, name, err)
		return
	}
	info, _ := e.js.Stream(ctx, st)
	stored := uint64(0)
	if info != nil {
		stored = info.CachedInfo().State.Msgs
	}
	fmt.Printf("fsync=%-6s round %d %-32s %8.0f msg/s %6.1f µs CPU/msg (stored %d)\n", mode, round, name, float64(n)/d.Seconds(), float64(cpu.Microseconds())/float64(n), stored)
}

func subj(st string, i int) string {
	return "w" + strings.TrimPrefix(st, "W") + ".s" + strconv.Itoa(i)
}

func asyncPub(ctx context.Context, js jetstream.JetStream, st string, n int, p []byte, window int) error {
	// A context of its own: at most window publishes in flight.
	wjs, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(window))
	if err != nil {
		return err
	}
	futs := make([]jetstream.PubAckFuture, 0, n)
	for i := 0; i < n; i++ {
		f, err := wjs.PublishAsync(subj(st, i), p)
		if err != nil {
			return err
		}
		futs = append(futs, f)
	}
	return benchenv.AwaitAcks(ctx, futs)
}

func atomic(ctx context.Context, js jetstream.JetStream, st string, n int, p []byte, k, inflight int) error {
	var g errgroup.Group
	g.SetLimit(inflight)
	for i := 0; i < n; i += k {
		msgs := make([]*nats.Msg, 0, k)
		for j := i; j < min(i+k, n); j++ {
			m := nats.NewMsg(subj(st, j))
			m.Data = p
			msgs = append(msgs, m)
		}
		g.Go(func() error {
			if len(msgs) == 1 {
				_, err := js.PublishMsg(ctx, msgs[0])
				return err
			}
			_, err := batch.Publish(ctx, js, msgs)
			return err
		})
	}
	return g.Wait()
}

func fast(ctx context.Context, js jetstream.JetStream, st string, n int, p []byte) error {
	fp, err := jetstreamext.NewFastPublisher(js)
	if err != nil {
		return err
	}
	for i := 0; i < n-1; i++ {
		if _, err := fp.Add(subj(st, i), p); err != nil {
			return err
		}
	}
	_, err = fp.Commit(ctx, subj(st, n-1), p)
	return err
}
