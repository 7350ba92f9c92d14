// Command sizing measures what the deploy guide's sizing section quotes:
// the peak memory of every process (VmHWM of /proc/<pid>/status) and the
// bytes per message and on disk of every stream, after a run of n events
// through the services as processes on one nats-server process with every
// write fsynced (sync_interval: always, the chaos harness's configuration):
// an ingest with a share malformed and a share exhausting at the
// downstream, then a drain of the exhausted records once the downstream is
// healthy, and the auditor's reconcile and verify over the whole store. No
// kills. It prints the tables the guide quotes, extrapolated to a million
// messages and to the streams' default retention.
//
//	go run ./tests/bench/sizing -n 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/chaos"
)

func main() {
	n := flag.Int("n", 100_000, "distinct events published")
	malformed := flag.Float64("malformed", 0.10, "share of malformed events")
	exhausting := flag.Float64("exhausting", 0.01, "share of valid events failing at the downstream until the drain")
	validators := flag.Int("validators", 1, "validator instances")
	quarantiners := flag.Int("quarantiners", 1, "quarantiner instances")
	flag.Parse()
	ctx := context.Background()
	bins, dir, cleanup, err := chaos.BuildTemp(ctx, "deadletter-bench-sizing-")
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	o := chaos.DefaultOptions()
	o.Events, o.Kills, o.ServerRestarts, o.Nodes = *n, 0, false, 1
	o.Malformed, o.Exhausting, o.Transient, o.Republished = *malformed, *exhausting, 0, 0
	o.Validators, o.Quarantiners = *validators, *quarantiners
	o.Dir, o.Bins = filepath.Join(dir, "run"), bins
	o.Settle = 10 * time.Minute
	o.Logf = log.Printf
	var m measured
	o.Inspect = func(ctx context.Context, s *chaos.System) error { return m.read(ctx, s) }
	rep, err := chaos.Run(ctx, o)
	if err != nil {
		log.Fatal(err)
	}
	if p := rep.Problems(); len(p) > 0 {
		log.Fatalf("the run failed its promise: %v", p)
	}
	fmt.Printf("sizing: %d events (%d malformed, %d exhausting), one nats-server (sync_interval: always), %d validator(s), %d quarantiner(s), one redriver, one auditor; %s, %d CPUs\n",
		rep.Distinct, rep.Malformed, rep.Exhausting, *validators, *quarantiners, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU())
	fmt.Printf("load average at the end (/proc/loadavg): %s\n", loadavg())
	fmt.Printf("ingest %s (publish) + %s (settle); drain of %d exhausted records in %s; audit.verify over %d records\n\n",
		rep.PublishTime.Round(time.Millisecond), rep.SettleTime.Round(time.Millisecond), rep.Drained,
		rep.DrainTime.Round(time.Millisecond), rep.VerifyRecords)
	m.events = rep.Distinct
	fmt.Print(m.memoryTable())
	fmt.Println()
	fmt.Print(m.streamTable())
	fmt.Println()
	fmt.Print(m.retention())
}

// proc is one process's memory at the end of the run.
type proc struct {
	name      string
	hwm, rss  int64 // bytes
	hasStatus bool
}

// stream is one stream's state and its files on disk.
type stream struct {
	name       string
	msgs, size uint64
	disk       int64
	cfg        jetstream.StreamConfig
}

type measured struct {
	events    int // distinct events published
	procs     []proc
	streams   []stream
	storeDisk int64
}

// read takes the measurements while the system still runs.
func (m *measured) read(ctx context.Context, s *chaos.System) error {
	for _, p := range s.Processes() {
		hwm, rss, err := memory(p.PID)
		m.procs = append(m.procs, proc{name: p.Name, hwm: hwm, rss: rss, hasStatus: err == nil})
	}
	nc, err := s.Connect(access.Admin)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	disk, total, err := diskByStream(s.StoreDir())
	if err != nil {
		return err
	}
	m.storeDisk = total
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		m.streams = append(m.streams, stream{name: info.Config.Name, msgs: info.State.Msgs, size: info.State.Bytes,
			disk: disk[info.Config.Name], cfg: info.Config})
	}
	if err := l.Err(); err != nil {
		return err
	}
	sort.Slice(m.streams, func(i, j int) bool { return m.streams[i].name < m.streams[j].name })
	return nil
}

// memory reads VmHWM (the peak resident set) and VmRSS of pid.
func memory(pid int) (hwm, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, perr := strconv.ParseInt(f[1], 10, 64)
		if perr != nil {
			continue
		}
		switch f[0] {
		case "VmHWM:":
			hwm = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return hwm, rss, nil
}

// diskByStream sums the allocated size of the files under every
// .../streams/<NAME>/ directory of the store (as du does), by stream name,
// and of the whole store.
func diskByStream(store string) (map[string]int64, int64, error) {
	out := map[string]int64{}
	var total int64
	err := filepath.WalkDir(store, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		size := allocated(path)
		total += size
		parts := strings.Split(filepath.ToSlash(path), "/")
		for i := len(parts) - 3; i >= 0; i-- {
			if parts[i] == "streams" {
				out[parts[i+1]] += size
				break
			}
		}
		return nil
	})
	return out, total, err
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// memoryTable renders each process's peak and a GOMEMLIMIT for its service.
func (m *measured) memoryTable() string {
	var b strings.Builder
	b.WriteString("| process | peak RSS (VmHWM) | RSS at the end | GOMEMLIMIT (events like these) | worst case, every worker on a 1 MiB event (arithmetic) |\n|---|---|---|---|---|\n")
	for _, p := range m.procs {
		if !p.hasStatus {
			fmt.Fprintf(&b, "| %s | not read | | | |\n", p.name)
			continue
		}
		typical, worst := limit(p.name, p.hwm)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", p.name, mib(p.hwm), mib(p.rss), typical, worst)
	}
	return b.String()
}

// workers is, per service, how many events its default concurrency holds
// at once (validator and quarantiner workers, a drain's default
// concurrency; the auditor reads one record at a time).
var workers = map[string]int{"validator": 256, "quarantiner": 128, "redriver": 16, "auditor": 1}

// limit recommends GOMEMLIMIT for events like the run's: twice the
// measured peak (room for the collector at its default target), rounded up
// to 64 MiB; and the worst case when every worker holds an event of the
// largest accepted size (the validator's payload limit, 1 MiB), each in
// about three copies (the message, its parsed form, the record or request
// built from it): arithmetic, not measured. nats-server gets none (its
// memory follows its streams' indexes).
func limit(name string, hwm int64) (typical, worst string) {
	service := strings.SplitN(name, "-", 2)[0]
	w, ok := workers[service]
	if !ok {
		return "—", "—"
	}
	const step = 64 << 20
	want := (2*hwm + step - 1) / step * step
	return fmt.Sprintf("%dMiB", want>>20), fmt.Sprintf("%d MiB", w*3)
}

// streamTable renders each stream's bytes per message and on disk, per
// million messages.
func (m *measured) streamTable() string {
	var b strings.Builder
	b.WriteString("| stream | messages | State.Bytes | bytes/msg | on disk (du) | disk bytes/msg | per million msgs (disk) |\n|---|---|---|---|---|---|---|\n")
	for _, s := range m.streams {
		per, diskPer := "—", "—"
		million := "—"
		if s.msgs > 0 {
			per = fmt.Sprintf("%.0f", float64(s.size)/float64(s.msgs))
			dp := float64(s.disk) / float64(s.msgs)
			diskPer = fmt.Sprintf("%.0f", dp)
			// A stream of a few messages is mostly its block's
			// preallocation: no per-message figure.
			if s.msgs >= 100 {
				million = fmt.Sprintf("%.2f GiB", dp*1e6/(1<<30))
			} else {
				diskPer = "(few messages)"
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", s.name, s.msgs, mib(int64(s.size)), per, mib(s.disk), diskPer, million)
	}
	fmt.Fprintf(&b, "| whole store (du) | | | | %s | %.0f per event | %.2f GiB per million events |\n", mib(m.storeDisk),
		float64(m.storeDisk)/float64(max(m.events, 1)), float64(m.storeDisk)/float64(max(m.events, 1))*1e6/(1<<30))
	return b.String()
}

// retention renders every stream's retention as provisioned and what the
// default retention holds on disk.
func (m *measured) retention() string {
	var b strings.Builder
	b.WriteString("| stream | retention | max age | max bytes | discard |\n|---|---|---|---|---|\n")
	var events *stream
	for i, s := range m.streams {
		if s.name == subjects.EventsStream {
			events = &m.streams[i]
		}
		age := "forever"
		if s.cfg.MaxAge > 0 {
			age = s.cfg.MaxAge.String()
		}
		size := "unbounded"
		if s.cfg.MaxBytes > 0 {
			size = fmt.Sprintf("%d GiB", s.cfg.MaxBytes>>30)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", s.name, s.cfg.Retention, age, size, s.cfg.Discard)
	}
	if events != nil && events.msgs > 0 {
		d := streams.DefaultOptions()
		per := float64(events.disk) / float64(events.msgs)
		secs := d.EventsMaxAge.Seconds()
		fmt.Fprintf(&b, "\nEVENTS at its default retention (%s): disk = rate (events/s) × %.0f s × %.0f B = %.2f GiB per event/s; "+
			"its default max bytes (%d GiB, discard new: publishes are refused when full) holds %s days only up to a sustained %.1f events/s\n",
			d.EventsMaxAge, secs, per, secs*per/(1<<30), d.EventsMaxBytes>>30,
			strconv.FormatFloat(d.EventsMaxAge.Hours()/24, 'f', 0, 64), float64(d.EventsMaxBytes)/(secs*per))
	}
	return b.String()
}

// allocated is the space the file at path takes on disk (its blocks, as du
// counts them), or its length when the system does not say.
func allocated(path string) int64 {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// loadavg is the machine's 1, 5 and 15 minute load averages: other work
// on the machine moves every figure.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
