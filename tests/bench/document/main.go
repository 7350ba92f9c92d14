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
//
// With -shipment xml (or json) the document is a generated shipment as
// distributors send it (tests/internal/shipment: EPCIS 1.2 XML with an
// SBDH, items packed into cases and SSCC pallets, shipping events) with
// -mistakes planted mistakes, and the figure is the time until every
// event has its outcome: the correct ones committed to LEDGER, each
// mistake's failure report in FAILURES (for the validator to hand to the
// quarantiner). The single events are the same events, published one per
// message on the subject their bizStep names.
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
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
	"github.com/deadletter/deadletter/tests/internal/chaos"
	"github.com/deadletter/deadletter/tests/internal/shipment"
)

func main() {
	sizes := flag.String("n", "10000,100000", "document sizes in events, comma separated")
	rounds := flag.Int("rounds", 1, "rounds of each pair (document, single events), in ABBA order")
	batchSize := flag.Int("batch", 100, "events per atomic batch of the single-event producer")
	ship := flag.String("shipment", "", "xml or json: a generated shipment (tests/internal/shipment) instead of the example events")
	mistakes := flag.Int("mistakes", 14, "planted mistakes of a -shipment document")
	flag.Parse()
	if err := run(*sizes, *rounds, *batchSize, source{format: shipment.Format(*ship), mistakes: *mistakes}); err != nil {
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
	// took is the time to every outcome; failed the failure reports.
	took   time.Duration
	failed int
}

// source is what the documents hold: the example events (format ""), or
// a generated shipment of that format with mistakes planted.
type source struct {
	format   shipment.Format
	mistakes int
}

// sized is one phase's document: its bytes, its events and how many of
// them must commit.
type sized struct {
	data              []byte
	events, committed int
}

// document returns a document of about n events whose identities begin at
// first: the example events, or a shipment of at most n events (its
// pallets of 20 cases of 12 items: 61 events each, a shipping event per
// 3 pallets).
func (src source) document(set *sample.Set, first, n int) (sized, error) {
	if src.format == "" {
		data, err := set.Document(fmt.Sprintf("BENCH-%d", first), first, n, nil)
		return sized{data, n, n}, err
	}
	const cases, perShipping = 20, 3
	pallets := max(1, (n-src.mistakes)*perShipping/(perShipping*(3*cases+1)+1))
	s, err := shipment.Generate(shipment.Config{Seed: uint64(first + 1), Format: src.format, ID: fmt.Sprintf("DESADV-BENCH-%d Müller & Söhne", first),
		Pallets: pallets, CasesPerPallet: cases, ItemsPerCase: 12, PalletsPerShipping: perShipping, Mistakes: src.mistakes})
	if err != nil {
		return sized{}, err
	}
	return sized{s.Data, s.Events, s.Events - len(s.Mistakes)}, nil
}

func run(sizes string, rounds, batchSize int, src source) error {
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
				doc, err := src.document(set, first, n)
				if err != nil {
					return err
				}
				first += n
				res, err := phase(ctx, bin, dir, mode, doc, batchSize)
				if err != nil {
					return fmt.Errorf("%s %d: %w", mode, n, err)
				}
				log.Printf("%s n=%d (%.1f MiB): every outcome in %.1f s, %.0f events/s, %d failure reports, validator peak RSS %.1f MiB",
					mode, res.n, float64(len(doc.data))/(1<<20), res.took.Seconds(), res.rate, res.failed, float64(res.peakRSS)/(1<<20))
				results = append(results, res)
			}
		}
	}
	what := "example events"
	if src.format != "" {
		what = fmt.Sprintf("a %s shipment with %d planted mistakes", src.format, src.mistakes)
	}
	fmt.Printf("\n%s\n\n| events | producer | every outcome | events/s (sync_interval: always) | failure reports | validator peak RSS (VmHWM) | parts |\n|---|---|---|---|---|---|---|\n", what)
	for _, r := range results {
		parts := "-"
		if r.mode == "document" {
			parts = strconv.Itoa(r.parts)
		}
		fmt.Printf("| %d | %s | %.1f s | %.0f | %d | %.1f MiB | %s |\n", r.n, r.mode, r.took.Seconds(), r.rate, r.failed, float64(r.peakRSS)/(1<<20), parts)
	}
	fmt.Printf("\nload average before: %s; after: %s\n", loadBefore, loadavg())
	return nil
}

// phase runs one measurement on a fresh server and validator process.
func phase(ctx context.Context, bin, dir, mode string, doc sized, batchSize int) (result, error) {
	n, data := doc.events, doc.data
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
	if err := waitMsgs(ctx, env.JS, subjects.LedgerStream, uint64(doc.committed), 20*time.Minute); err != nil {
		return result{}, err
	}
	if err := waitMsgs(ctx, env.JS, subjects.FailuresStream, uint64(doc.events-doc.committed), time.Minute); err != nil {
		return result{}, err
	}
	res.took = time.Since(start)
	res.rate = float64(n) / res.took.Seconds()
	res.failed = doc.events - doc.committed
	res.peakRSS, err = peakRSS(cmd.Process.Pid)
	return res, err
}

// publishSingles publishes the document's events one per message, on
// their own subjects, in atomic batches.
func publishSingles(ctx context.Context, js jetstream.JetStream, data []byte, size int) error {
	var msgs []*nats.Msg
	_, err := document.Scan(data, func(ev document.Event) error {
		// The subject its bizStep names (a valid token when it names
		// none, so that the gate reports the bizStep's own fault).
		msgs = append(msgs, &nats.Msg{Subject: document.EventSubject("", ev.Data), Data: ev.Data, Header: nats.Header{}})
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

// waitMsgs waits until stream holds at least n messages.
func waitMsgs(ctx context.Context, js jetstream.JetStream, stream string, n uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		s, err := js.Stream(ctx, stream)
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
			return fmt.Errorf("%s has %d of %d after %s", stream, info.State.Msgs, n, limit)
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
