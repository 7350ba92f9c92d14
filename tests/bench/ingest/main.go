// Command ingest measures deadletter's ingest path against raw JetStream on
// one embedded server and one set of payloads, and prints three figures:
// the raw async-publish rate into a stream configured like EVENTS, the
// end-to-end ingest rate (publish → validate → idempotent commit to LEDGER),
// and their ratio. `make bench` runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func main() {
	n := flag.Int("n", 50000, "events per phase")
	sync := flag.Bool("sync-always", false, "fsync every write (sync_interval: always)")
	workers := flag.Int("workers", validator.DefaultConfig().Workers, "validator workers")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the ingest phase to this file")
	flag.Parse()
	if err := run(*n, *sync, *workers, *cpuprofile); err != nil {
		log.Fatal(err)
	}
}

type event struct {
	subject string
	data    []byte
}

func run(n int, syncAlways bool, workers int, cpuprofile string) error {
	dir, err := os.MkdirTemp("", "deadletter-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1, SyncAlways: syncAlways})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	o := streams.DefaultOptions()
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		return err
	}
	raw := streams.Events(o)
	raw.Name, raw.Subjects = "RAW", []string{"raw.>"}
	if _, err := js.CreateStream(ctx, raw); err != nil {
		return err
	}
	events, err := makeEvents(n)
	if err != nil {
		return err
	}
	var bytes int
	for _, e := range events {
		bytes += len(e.data)
	}
	fmt.Printf("deadletter ingest benchmark: %d events (mean %d B), %d CPUs, sync_always=%v, %d validator workers\n",
		n, bytes/n, runtime.NumCPU(), syncAlways, workers)

	// Phase 1: raw JetStream async publish of the same payloads.
	start := time.Now()
	if err := publishAll(ctx, js, events, func(e event) string { return "raw." + strings.TrimPrefix(e.subject, "events.") }); err != nil {
		return err
	}
	rawRate := float64(n) / time.Since(start).Seconds()

	// Phase 2: the same payloads through the validator into LEDGER.
	vnc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return err
	}
	defer vnc.Close()
	cfg := validator.DefaultConfig()
	cfg.Workers = workers
	cfg.Provision = false
	v, err := validator.New(vnc, cfg, nil)
	if err != nil {
		return err
	}
	vctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- v.Run(vctx) }()
	if err := waitConsumer(ctx, js); err != nil {
		return err
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start = time.Now()
	if err := publishAll(ctx, js, events, func(e event) string { return e.subject }); err != nil {
		return err
	}
	ledger, err := js.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return err
	}
	for {
		info, err := ledger.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs >= uint64(n) {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("ingest stalled at %d of %d (stats %+v)", info.State.Msgs, n, v.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ingestRate := float64(n) / time.Since(start).Seconds()
	stop()
	if err := <-done; err != nil {
		return err
	}
	st := v.Stats()
	if st.Committed != uint64(n) || st.Structural != 0 || st.Transient != 0 {
		return fmt.Errorf("unexpected validator stats %+v", st)
	}
	fmt.Printf("raw JetStream async publish: %8.0f msg/s\n", rawRate)
	fmt.Printf("end-to-end ingest:           %8.0f events/s (publish → validate → commit to LEDGER)\n", ingestRate)
	fmt.Printf("ratio:                       %8.1f %%\n", 100*ingestRate/rawRate)
	return nil
}

// publishAll publishes every event asynchronously and waits for all acks.
func publishAll(ctx context.Context, js jetstream.JetStream, events []event, subject func(event) string) error {
	for _, e := range events {
		if _, err := js.PublishAsync(subject(e), e.data); err != nil {
			return err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("publish acks timed out")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func waitConsumer(ctx context.Context, js jetstream.JetStream) error {
	for range 500 {
		if _, err := js.Consumer(ctx, subjects.EventsStream, subjects.ValidatorConsumer); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("validator consumer never appeared")
}

// makeEvents builds n distinct valid events, round-robin over every valid
// example of the three domains, each given a unique identity.
func makeEvents(n int) ([]event, error) {
	g, err := gate.New(0)
	if err != nil {
		return nil, err
	}
	var templates []event
	for _, c := range gate.Checkers() {
		dir := "testdata/" + c.Domain() + "/valid"
		entries, err := fs.ReadDir(schemas.FS, dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			b, err := fs.ReadFile(schemas.FS, path.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			doc, err := gate.Decode(b)
			if err != nil {
				return nil, err
			}
			typ, err := c.EventType(doc)
			if err != nil {
				return nil, err
			}
			templates = append(templates, event{subject: subjects.Event(c.Domain(), typ), data: b})
		}
	}
	out := make([]event, 0, n)
	for i := range n {
		t := templates[i%len(templates)]
		doc, err := gate.Decode(t.data)
		if err != nil {
			return nil, err
		}
		unique(doc, t.subject, i)
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		if _, err := g.Check(t.subject, b); err != nil {
			return nil, fmt.Errorf("bench event %d (%s): %w", i, t.subject, err)
		}
		out = append(out, event{subject: t.subject, data: b})
	}
	return out, nil
}

// unique gives an event a distinct idempotency identity.
func unique(doc map[string]any, subject string, i int) {
	id := fmt.Sprintf("BENCH-%09d", i)
	switch {
	case strings.HasPrefix(subject, "events.pharmacy."):
		doc["transaction_id"] = id
	case strings.HasPrefix(subject, "events.dscsa."):
		doc["eventID"] = "urn:uuid:00000000-0000-4000-8000-" + fmt.Sprintf("%012d", i)
	case strings.HasPrefix(subject, "events.fsma."):
		if ref, ok := doc["reference_document"].(map[string]any); ok {
			ref["number"] = id
		}
	}
}
