// Command cluster measures ingest on a 3-node R3 cluster next to one
// server (R1), in one run, rounds interleaved: the services as processes
// (two validators, two quarantiners), every write fsynced
// (sync_interval: always), valid events published by the publisher through
// its import, and the time from the first publish until LEDGER holds them
// all. A fraction exhausts at the downstream so that the final drain is
// measured too (records/s).
//
// With -raw (issue #17's goal 2) each run first measures raw publishing on
// the same servers (a copy of EVENTS, same replicas) in the workload's
// producer mode, and with -async both publish asynchronously (4,000 in
// flight) instead of 64 waiting publishers; each run prints ingest next to
// raw, the CPU of every process per event, and FIGURE lines for
// tests/bench/goals.
//
//	go run ./tests/bench/cluster -n 20000 -rounds 2
//	go run ./tests/bench/cluster -n 10000 -rounds 1 -raw -async -r3-only
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"path/filepath"
	"time"

	"github.com/deadletter/deadletter/tests/internal/chaos"
)

func main() {
	n := flag.Int("n", 20000, "events per phase")
	rounds := flag.Int("rounds", 2, "rounds of R1 then R3 (ABBA order)")
	raw := flag.Bool("raw", false, "each run first measures raw publishing of -n events on the same servers")
	async := flag.Bool("async", false, "publish asynchronously (raw and workload) instead of 64 publishers waiting for acks")
	r3Only := flag.Bool("r3-only", false, "only the R3 runs")
	flag.Parse()
	ctx := context.Background()
	bins, dir, cleanup, err := chaos.BuildTemp(ctx, "deadletter-bench-cluster-")
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	order := []int{}
	for r := range *rounds {
		switch {
		case *r3Only:
			order = append(order, 3)
		case r%2 == 0:
			order = append(order, 1, 3)
		default:
			order = append(order, 3, 1)
		}
	}
	mode := "64 waiting publishers"
	if *async {
		mode = "async, 4,000 in flight"
	}
	var rawN, ingN [4]int
	var rawD, ingD, rawCPU, ingCPU [4]time.Duration
	for i, nodes := range order {
		o := chaos.DefaultOptions()
		o.Events, o.Nodes, o.Kills, o.ServerRestarts = *n, nodes, 0, false
		o.Malformed, o.Transient, o.Republished, o.Exhausting = 0, 0, 0, 0.05
		o.Dir, o.Bins = filepath.Join(dir, fmt.Sprintf("run-%d", i)), bins
		o.AsyncPublish = *async
		if *raw {
			o.RawEvents = *n
		}
		rep, err := chaos.Run(ctx, o)
		if err != nil {
			log.Fatal(err)
		}
		if p := rep.Problems(); len(p) > 0 {
			log.Fatalf("R%d: %v", min(nodes, 3), p)
		}
		commits := rep.Committed - rep.DrainCommitted
		fmt.Printf("R%d: ingest %d events committed in %s: %.0f events/s (acknowledged publishes %.0f/s); drain %d records in %s: %.0f records/s\n",
			min(nodes, 3), commits, rep.CommitTime.Round(1e6), float64(commits)/rep.CommitTime.Seconds(),
			float64(rep.Published)/rep.PublishTime.Seconds(), rep.Drained, rep.DrainTime.Round(1e6),
			float64(rep.Drained)/rep.DrainTime.Seconds())
		r := min(nodes, 3)
		ingN[r] += commits
		ingD[r] += rep.CommitTime
		ingCPU[r] += rep.CommitCPU
		if *raw {
			rawN[r] += *n
			rawD[r] += time.Duration(float64(*n) / rep.RawRate * float64(time.Second))
			rawCPU[r] += rep.RawCPU
			fmt.Printf("R%d: raw publish %.0f msg/s (%s, fsync always); ingest %.1f %% of raw; CPU %.1f µs per ingested event, %.1f µs per raw message (every node and service process and this one)\n",
				r, rep.RawRate, mode, 100*float64(commits)/rep.CommitTime.Seconds()/rep.RawRate,
				us(rep.CommitCPU)/float64(commits), us(rep.RawCPU)/float64(*n))
		}
	}
	for _, r := range []int{1, 3} {
		if ingN[r] == 0 {
			continue
		}
		figure := func(key string, v float64, unit string) {
			fmt.Printf("FIGURE key=%s value=%.6g unit=%s fsync=always events=%d rounds=%d\n", fmt.Sprintf("r%d_%s", r, key), v, unit, *n, *rounds)
		}
		figure("ingest", float64(ingN[r])/ingD[r].Seconds(), "events/s")
		figure("ingest_cpu", us(ingCPU[r])/float64(ingN[r]), "us/event")
		if rawN[r] > 0 {
			figure("raw", float64(rawN[r])/rawD[r].Seconds(), "msg/s")
			figure("raw_cpu", us(rawCPU[r])/float64(rawN[r]), "us/msg")
		}
	}
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
