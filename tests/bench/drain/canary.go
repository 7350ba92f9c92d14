package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// runCanary measures what a canary of canary events adds to a drain of n
// records: rounds rounds, each seeding n fresh records and draining them
// with the canary, then n more drained without (the order alternating from
// round to round, so that the growing QUARANTINE stream and a warming
// machine weigh on both alike). A drain's time is its state's
// FinishedAt - StartedAt (selection included).
func runCanary(n, concurrency, canary, rounds int, syncAlways bool) error {
	ctx := context.Background()
	env, err := benchenv.Start(ctx, syncAlways)
	if err != nil {
		return err
	}
	defer env.Close()
	srv, nc, js := env.Server, env.NC, env.JS
	fmt.Printf("deadletter canary benchmark: drains of %d records with canary %d and without, %d rounds interleaved, %d CPUs, max_concurrency %d\n",
		n, canary, rounds, runtime.NumCPU(), concurrency)
	stopServices, err := startPipeline(srv.ClientURL(), 1, quarantiner.DefaultConfig().Workers)
	if err != nil {
		return err
	}
	defer stopServices()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "-child", srv.ClientURL(), "-concurrency", strconv.Itoa(concurrency), "-child-log-canary")
	benchenv.DieWithParent(cmd)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	if err := waitPing(nc, "redriver"); err != nil {
		return err
	}
	var with, without []time.Duration
	next := 0
	for round := range rounds {
		for k := range 2 {
			useCanary := (round+k)%2 == 0
			if _, err := seed(ctx, js, next, n); err != nil {
				return err
			}
			next += n
			req := api.DrainStartRequest{RatePerSecond: new(float64), MaxConcurrency: concurrency}
			if useCanary {
				req.Canary = canary
			} else {
				req.NoGuard = true // the baseline: no default guard either
			}
			st, err := drainToEnd(nc, req)
			if err != nil {
				return err
			}
			if st.Status != api.DrainCompleted || st.Committed != n {
				return fmt.Errorf("drain %s: %s, committed %d of %d", st.DrainID, st.Status, st.Committed, n)
			}
			took := st.FinishedAt.Sub(st.StartedAt)
			label := "without canary"
			if useCanary {
				with, label = append(with, took), fmt.Sprintf("canary %d", canary)
			} else {
				without = append(without, took)
			}
			fmt.Printf("round %d: %-14s %s (%.0f records/s)\n", round+1, label, took.Round(time.Millisecond), float64(n)/took.Seconds())
		}
	}
	mw, mo := median(with), median(without)
	// Each round's pair ran back to back on a stream of about the same
	// size: the median of the pairs' differences is the steadier figure.
	diffs := make([]time.Duration, len(with))
	for i := range with {
		diffs[i] = with[i] - without[i]
	}
	md := median(diffs)
	fmt.Printf("median: canary %s, without %s; median of the rounds' differences: the canary adds %s (%+.1f%%)\n",
		mw.Round(time.Millisecond), mo.Round(time.Millisecond), md.Round(time.Millisecond), 100*md.Seconds()/mo.Seconds())
	figure := func(key string, v float64, unit string) {
		fmt.Printf("FIGURE key=%s value=%.6g unit=%s fsync=%s events=%d rounds=%d\n", key, v, unit,
			map[bool]string{false: "off", true: "always"}[syncAlways], n, rounds)
	}
	figure("drain_canary_added", float64(md.Milliseconds()), "ms")
	return nil
}

// canaryLines is a log handler passing on only the redriver's DRAIN_CANARY
// lines (the canary's figures and how long it took).
type canaryLines struct{ slog.Handler }

func (h canaryLines) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != "DRAIN_CANARY" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h canaryLines) WithAttrs(as []slog.Attr) slog.Handler {
	return canaryLines{h.Handler.WithAttrs(as)}
}

func (h canaryLines) WithGroup(name string) slog.Handler {
	return canaryLines{h.Handler.WithGroup(name)}
}

// drainToEnd starts a drain and polls it until it ends.
func drainToEnd(nc *nats.Conn, req api.DrainStartRequest) (api.DrainState, error) {
	var rep api.DrainStartReply
	if err := request(nc, api.DrainStart, req, &rep, 10*time.Second); err != nil {
		return api.DrainState{}, err
	}
	var st api.DrainState
	for {
		time.Sleep(20 * time.Millisecond)
		if err := request(nc, api.DrainStatus, api.DrainIDRequest{DrainID: rep.DrainID}, &st, 10*time.Second); err != nil {
			return st, err
		}
		if st.FinishedAt != nil || st.Status == api.DrainPaused {
			return st, nil
		}
	}
}

// median returns the median of ds.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
