// Command chaos is the full chaos run of make chaos: 100,000 events across
// the three domains (10 % malformed, 4 % failing transiently and 1 % for
// good at the downstream, 2 % re-published), two validators and two
// quarantiners, every service killed with SIGKILL three times at random
// moments, the server stopped with SIGTERM and with SIGKILL; then the same
// on a 3-node R3 cluster from the deployment kit's generated files, the
// node leading EVENTS killed and brought back. It prints a figures table
// per phase and exits 1 when anything was lost, doubled or left pending.
//
//	go run ./tests/chaos/cmd/chaos -events 100000 -kills 3 -phases 1,3
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
	"strconv"
	"strings"

	"github.com/deadletter/deadletter/tests/internal/chaos"
)

func main() {
	o := chaos.DefaultOptions()
	flag.IntVar(&o.Events, "events", o.Events, "distinct events published")
	flag.IntVar(&o.Kills, "kills", o.Kills, "SIGKILLs of each service during the workload")
	flag.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the random choices")
	phases := flag.String("phases", "1,3", "the phases to run, by node count: 1 (one server) and/or 3 (a cluster)")
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
	failed := false
	for _, ph := range strings.Split(*phases, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(ph))
		if err != nil || (n != 1 && n != 3) {
			log.Fatalf("phase %q: want 1 or 3", ph)
		}
		po := o
		po.Nodes, po.Dir, po.Bins, po.Logf = n, filepath.Join(dir, "phase-"+ph), bins, log.Printf
		fmt.Printf("\n## %d node(s), R%d\n\n", n, min(n, 3))
		rep, err := chaos.Run(ctx, po)
		if rep != nil {
			fmt.Print(rep.Table())
		}
		if err != nil {
			log.Fatal(err)
		}
		for _, s := range rep.Problems() {
			fmt.Println("FAIL:", s)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
	fmt.Println("PASS: nothing lost, nothing committed twice, every consumer drained")
}
