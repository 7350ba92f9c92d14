// Package chaos runs deadletter as an operator does, each service its own
// process on a real nats-server process, while it kills them: kill -9 of
// every service at random moments of a workload across the three domains
// (valid, malformed, re-published, failing transiently or for good at the
// downstream), the server stopped with SIGTERM and with SIGKILL. Then it
// accounts for every acknowledged publish on its own (committed once in
// LEDGER, or sealed in QUARANTINE; the downstream's accepted keys) and
// compares with the auditor's reconcile and verify, after the operator
// has drained every exhausted record once the downstream is healthy again.
//
// The reduced run is a test of tests/chaos (make test); the full one is
// make chaos.
package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// Options size a run.
type Options struct {
	// Events is the number of distinct events published (valid and
	// malformed); Republished more are second copies of valid ones.
	Events int
	// Malformed, Transient, Exhausting and Republished are shares of
	// Events: malformed events (half schema-invalid, half not JSON),
	// valid ones whose downstream call fails twice before it succeeds,
	// valid ones whose downstream always fails (they exhaust their
	// deliveries and are quarantined), and valid ones published twice.
	Malformed, Transient, Exhausting, Republished float64
	// Validators and Quarantiners are how many instances of each run.
	Validators, Quarantiners int
	// Kills is how many times each service (one of its instances, at
	// random) is killed with SIGKILL during the workload.
	Kills int
	// ServerRestarts stops the server during the workload, once with
	// SIGTERM and once with SIGKILL, and starts it again on its store.
	// On a cluster (Nodes 3) it SIGKILLs the node leading EVENTS instead,
	// and brings it back.
	ServerRestarts bool
	// Nodes is 1 (one server, R1 streams) or 3 (a cluster from the
	// deployment kit's generated files, R3 streams).
	Nodes int
	// Failpoint arms a point of package failpoint (e.g.
	// "validator.after-downstream") in the first instance of its service,
	// for its first start only: a targeted window. Empty: none.
	Failpoint string
	// Seed seeds the random choices (kill moments, instances, shares).
	Seed uint64
	// Dir holds the store, the secrets and every process's log.
	Dir string
	// Bins are the programs (Build).
	Bins Binaries
	// Settle bounds the wait, after the last publish, for every event
	// to reach its end. Default 3 minutes.
	Settle time.Duration
	// RawEvents, when positive, first measures raw publishing on the same
	// servers before the services see an event: that many of the
	// workload's payloads published into RAW, a copy of EVENTS (same
	// replicas, no sources), in the workload's producer mode (Report.RawRate).
	RawEvents int
	// AsyncPublish publishes the workload (and the raw phase) with async
	// publishes, a window of 4,000 in flight, resending the few that fail
	// one by one; only for runs without disruptions. Default: 64
	// publishers each waiting for its acknowledgement.
	AsyncPublish bool
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
	// Inspect, when set, is called at the end of Run, after the
	// accounting and before the teardown, with the system still running
	// (to read its stores' sizes, its processes' memory).
	Inspect func(ctx context.Context, s *System) error
}

// DefaultOptions is the full run of make chaos.
func DefaultOptions() Options {
	return Options{
		Events: 100_000, Malformed: 0.10, Transient: 0.04, Exhausting: 0.01, Republished: 0.02,
		Validators: 2, Quarantiners: 2, Kills: 3, ServerRestarts: true, Nodes: 1, Seed: 1,
	}
}

// Report is what a run found.
type Report struct {
	// Published counts the publishes the server acknowledged (distinct
	// events plus second copies); Malformed, Republished, Transient and
	// Exhausting the planned kinds among them.
	Published, Distinct, Malformed, Republished, Transient, Exhausting int
	// PublishRetries counts publishes sent again after an error or no
	// acknowledgement (the server down, a reconnect).
	PublishRetries int
	// Committed is the number of distinct keys in LEDGER, LedgerMsgs its
	// messages; Doubles the keys with more than one.
	Committed, LedgerMsgs, Doubles int
	// Quarantined counts the chains in QUARANTINE; QuarantinedValid the
	// valid events among the expected ones sealed there.
	Quarantined, QuarantinedValid int
	// Unaccounted lists the acknowledged events found neither committed
	// nor quarantined (by key or payload hash).
	Unaccounted []string
	// DownstreamAccepted is the number of keys the downstream accepted,
	// DownstreamRepeats the POSTs of an accepted key it de-duplicated,
	// DownstreamNotInLedger the accepted keys LEDGER lacks.
	DownstreamAccepted, DownstreamRepeats, DownstreamNotInLedger int
	// Kills counts SIGKILLs per service, Restarts the restarts after an
	// unexpected exit, ServerStops the server's stops (SIGTERM, SIGKILL).
	Kills       map[string]int
	Restarts    map[string]int
	ServerStops []string
	// ReconcileUnaccounted and ReconcileEvents are audit.reconcile's;
	// VerifyOK, VerifyProblems, VerifyRecords audit.verify's.
	ReconcileEvents, ReconcileUnaccounted int
	// Repaired counts the repairs the auditor's reconciliation recorded in
	// AUDIT (each event once per de-duplication window), RepairedRecords
	// the records a repair sealed (the rest were sealed meanwhile by the
	// usual path): the last backstop, behind the validator's own report,
	// its spare delivery and the advisory.
	Repaired, RepairedRecords int
	// ReconcileUnsourced is how many LEDGER entries audit.reconcile found
	// naming no EVENTS message with their content and key.
	ReconcileUnsourced int
	// ReconcileExamples describes up to five of the events audit.reconcile
	// calls unaccounted: what LEDGER, QUARANTINE and IDEMPOTENCY hold for
	// each.
	ReconcileExamples []string
	VerifyOK          bool
	// VerifyDetails are audit.verify's first problems, in words.
	VerifyDetails  []string
	VerifyProblems int
	VerifyRecords  uint64
	// Drained is how many exhausted records the final drain selected,
	// DrainCommitted how many of them it committed, DrainTime how long
	// it took.
	Drained, DrainCommitted int
	DrainTime               time.Duration
	// PendingConsumers lists every durable consumer with pending or
	// unacknowledged messages at the end.
	PendingConsumers []string
	// PublishTime is the workload's duration, SettleTime the wait after
	// it until every event reached its end; CommitTime the time from the
	// first publish until LEDGER held every event planned to commit.
	PublishTime, SettleTime, CommitTime time.Duration
	// CommitCPU is the user+sys CPU of every process (each node, each
	// service, this process) from the first publish until LEDGER held
	// every planned commit (set with CommitTime).
	CommitCPU time.Duration
	// RawRate is Options.RawEvents' publishes per second, RawCPU the CPU
	// of the nodes and this process meanwhile.
	RawRate float64
	RawCPU  time.Duration
}

// Problems lists every way the run failed its promise; empty means nothing
// was lost, nothing doubled, nothing forged.
func (r Report) Problems() []string {
	var p []string
	if n := len(r.Unaccounted); n > 0 {
		p = append(p, fmt.Sprintf("%d acknowledged events unaccounted (first: %s)", n, r.Unaccounted[0]))
	}
	if r.Doubles > 0 {
		p = append(p, fmt.Sprintf("%d keys committed more than once", r.Doubles))
	}
	if r.DownstreamNotInLedger > 0 {
		p = append(p, fmt.Sprintf("%d keys the downstream accepted are not in LEDGER", r.DownstreamNotInLedger))
	}
	if r.DownstreamAccepted != r.Committed {
		p = append(p, fmt.Sprintf("downstream accepted %d keys, LEDGER holds %d", r.DownstreamAccepted, r.Committed))
	}
	if r.ReconcileUnaccounted > 0 {
		p = append(p, fmt.Sprintf("audit.reconcile: %d unaccounted (%s)", r.ReconcileUnaccounted, strings.Join(r.ReconcileExamples, "; ")))
	}
	if r.ReconcileUnsourced > 0 {
		p = append(p, fmt.Sprintf("audit.reconcile: %d LEDGER entries unsourced", r.ReconcileUnsourced))
	}
	if !r.VerifyOK {
		p = append(p, fmt.Sprintf("audit.verify: %d problems: %s", r.VerifyProblems, strings.Join(r.VerifyDetails, "; ")))
	}
	if len(r.PendingConsumers) > 0 {
		p = append(p, "consumers not drained: "+strings.Join(r.PendingConsumers, ", "))
	}
	return p
}

// Table renders the figures.
func (r Report) Table() string {
	var b strings.Builder
	row := func(k string, v any) { fmt.Fprintf(&b, "| %-44s | %v |\n", k, v) }
	b.WriteString("| figure | value |\n|---|---|\n")
	row("acknowledged publishes", r.Published)
	row("distinct events", r.Distinct)
	row("malformed / re-published", fmt.Sprintf("%d / %d", r.Malformed, r.Republished))
	row("downstream transient / always failing", fmt.Sprintf("%d / %d", r.Transient, r.Exhausting))
	row("publishes retried", r.PublishRetries)
	row("kills (SIGKILL) per service", formatCounts(r.Kills))
	row("restarts after an unexpected exit", formatCounts(r.Restarts))
	row("server stops", strings.Join(r.ServerStops, ", "))
	row("LEDGER keys / messages", fmt.Sprintf("%d / %d", r.Committed, r.LedgerMsgs))
	row("keys committed twice", r.Doubles)
	row("QUARANTINE chains (valid events among them)", fmt.Sprintf("%d (%d)", r.Quarantined, r.QuarantinedValid))
	row("unaccounted (independent count)", len(r.Unaccounted))
	row("downstream accepted keys / repeats de-duplicated", fmt.Sprintf("%d / %d", r.DownstreamAccepted, r.DownstreamRepeats))
	row("downstream keys not in LEDGER", r.DownstreamNotInLedger)
	row("drained exhausted records / committed", fmt.Sprintf("%d / %d (%s)", r.Drained, r.DrainCommitted, r.DrainTime.Round(time.Millisecond)))
	row("repairs asked (AUDIT) / records a repair sealed", fmt.Sprintf("%d / %d", r.Repaired, r.RepairedRecords))
	row("audit.reconcile events / unaccounted / unsourced LEDGER entries", fmt.Sprintf("%d / %d / %d", r.ReconcileEvents, r.ReconcileUnaccounted, r.ReconcileUnsourced))
	row("audit.verify records / problems", fmt.Sprintf("%d / %d", r.VerifyRecords, r.VerifyProblems))
	row("consumers with pending messages", len(r.PendingConsumers))
	row("first publish to every planned commit in LEDGER", r.CommitTime.Round(time.Millisecond))
	row("workload / settle time", fmt.Sprintf("%s / %s", r.PublishTime.Round(time.Millisecond), r.SettleTime.Round(time.Millisecond)))
	return b.String()
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// event is one planned publish.
type event struct {
	subject string
	data    []byte
	key     string // idempotency key of a valid event
	hash    string // sha256 of the bytes, for malformed ones
	fate    string // fateCommit, fateExhaust, fateMalformed
	copy    bool   // a second copy of an earlier event
}

const (
	fateCommit    = "commit"
	fateExhaust   = "exhaust"
	fateMalformed = "malformed"
)

// plan builds the workload: distinct events in a random order of domains,
// second copies of some valid ones later in the sequence.
func plan(o Options, rng *rand.Rand, down *downstream) ([]event, error) {
	set, err := sample.Load()
	if err != nil {
		return nil, err
	}
	g, err := gate.New(0)
	if err != nil {
		return nil, err
	}
	var out []event
	for i := range o.Events {
		e, err := set.Valid(i)
		if err != nil {
			return nil, err
		}
		if rng.Float64() < o.Malformed {
			data := malformed(e.Data, i)
			if _, err := g.Check(e.Subject, data); err == nil {
				// A schema open to extensions (EPCIS) takes the extra
				// member: cut it short instead.
				data = malformed(e.Data, i|1)
			}
			sum := sha256.Sum256(data)
			out = append(out, event{subject: e.Subject, data: data, hash: hex.EncodeToString(sum[:]), fate: fateMalformed})
			continue
		}
		env, err := g.Check(e.Subject, e.Data)
		if err != nil {
			return nil, fmt.Errorf("chaos: sample event %d is not valid: %w", i, err)
		}
		ev := event{subject: e.Subject, data: e.Data, key: env.IdempotencyKey, fate: fateCommit}
		switch x := rng.Float64(); {
		case x < o.Exhausting:
			ev.fate = fateExhaust
			down.failAlways(ev.key)
		case x < o.Exhausting+o.Transient:
			down.failFirst(ev.key, 2)
		}
		out = append(out, ev)
	}
	valid := make([]int, 0, len(out))
	for i, e := range out {
		if e.fate != fateMalformed {
			valid = append(valid, i)
		}
	}
	copies := int(float64(o.Events) * o.Republished)
	for range copies {
		orig := out[valid[rng.IntN(len(valid))]]
		orig.copy = true
		at := rng.IntN(len(out)) + 1
		out = append(out[:at], append([]event{orig}, out[at:]...)...)
	}
	return out, nil
}

// malformed turns a valid event into a malformed one, unique to i: even i
// gets a member no schema allows (it parses, the schema refuses it), odd i
// is cut short (not JSON).
func malformed(valid []byte, i int) []byte {
	body := strings.TrimSuffix(strings.TrimSpace(string(valid)), "}")
	if i%2 == 0 {
		return fmt.Appendf(nil, `%s,"chaos_unexpected_member":%d}`, body, i)
	}
	return fmt.Appendf(nil, `%s,"chaos_cut":%d`, body, i)
}

// cluster is the running system of a run.
type cluster struct {
	o       Options
	sec     *access.Secrets
	ports   []int   // client port of each node
	http    []int   // monitoring port of each node of a cluster
	servers []*proc // one per node
	url     string  // every node's client URL
	svcs    map[string][]*proc
	down    *downstream
	report  *Report
	mu      sync.Mutex
	stopped atomic.Bool
	started time.Time // the first publish
	cpu0    time.Duration
}

// cpu is the user+sys CPU so far of every node and service process (their
// current runs) and of this process.
func (c *cluster) cpu() time.Duration {
	t := benchenv.CPUTime()
	procs := slices.Clone(c.servers)
	for _, ps := range c.svcs {
		procs = append(procs, ps...)
	}
	for _, p := range procs {
		p.mu.Lock()
		if p.cmd != nil && p.cmd.Process != nil {
			t += benchenv.ChildCPUTime(p.cmd.Process.Pid)
		}
		p.mu.Unlock()
	}
	return t
}

// rawPublish publishes n of the events' payloads into RAW, a copy of
// EVENTS on these servers, as the workload publishes, and returns the
// rate and the CPU spent.
func (c *cluster) rawPublish(ctx context.Context, events []event, n int) (float64, time.Duration, error) {
	nc, err := c.admin()
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, err
	}
	o := streams.DefaultOptions()
	o.Replicas = c.replicas()
	raw := streams.Events(o)
	raw.Name, raw.Subjects, raw.Sources = "RAW", []string{"raw.>"}, nil
	if _, err := js.CreateStream(ctx, raw); err != nil {
		return 0, 0, err
	}
	defer func() { _ = js.DeleteStream(ctx, raw.Name) }()
	evs := make([]event, 0, n)
	for i := range n {
		e := events[i%len(events)]
		e.subject = "raw." + strings.TrimPrefix(e.subject, "events.")
		evs = append(evs, e)
	}
	cpu0, start := c.cpu(), time.Now()
	if c.o.AsyncPublish {
		_, err = publishAsync(ctx, js, evs)
	} else {
		_, err = c.publishWith(ctx, js, evs, nil)
	}
	if err != nil {
		return 0, 0, err
	}
	return float64(n) / time.Since(start).Seconds(), c.cpu() - cpu0, nil
}

// publishAsync publishes the events asynchronously, at most 4,000 in
// flight, then resends one by one those that failed; it returns how many
// were acknowledged.
func publishAsync(ctx context.Context, js jetstream.JetStream, events []event) (int, error) {
	futures := make([]jetstream.PubAckFuture, len(events))
	for i, e := range events {
		f, err := js.PublishAsync(e.subject, e.data, jetstream.WithStallWait(time.Minute))
		if err != nil {
			return 0, err
		}
		futures[i] = f
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("chaos: publish acks timed out")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	done := 0
	for i, f := range futures {
		select {
		case <-f.Ok():
			done++
			continue
		case <-f.Err():
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := js.Publish(pctx, events[i].subject, events[i].data)
		cancel()
		if err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// Run runs the workload with its kills and returns the report. An error
// means the run could not be carried out (not that it found problems:
// those are Report.Problems).
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Settle == 0 {
		o.Settle = 3 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	c := &cluster{o: o, svcs: map[string][]*proc{}, report: &Report{Kills: map[string]int{}, Restarts: map[string]int{}}}
	if err := c.setUp(ctx); err != nil {
		c.tearDown()
		return nil, err
	}
	defer c.tearDown()
	events, err := plan(o, rng, c.down)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		switch {
		case e.copy:
			c.report.Republished++
		case e.fate == fateMalformed:
			c.report.Malformed++
		case e.fate == fateExhaust:
			c.report.Exhausting++
		}
	}
	c.report.Transient = c.down.transientKeys()
	c.report.Distinct = len(events) - c.report.Republished

	superCtx, stopSuper := context.WithCancel(ctx)
	defer stopSuper()
	go c.supervise(superCtx)

	acts := c.schedule(rng)
	if o.RawEvents > 0 {
		if c.report.RawRate, c.report.RawCPU, err = c.rawPublish(ctx, events, o.RawEvents); err != nil {
			return c.report, err
		}
	}
	start := time.Now()
	c.started, c.cpu0 = start, c.cpu()
	acked, err := c.publish(ctx, events, acts)
	c.report.PublishTime = time.Since(start)
	if err != nil {
		return c.report, err
	}
	c.report.Published = acked
	o.Logf("chaos: %d publishes acknowledged in %s; settling", acked, c.report.PublishTime.Round(time.Millisecond))
	settled := time.Now()
	if err := c.settle(ctx, events); err != nil {
		o.Logf("chaos: not settled: %v", err)
	}
	c.report.SettleTime = time.Since(settled)
	// The outage ends; the operator drains every exhausted record through
	// the same gate. Exhausted events the downstream had already accepted
	// (a validator that gave up after its call) commit now, once.
	c.down.heal()
	// The operator drains once every service is back: a process killed
	// late, or while the cluster elected leaders, may still be in its
	// set-up (package retry) when the workload has settled.
	if err := c.waitServices(ctx); err != nil {
		return c.report, err
	}
	if err := c.drain(ctx); err != nil {
		return c.report, err
	}
	stopSuper()
	if err := c.account(ctx, events); err != nil {
		return c.report, err
	}
	if o.Inspect != nil {
		if err := o.Inspect(ctx, &System{c: c}); err != nil {
			return c.report, err
		}
	}
	return c.report, nil
}

// setUp writes the secrets and the server's configuration, starts the
// server, provisions the streams and consumers as the admin and starts the
// services.
func (c *cluster) setUp(ctx context.Context) error {
	o := c.o
	dirs := map[string]string{"secrets": "", "logs": "", "store": "", "anchors": ""}
	for k := range dirs {
		dirs[k] = filepath.Join(o.Dir, k)
		if err := os.MkdirAll(dirs[k], 0o700); err != nil {
			return err
		}
	}
	sec, err := access.NewSecrets(access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		return err
	}
	if _, err := sec.EnsureClusterUsers(access.WithBcryptCost(access.MinBcryptCost)); err != nil {
		return err
	}
	c.sec = sec
	confs, err := c.serverConfigs(dirs["secrets"], dirs["store"])
	if err != nil {
		return err
	}
	for i, conf := range confs {
		c.servers = append(c.servers, &proc{name: fmt.Sprintf("nats-server-%d", i+1), bin: o.Bins["nats-server"],
			args: []string{"-c", conf}, log: filepath.Join(dirs["logs"], fmt.Sprintf("nats-server-%d.log", i+1))})
	}
	for i := range c.servers {
		if err := c.startServer(ctx, i); err != nil {
			return err
		}
	}
	if err := c.waitHealthy(ctx); err != nil {
		return err
	}
	c.down = newDownstream()

	url := c.url
	validatorEnv := []string{
		"DEADLETTER_DOWNSTREAM_URL=" + c.down.url(), "DEADLETTER_DOWNSTREAM_TIMEOUT=2s", "DEADLETTER_CLAIM_LEASE=4s",
		"DEADLETTER_MAX_DELIVER=5", "DEADLETTER_ACK_WAIT=3s", "DEADLETTER_BACKOFF_BASE=50ms", "DEADLETTER_BACKOFF_MAX=250ms",
	}
	// The administrator's step, with the settings the services read. A
	// cluster healthy a moment ago may still lose its meta leader while
	// its nodes settle: try again until provision passes (an attempt may
	// take its whole minute).
	deadline := time.Now().Add(3 * time.Minute)
	for attempt := 1; ; attempt++ {
		prov := osexec.CommandContext(ctx, o.Bins["provision"], "--nats-url", url, "--user", access.Admin,
			"--password", sec.Users[access.Admin].Password, "--replicas", fmt.Sprint(c.replicas()))
		prov.Env = append(os.Environ(), validatorEnv...)
		out, err := prov.CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("chaos: provision: %v\n%s", err, out)
		}
		o.Logf("chaos: provision attempt %d: %v", attempt, err)
		time.Sleep(time.Second)
	}

	common := func(user string) ([]string, error) {
		seed := filepath.Join(dirs["secrets"], user+".nk")
		if err := os.WriteFile(seed, []byte(sec.Users[user].Seed), 0o600); err != nil {
			return nil, err
		}
		return []string{"NATS_URL=" + url, "NATS_NKEY=" + seed, "DEADLETTER_METRICS_ADDR=", "DEADLETTER_REPLICAS=" + fmt.Sprint(c.replicas()),
			"DEADLETTER_PROVISION=false", "DEADLETTER_CREATE_CONSUMER=false", "GOTRACEBACK=all"}, nil
	}
	replaySecret := filepath.Join(dirs["secrets"], "replay.secret")
	if err := os.WriteFile(replaySecret, []byte(sec.ReplaySecret), 0o600); err != nil {
		return err
	}
	signingKey := filepath.Join(dirs["anchors"], "audit-signing.nk")
	if _, err := auditor.NewSigningKey(signingKey); err != nil {
		return err
	}
	extra := map[string][]string{
		access.Validator: validatorEnv,
		access.Redriver:  {"DEADLETTER_REPLAY_SECRET_FILE=" + replaySecret},
		access.Auditor: {"DEADLETTER_AUDIT_SIGNING_KEY_FILE=" + signingKey,
			"DEADLETTER_AUDIT_EXPORT_FILE=" + filepath.Join(dirs["anchors"], "checkpoints.jsonl"),
			"DEADLETTER_AUDIT_CHECKPOINT_INTERVAL=5s",
			// The last backstop acts within the settle: an event the
			// validator settled with no outcome is repaired after 90 s
			// (a quarantiner killed under this load lags by tens of
			// seconds: a shorter grace races the usual path).
			"DEADLETTER_AUDIT_RECONCILE_INTERVAL=15s", "DEADLETTER_AUDIT_GRACE=90s", "DEADLETTER_AUDIT_RECONCILE_WINDOW=1h"},
	}
	count := map[string]int{access.Validator: o.Validators, access.Quarantiner: o.Quarantiners, access.Redriver: 1, access.Auditor: 1}
	for _, name := range []string{access.Validator, access.Quarantiner, access.Redriver, access.Auditor} {
		env, err := common(name)
		if err != nil {
			return err
		}
		for i := range count[name] {
			p := &proc{
				name: fmt.Sprintf("%s-%d", name, i+1), bin: o.Bins[name], once: c.failpointEnv(name, i),
				env: append(append([]string{fmt.Sprintf("DEADLETTER_INSTANCE_ID=%s-%d", name, i+1)}, env...), extra[name]...),
				log: filepath.Join(dirs["logs"], fmt.Sprintf("%s-%d.log", name, i+1)),
			}
			if err := p.start(); err != nil {
				return err
			}
			c.svcs[name] = append(c.svcs[name], p)
		}
	}
	return c.waitServices(ctx)
}

// failpointEnv arms o.Failpoint in instance i of service name, when it is
// that service's point and i is 0.
func (c *cluster) failpointEnv(name string, i int) []string {
	if c.o.Failpoint == "" || i != 0 || !strings.HasPrefix(c.o.Failpoint, name+".") {
		return nil
	}
	return []string{failpoint.Env + "=" + c.o.Failpoint}
}

// replicas is the replication of every stream: 1, or 3 on a cluster.
func (c *cluster) replicas() int { return min(c.o.Nodes, 3) }

// serverConfigs writes each node's configuration file and returns their
// paths: one server rendered by the embedded server's own renderer, or a
// cluster generated by the deployment kit, on free loopback ports.
func (c *cluster) serverConfigs(secretsDir, storeDir string) ([]string, error) {
	if c.o.Nodes <= 1 {
		port, err := benchenv.FreePort()
		if err != nil {
			return nil, err
		}
		accounts, err := access.ServerConfig(c.sec)
		if err != nil {
			return nil, err
		}
		f := embedded.File{ServerName: "chaos", Host: "127.0.0.1", Port: port, StoreDir: storeDir, SyncAlways: true,
			MaxPayload: embedded.DefaultMaxPayload, Accounts: accounts}
		text, err := f.Render()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(secretsDir, "nats-server.conf")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return nil, err
		}
		c.ports, c.url = []int{port}, fmt.Sprintf("nats://127.0.0.1:%d", port)
		return []string{path}, nil
	}
	ko := kit.Options{ListenHost: "127.0.0.1", HTTPHost: "127.0.0.1", Replicas: c.replicas()}
	for i := range c.o.Nodes {
		var ports [3]int
		for k := range ports {
			p, err := benchenv.FreePort()
			if err != nil {
				return nil, err
			}
			ports[k] = p
		}
		name := fmt.Sprintf("n%d", i+1)
		ko.Nodes = append(ko.Nodes, kit.Node{Name: name, Host: "127.0.0.1", ClientPort: ports[0], ClusterPort: ports[1],
			HTTPPort: ports[2], StoreDir: filepath.Join(storeDir, name)})
		c.ports, c.http = append(c.ports, ports[0]), append(c.http, ports[2])
	}
	kitDir := filepath.Join(secretsDir, "kit")
	if _, err := kit.Generate(kitDir, c.sec, ko); err != nil {
		return nil, err
	}
	c.url = ko.ClientURLs()
	paths := make([]string, len(ko.Nodes))
	for i, n := range ko.Nodes {
		paths[i] = filepath.Join(kitDir, kit.NodesDir, n.Name, kit.ServerConfFile)
	}
	return paths, nil
}

// waitHealthy waits until every node of a cluster reports itself healthy
// on its monitoring port (/healthz: JetStream running, a meta leader
// known, its streams current), for up to two minutes: provisioning before
// then can spend its whole minute waiting for a meta leader.
func (c *cluster) waitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	client := &http.Client{Timeout: 2 * time.Second} // a node slow to answer is asked again
	for i, port := range c.http {
		url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
		for {
			err := healthy(client, url)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("chaos: %s never healthy: %w\n%s", c.servers[i].name, err, c.servers[i].tail(4000))
			}
			time.Sleep(100 * time.Millisecond) // a poll: the cluster is forming
		}
	}
	return nil
}

// healthy asks one node's /healthz.
func healthy(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}

// startServer starts node i's process and waits until it listens.
func (c *cluster) startServer(ctx context.Context, i int) error {
	p := c.servers[i]
	if err := p.start(); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := waitListening(wctx, p, c.ports[i]); err != nil {
		return fmt.Errorf("chaos: %s did not listen: %w\n%s", p.name, err, p.tail(4000))
	}
	return nil
}

// admin connects as the break-glass administrator.
func (c *cluster) admin(opts ...nats.Option) (*nats.Conn, error) {
	return c.connect(access.Admin, opts...)
}

// connect connects as user (a service, a person or the admin).
func (c *cluster) connect(user string, opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.Name("chaos-" + user), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.Timeout(10 * time.Second)}, c.sec.NATSOptions(user)...)
	return nats.Connect(c.url, append(all, opts...)...)
}

// waitServices waits until every service answers discovery (asked as the
// viewer, through its account's import of $SRV.>: a service may answer
// only there).
func (c *cluster) waitServices(ctx context.Context) error {
	nc, err := c.connect(access.DefaultPerson(access.RoleViewer))
	if err != nil {
		return err
	}
	defer nc.Close()
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range []string{access.Validator, access.Quarantiner, access.Redriver, access.Auditor} {
		endpoints := access.ServiceEndpoints(name) // ready once it serves every one
		for {
			actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			err := endpoint.Serving(actx, nc, name, endpoints...)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("chaos: %s never served its endpoints: %w\n%s", name, err, c.svcs[name][0].tail(4000))
			}
			time.Sleep(20 * time.Millisecond) // a poll: the service is starting
		}
	}
	return nil
}

// action is one planned disruption, done when the workload has published
// the share at of its events.
type action struct {
	at   float64
	what string // a service name, "server-term" or "server-kill"
}

// schedule plans the kills: each service o.Kills times, the server's
// stops, at random moments of the workload.
func (c *cluster) schedule(rng *rand.Rand) []action {
	var acts []action
	for _, name := range []string{access.Validator, access.Quarantiner, access.Redriver, access.Auditor} {
		for range c.o.Kills {
			acts = append(acts, action{at: 0.05 + 0.9*rng.Float64(), what: name})
		}
	}
	switch {
	case c.o.ServerRestarts && len(c.servers) > 1:
		acts = append(acts, action{at: 0.4 + 0.2*rng.Float64(), what: "leader-kill"})
	case c.o.ServerRestarts:
		acts = append(acts, action{at: 0.3 + 0.1*rng.Float64(), what: "server-term"}, action{at: 0.7 + 0.1*rng.Float64(), what: "server-kill"})
	}
	sort.Slice(acts, func(i, j int) bool { return acts[i].at < acts[j].at })
	return acts
}

// disrupt carries out one action.
func (c *cluster) disrupt(ctx context.Context, a action, rng *rand.Rand) {
	switch a.what {
	case "server-term", "server-kill", "leader-kill":
		sig, node, what := syscall.SIGTERM, 0, ""
		if a.what != "server-term" {
			sig = syscall.SIGKILL
		}
		if a.what == "leader-kill" {
			node, what = c.eventsLeader(ctx), " (EVENTS leader)"
		}
		c.o.Logf("chaos: %s %s%s", c.servers[node].name, sig, what)
		c.servers[node].signal(sig, true)
		c.mu.Lock()
		c.report.ServerStops = append(c.report.ServerStops, c.servers[node].name+" "+sig.String()+what)
		c.mu.Unlock()
		if len(c.servers) > 1 {
			// Let the others elect new leaders and carry on without it.
			time.Sleep(5 * time.Second)
		}
		if err := c.startServer(ctx, node); err != nil {
			c.o.Logf("chaos: server restart: %v", err)
		}
	default:
		c.mu.Lock()
		ps := c.svcs[a.what]
		p := ps[rng.IntN(len(ps))]
		c.report.Kills[a.what]++
		c.mu.Unlock()
		c.o.Logf("chaos: kill -9 %s", p.name)
		p.signal(syscall.SIGKILL, true)
		if err := p.start(); err != nil {
			c.o.Logf("chaos: restart %s: %v", p.name, err)
		}
	}
}

// eventsLeader returns the index of the node leading EVENTS (0 when it
// cannot tell).
func (c *cluster) eventsLeader(ctx context.Context) int {
	nc, err := c.admin()
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ictx, subjects.EventsStream)
	if err != nil || s.CachedInfo().Cluster == nil {
		return 0
	}
	for i := range c.servers {
		if fmt.Sprintf("n%d", i+1) == s.CachedInfo().Cluster.Leader {
			return i
		}
	}
	return 0
}

// supervise restarts a service that exited on its own (as systemd's
// Restart=always would), counting it.
func (c *cluster) supervise(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		var down []*proc
		for _, ps := range c.svcs {
			for _, p := range ps {
				if !p.running() {
					down = append(down, p)
				}
			}
		}
		c.mu.Unlock()
		for _, p := range down {
			// A process being killed and started by disrupt holds its
			// lock; one found down here exited by itself.
			if p.running() {
				continue
			}
			c.o.Logf("chaos: %s exited by itself; restarting:\n%s", p.name, p.tail(1500))
			c.mu.Lock()
			c.report.Restarts[strings.SplitN(p.name, "-", 2)[0]]++
			c.mu.Unlock()
			_ = p.start()
		}
	}
}

// publish publishes every event as the publisher (through its account's
// import), each until the server acknowledges it, with a bounded number in
// flight, and carries out the actions as the workload passes them.
func (c *cluster) publish(ctx context.Context, events []event, acts []action) (int, error) {
	nc, err := c.connect(string(access.RolePublisher))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	if c.o.AsyncPublish && len(acts) == 0 {
		return publishAsync(ctx, js, events)
	}
	return c.publishWith(ctx, js, events, acts)
}

// publishWith publishes the events with 64 publishers, each waiting for its
// acknowledgement, and carries out the actions as the workload passes them.
func (c *cluster) publishWith(ctx context.Context, js jetstream.JetStream, events []event, acts []action) (int, error) {
	rng := rand.New(rand.NewPCG(c.o.Seed+1, 7))
	var (
		next    atomic.Int64
		done    atomic.Int64
		retries atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		perr    error
	)
	const workers = 64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(events) || ctx.Err() != nil {
					return
				}
				e := events[i]
				for attempt := 0; ; attempt++ {
					pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := js.Publish(pctx, e.subject, e.data)
					cancel()
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						errOnce.Do(func() { perr = ctx.Err() })
						return
					}
					retries.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
				done.Add(1)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	ai := 0
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-finished:
			for ; ai < len(acts); ai++ { // any left (a short run)
				c.disrupt(ctx, acts[ai], rng)
			}
			c.report.PublishRetries = int(retries.Load())
			return int(done.Load()), perr
		case <-t.C:
			share := float64(done.Load()) / float64(len(events))
			for ai < len(acts) && acts[ai].at <= share {
				c.disrupt(ctx, acts[ai], rng)
				ai++
			}
		}
	}
}

// settle waits until every durable consumer has nothing pending or
// unacknowledged and every expected outcome is there, or o.Settle passes.
func (c *cluster) settle(ctx context.Context, events []event) error {
	nc, err := c.admin()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(c.o.Settle)
	// First the cheap look: LEDGER's message count, until it holds every
	// event planned to commit (the ingest figure, CommitTime).
	want := uint64(0)
	for _, e := range events {
		if e.fate == fateCommit && !e.copy {
			want++
		}
	}
	// Only a run without disruptions measures it: with kills an event
	// planned to commit may exhaust and commit only at the final drain.
	measuring := c.o.Kills == 0 && !c.o.ServerRestarts && c.o.Failpoint == ""
	for measuring && time.Now().Before(deadline) {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := js.Stream(lctx, subjects.LedgerStream)
		cancel()
		if err == nil && s.CachedInfo().State.Msgs >= want {
			c.report.CommitTime = time.Since(c.started)
			c.report.CommitCPU = c.cpu() - c.cpu0
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	var logged time.Time
	for {
		// A JetStream request made while a cluster elects its leaders gets
		// no answer: bound each look and look again.
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		pending, perr := pendingConsumers(lctx, js)
		missing := -1
		if perr == nil && len(pending) == 0 {
			st, err := readStores(lctx, js)
			if err == nil {
				missing = len(st.unaccounted(events))
			} else {
				perr = err
			}
		}
		cancel()
		if missing == 0 {
			return nil
		}
		if perr != nil && time.Since(logged) > 10*time.Second {
			c.o.Logf("chaos: settling: %v", perr)
			logged = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: consumers pending %v (%v), %d events without an outcome (-1: not read)", c.o.Settle, pending, perr, missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// account counts, on its own, what the stores hold for the events, and
// asks the auditor for its reconcile and verify.
func (c *cluster) account(ctx context.Context, events []event) error {
	nc, err := c.admin()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st, err := readStores(ctx, js)
	if err != nil {
		return err
	}
	r := c.report
	r.Committed, r.LedgerMsgs = len(st.ledger), st.ledgerMsgs
	for _, n := range st.ledger {
		if n > 1 {
			r.Doubles++
		}
	}
	r.Quarantined = st.chains
	for _, e := range events {
		if e.fate != fateMalformed && st.chainsByKey[e.key] && !e.copy {
			r.QuarantinedValid++
		}
	}
	r.Unaccounted = st.unaccounted(events)
	accepted, repeats := c.down.accepted()
	r.DownstreamAccepted, r.DownstreamRepeats = len(accepted), repeats
	for k := range accepted {
		if st.ledger[k] == 0 {
			r.DownstreamNotInLedger++
		}
	}
	if r.PendingConsumers, err = pendingConsumers(ctx, js); err != nil {
		return err
	}
	// The auditor, asked as the viewer through the role's imports.
	vnc, err := c.connect(access.DefaultPerson(access.RoleViewer))
	if err != nil {
		return err
	}
	defer vnc.Close()
	var rec api.ReconcileReply
	if err := request(vnc, api.AuditReconcile, api.ReconcileRequest{From: time.Now().Add(-24 * time.Hour), Grace: "0s"}, &rec); err != nil {
		return err
	}
	r.ReconcileEvents, r.ReconcileUnaccounted, r.ReconcileUnsourced = rec.Events, rec.Counts[api.ReconcileUnaccounted], rec.Ledger.Unsourced
	r.ReconcileExamples = describe(ctx, js, st, rec.Unaccounted)
	audit, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		return err
	}
	ai, err := audit.Info(ctx, jetstream.WithSubjectFilter(subjects.AuditAction("reconcile", ">")))
	if err != nil {
		return err
	}
	r.Repaired, r.RepairedRecords = int(ai.State.Msgs), st.repaired
	var ver api.VerifyReply
	if err := request(vnc, api.AuditVerify, api.VerifyRequest{}, &ver); err != nil {
		return err
	}
	r.VerifyOK, r.VerifyProblems, r.VerifyRecords = ver.OK, ver.ProblemCount, ver.Records
	for i, p := range ver.Problems {
		if i == 5 {
			break
		}
		r.VerifyDetails = append(r.VerifyDetails, fmt.Sprintf("%s %s %s: %s", p.Kind, p.Subject, p.DLQID, p.Detail))
	}
	return nil
}

// describe says, for up to five events, what the stores hold for them.
func describe(ctx context.Context, js jetstream.JetStream, st *stores, evs []api.ReconcileEvent) []string {
	kv, err := js.KeyValue(ctx, subjects.IdempotencyBucket)
	var out []string
	for _, e := range evs[:min(5, len(evs))] {
		state := "IDEMPOTENCY not read"
		if err == nil {
			ks, found, lerr := idempotency.Lookup(ctx, kv, e.Key)
			switch {
			case e.Key == "":
				state = "no key"
			case lerr != nil:
				state = lerr.Error()
			case !found:
				state = "no IDEMPOTENCY entry"
			default:
				state = fmt.Sprintf("IDEMPOTENCY %s (source_seq %d, ledger_seq %d)", ks.State, ks.SourceSeq, ks.LedgerSeq)
			}
		}
		out = append(out, fmt.Sprintf("seq %d %s key %s: LEDGER %d, chain by key %v, %s",
			e.Seq, e.Subject, e.Key, st.ledger[e.Key], st.chainsByKey[e.Key], state))
	}
	return out
}

// drain starts a drain of every exhausted record as the operator and waits
// for it to complete.
func (c *cluster) drain(ctx context.Context) error {
	nc, err := c.connect(access.DefaultPerson(access.RoleOperator))
	if err != nil {
		return err
	}
	defer nc.Close()
	var start api.DrainStartReply
	unlimited := 0.0 // no rate ceiling: the drain goes as fast as the pipeline
	// Unguarded: the chaos run counts every outcome (a paused drain would
	// never complete).
	req := api.DrainStartRequest{Filter: api.DrainFilter{Classes: []string{string(record.ClassExhausted)}}, RatePerSecond: &unlimited, NoGuard: true}
	started := time.Now()
	deadline := started.Add(c.o.Settle)
	if err := ask(ctx, nc, deadline, api.DrainStart, req, &start); err != nil {
		return err
	}
	for {
		var st api.DrainState
		if err := ask(ctx, nc, deadline, api.DrainStatus, api.DrainIDRequest{DrainID: start.DrainID}, &st); err != nil {
			return err
		}
		switch st.Status {
		case api.DrainCompleted:
			c.report.Drained, c.report.DrainCommitted, c.report.DrainTime = st.Selected, st.Committed, time.Since(started)
			return nil
		case api.DrainFailed, api.DrainCancelled:
			return fmt.Errorf("chaos: drain %s %s", start.DrainID, st.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: drain %s still %s after %s", start.DrainID, st.Status, c.o.Settle)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ask is request, asked again every 250 ms while no service answers
// (the redriver down, killed by its failpoint mid-drain or exited by
// itself, and not restarted yet: no one received the request, so asking
// again cannot do anything twice), until deadline.
func ask(ctx context.Context, nc *nats.Conn, deadline time.Time, subject string, req, out any) error {
	for {
		err := request(nc, subject, req, out)
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// request calls a service endpoint (endpoint.CallRaw: an error reply is an
// *api.Error) and decodes its answer.
func request(nc *nats.Conn, subject string, req, out any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, err := endpoint.CallRaw(ctx, nc, subject, b)
	if err != nil {
		return fmt.Errorf("chaos: %s: %w", subject, err)
	}
	return json.Unmarshal(body, out)
}

// pendingConsumers lists the durable consumers with pending or
// unacknowledged messages.
func pendingConsumers(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	var out []string
	for _, stream := range []string{subjects.EventsStream, subjects.FailuresStream, subjects.AdvisoriesStream} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return nil, err
		}
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.NumPending > 0 || ci.NumAckPending > 0 {
				out = append(out, fmt.Sprintf("%s/%s (pending %d, unacked %d)", stream, ci.Name, ci.NumPending, ci.NumAckPending))
			}
		}
		if err := l.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tearDown stops every process: the services, then the server.
func (c *cluster) tearDown() {
	if c.stopped.Swap(true) {
		return
	}
	var wg sync.WaitGroup
	for _, ps := range c.svcs {
		for _, p := range ps {
			wg.Add(1)
			go func() { defer wg.Done(); p.stop() }()
		}
	}
	wg.Wait()
	for _, p := range c.servers {
		p.stop()
	}
	if c.down != nil {
		c.down.close()
	}
}
