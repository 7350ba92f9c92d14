// Command document measures the ingest of EPCIS documents (issue 30) under
// sync_interval: always, against a batching single-event producer in the
// same run: for each size (-n, default 10,000 and 100,000 events), in
// interleaved rounds (ABBA), a fresh embedded server and validator
// process, then either the document published whole (in parts and a
// manifest: upload.Publish, as dlqctl publish does) or the same events
// published one per message in atomic batches of -batch; the figure is
// events committed to LEDGER per second from the first publish, and the
// validator process's peak resident set (VmHWM). The load average of the
// machine is printed with the table. `make bench` runs it.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
	"github.com/deadletter/deadletter/tests/internal/chaos"
)

func main() {
	sizes := flag.String("n", "10000,100000", "document sizes in events, comma separated")
	rounds := flag.Int("rounds", 1, "rounds of each pair (document, single events), in ABBA order")
	batchSize := flag.Int("batch", 100, "events per atomic batch of the single-event producer")
	flag.Parse()
	if err := run(*sizes, *rounds, *batchSize); err != nil {
		log.Fatal(err)
	}
}

// result is one phase's figures.
type result struct {
	mode    string
	n       int
	rate    float64
	peakRSS int64
	parts   int
}

func run(sizes string, rounds, batchSize int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "deadletter-bench-document-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "validator")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./services/validator/cmd/validator")
	build.Dir = chaos.Root()
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build validator: %v\n%s", err, out)
	}
	set, err := sample.Load()
	if err != nil {
		return err
	}
	loadBefore := loadavg()
	var results []result
	first := 0
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		for r := range rounds {
			order := []string{"document", "single"}
			if r%2 == 1 {
				order = []string{"single", "document"}
			}
			for _, mode := range order {
				// Fresh identities each phase: nothing is a duplicate.
				data, err := set.Document(fmt.Sprintf("BENCH-%d", first), first, n, nil)
				if err != nil {
					return err
				}
				first += n
				res, err := phase(ctx, bin, dir, mode, n, data, batchSize)
				if err != nil {
					return fmt.Errorf("%s %d: %w", mode, n, err)
				}
				log.Printf("%s n=%d: %.0f events/s, validator peak RSS %.1f MiB", mode, n, res.rate, float64(res.peakRSS)/(1<<20))
				results = append(results, res)
			}
		}
	}
	fmt.Printf("\n| events | producer | events/s committed (sync_interval: always) | validator peak RSS (VmHWM) | parts |\n|---|---|---|---|---|\n")
	for _, r := range results {
		parts := "-"
		if r.mode == "document" {
			parts = strconv.Itoa(r.parts)
		}
		fmt.Printf("| %d | %s | %.0f | %.1f MiB | %s |\n", r.n, r.mode, r.rate, float64(r.peakRSS)/(1<<20), parts)
	}
	fmt.Printf("\nload average before: %s; after: %s\n", loadBefore, loadavg())
	return nil
}

// phase runs one measurement on a fresh server and validator process.
func phase(ctx context.Context, bin, dir, mode string, n int, data []byte, batchSize int) (result, error) {
	env, err := benchenv.Start(ctx, true)
	if err != nil {
		return result{}, err
	}
	defer env.Close()
	logf, err := os.Create(filepath.Join(dir, "validator-"+mode+"-"+strconv.Itoa(n)+".log"))
	if err != nil {
		return result{}, err
	}
	defer logf.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "NATS_URL="+env.URL(), "DEADLETTER_PROVISION=false", "DEADLETTER_CREATE_CONSUMER=true",
		"DEADLETTER_METRICS_ADDR=127.0.0.1:0", "DEADLETTER_SYNC_ALWAYS=true", "DEADLETTER_INSTANCE_ID=bench-validator")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGKILL); _, _ = cmd.Process.Wait() }()
	if err := waitConsumer(ctx, env.JS); err != nil {
		return result{}, err
	}
	res := result{mode: mode, n: n}
	start := time.Now()
	switch mode {
	case "document":
		up, err := upload.Publish(ctx, env.JS, subjects.Event(dscsa.Name, subjects.DocumentType), bytes.NewReader(data), nil)
		if err != nil {
			return result{}, err
		}
		res.parts = up.Parts
	default:
		if err := publishSingles(ctx, env.JS, data, batchSize); err != nil {
			return result{}, err
		}
	}
	if err := waitLedger(ctx, env.JS, uint64(n), 20*time.Minute); err != nil {
		return result{}, err
	}
	res.rate = float64(n) / time.Since(start).Seconds()
	res.peakRSS, err = peakRSS(cmd.Process.Pid)
	return res, err
}

// publishSingles publishes the document's events one per message, on
// their own subjects, in atomic batches.
func publishSingles(ctx context.Context, js jetstream.JetStream, data []byte, size int) error {
	var msgs []*nats.Msg
	_, err := document.Scan(data, func(ev document.Event) error {
		m, err := gate.Decode(ev.Data)
		if err != nil {
			return err
		}
		typ, err := (dscsa.Checker{}).EventType(m)
		if err != nil {
			return err
		}
		msgs = append(msgs, &nats.Msg{Subject: subjects.Event(dscsa.Name, typ), Data: ev.Data, Header: nats.Header{}})
		if len(msgs) == size {
			_, err := batch.Publish(ctx, js, msgs)
			msgs = nil
			return err
		}
		return nil
	})
	if err == nil && len(msgs) > 0 {
		_, err = batch.Publish(ctx, js, msgs)
	}
	return err
}

func waitConsumer(ctx context.Context, js jetstream.JetStream) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := js.Consumer(ctx, subjects.EventsStream, subjects.ValidatorConsumer); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("validator consumer: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitLedger(ctx context.Context, js jetstream.JetStream, n uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		s, err := js.Stream(ctx, subjects.LedgerStream)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("LEDGER has %d of %d after %s", info.State.Msgs, n, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// peakRSS reads VmHWM of pid.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM for %d", pid)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
