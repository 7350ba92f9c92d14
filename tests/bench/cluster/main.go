// Command cluster measures ingest on a 3-node R3 cluster next to one
// server (R1), in one run, rounds interleaved: the services as processes
// (two validators, two quarantiners), every write fsynced
// (sync_interval: always), valid events published by the publisher through
// its import, and the time from the first publish until LEDGER holds them
// all. A fraction exhausts at the downstream so that the final drain is
// measured too (records/s).
//
//	go run ./tests/bench/cluster -n 20000 -rounds 2
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"

	"github.com/deadletter/deadletter/tests/internal/chaos"
)

func main() {
	n := flag.Int("n", 20000, "events per phase")
	rounds := flag.Int("rounds", 2, "rounds of R1 then R3 (ABBA order)")
	flag.Parse()
	ctx := context.Background()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
	dir, err := os.MkdirTemp("", "deadletter-bench-cluster-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bins, err := chaos.Build(ctx, root, filepath.Join(dir, "bin"))
	if err != nil {
		log.Fatal(err)
	}
	order := []int{}
	for r := range *rounds {
		if r%2 == 0 {
			order = append(order, 1, 3)
		} else {
			order = append(order, 3, 1)
		}
	}
	for i, nodes := range order {
		o := chaos.DefaultOptions()
		o.Events, o.Nodes, o.Kills, o.ServerRestarts = *n, nodes, 0, false
		o.Malformed, o.Transient, o.Republished, o.Exhausting = 0, 0, 0, 0.05
		o.Dir, o.Bins = filepath.Join(dir, fmt.Sprintf("run-%d", i)), bins
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
	}
}
