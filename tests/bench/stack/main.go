// Command stack measures ingest through the whole of `make run`: the stack
// of package stack (embedded server with the trust boundary, every
// service), events published by the publisher through its account's
// service import, until LEDGER holds every one. It prints events/s for
// each round; with -rounds it repeats on a fresh store each time, so runs
// of two builds can be interleaved on a noisy machine.
//
//	go run ./tests/bench/stack -n 5000 -sync-always -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

func main() {
	n := flag.Int("n", 20000, "events per round")
	syncAlways := flag.Bool("sync-always", false, "fsync every write (sync_interval: always, the product's default)")
	rounds := flag.Int("rounds", 1, "rounds, each on a fresh store")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the last round's timed part (publish to LEDGER) to this file")
	flag.Parse()
	set, err := sample.Load()
	if err != nil {
		log.Fatal(err)
	}
	events := make([]sample.Event, *n)
	for i := range events {
		if events[i], err = set.Valid(i); err != nil {
			log.Fatal(err)
		}
	}
	for r := range *rounds {
		profile := ""
		if r == *rounds-1 {
			profile = *cpuProfile
		}
		rate, cpu, err := round(events, *syncAlways, profile)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("stack ingest round %d: %d events, sync_always=%v: %.0f events/s, %.1f µs CPU/event\n",
			r+1, len(events), *syncAlways, rate, cpu.Seconds()*1e6/float64(len(events)))
	}
}

// round starts a stack on a fresh store, publishes events as the publisher
// and returns events/s from the first publish until LEDGER holds them all,
// and the CPU time the process (server, services, publisher) spent meanwhile.
// With profile set it writes a CPU profile of that part to the file.
func round(events []sample.Event, syncAlways bool, profile string) (rate float64, cpu time.Duration, err error) {
	rate, err = measure(events, syncAlways, func() func() {
		var prof *os.File
		if profile != "" {
			if prof, err = os.Create(profile); err != nil {
				log.Fatal(err)
			}
			if err := pprof.StartCPUProfile(prof); err != nil {
				log.Fatal(err)
			}
		}
		cpu0 := processCPU()
		return func() {
			cpu = processCPU() - cpu0
			if prof != nil {
				pprof.StopCPUProfile()
				if err := prof.Close(); err != nil {
					log.Fatal(err)
				}
			}
		}
	})
	return rate, cpu, err
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs one round. It calls start just before the first publish and
// the function start returns once LEDGER holds every event.
func measure(events []sample.Event, syncAlways bool, start func() (stop func())) (float64, error) {
	dir, err := os.MkdirTemp("", "bench-stack-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	cfg := stack.DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = filepath.Join(dir, "data"), filepath.Join(dir, "anchors")
	cfg.Port, cfg.SyncAlways, cfg.MetricsAddr = -1, syncAlways, ""
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	st, err := stack.New(cfg, nil)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-st.Ready():
	case err := <-done:
		return 0, fmt.Errorf("stack: %w", err)
	}
	pnc, err := st.ConnectAs(string(access.RolePublisher))
	if err != nil {
		return 0, err
	}
	defer pnc.Close()
	pub, err := jetstream.New(pnc, jetstream.WithPublishAsyncMaxPending(4000), jetstream.WithPublishAsyncTimeout(20*time.Second))
	if err != nil {
		return 0, err
	}
	anc, err := st.ConnectAs(access.Admin)
	if err != nil {
		return 0, err
	}
	defer anc.Close()
	admin, err := jetstream.New(anc)
	if err != nil {
		return 0, err
	}
	ledger, err := admin.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return 0, err
	}
	stop := start()
	t0 := time.Now()
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	for _, e := range events {
		f, err := pub.PublishAsync(e.Subject, e.Data, jetstream.WithStallWait(5*time.Second))
		if err != nil {
			return 0, err
		}
		futures = append(futures, f)
	}
	select {
	case <-pub.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("publish acks timed out")
	}
	lost := 0
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			lost++
			if lost == 1 {
				log.Printf("first failed publish: %v", err)
			}
		}
	}
	if lost > 0 {
		ev, err := admin.Stream(ctx, subjects.EventsStream)
		if err != nil {
			return 0, err
		}
		in, err := ev.Info(ctx)
		if err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%d of %d publishes got no acknowledgement; EVENTS holds %d", lost, len(events), in.State.Msgs)
	}
	for {
		info, err := ledger.Info(ctx)
		if err != nil {
			return 0, err
		}
		if info.State.Msgs >= uint64(len(events)) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(t0)
	stop()
	return float64(len(events)) / elapsed.Seconds(), nil
}
