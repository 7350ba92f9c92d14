// Command chaos is the full chaos run of make chaos: 100,000 events across
// the three domains (10 % malformed, 4 % failing transiently and 1 % for
// good at the downstream, 2 % re-published), two validators and two
// quarantiners, every service killed with SIGKILL three times at random
// moments, the server stopped with SIGTERM and with SIGKILL. It prints the
// figures table and exits 1 when anything was lost, doubled or left
// pending.
//
//	go run ./tests/chaos/cmd/chaos -events 100000 -kills 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"

	"github.com/deadletter/deadletter/tests/internal/chaos"
)

func main() {
	o := chaos.DefaultOptions()
	flag.IntVar(&o.Events, "events", o.Events, "distinct events published")
	flag.IntVar(&o.Kills, "kills", o.Kills, "SIGKILLs of each service during the workload")
	flag.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the random choices")
	keep := flag.String("dir", "", "keep the store, secrets and logs here (default: a temporary directory, removed)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "deadletter-chaos-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	bins, err := chaos.Build(ctx, root, filepath.Join(dir, "bin"))
	if err != nil {
		log.Fatal(err)
	}
	o.Dir, o.Bins, o.Logf = dir, bins, log.Printf
	rep, err := chaos.Run(ctx, o)
	if rep != nil {
		fmt.Print(rep.Table())
	}
	if err != nil {
		log.Fatal(err)
	}
	if p := rep.Problems(); len(p) > 0 {
		for _, s := range p {
			fmt.Println("FAIL:", s)
		}
		os.Exit(1)
	}
	fmt.Println("PASS: nothing lost, nothing committed twice, every consumer drained")
}
