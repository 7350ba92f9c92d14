// Command resume measures how long a restarted service takes to resume
// under a steady open-loop publish load: the services as processes (one
// instance each), on one nats-server process with every write fsynced
// (sync_interval: always, the chaos harness's configuration). For each
// service in turn (validator, quarantiner, redriver in the middle of a
// drain, auditor), several rounds: kill -9 it, start it again at once (once
// the stores' last sequences have stood still for 50 ms: what the dead
// instance had sent is stored by then), and time
//
//   - start-up: from the restart until the service answers discovery
//     ($SRV.PING.<service>: connected, streams looked up, buckets and
//     consumers bound, micro registered);
//   - ready: from the restart until its first sign of work (validator: a
//     new LEDGER commit; quarantiner: a new QUARANTINE record; redriver:
//     the drain's progress in drain.status moving again, and its first new
//     replay in EVENTS; auditor: audit.verify answering);
//   - in flight done: from the kill until the messages the killed instance
//     had in flight are done again: its durable consumer's ack floor
//     passes the last sequence delivered before the kill (validator,
//     quarantiner: they wait for the consumer's AckWait to be redelivered),
//     or the drain has a final count for every replay published before the
//     kill (redriver). The auditor holds no messages.
//
// Before each kill it waits until the pipeline keeps up with the load
// again. It prints min / median / max over the rounds (-services measures
// some of the services only).
//
//	go run ./tests/bench/resume -rate 500 -rounds 3
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/chaos"
)

// poll is how often the conditions are checked (the resolution of every
// figure).
const poll = 10 * time.Millisecond

// errTimeout is returned by until when its condition never held.
var errTimeout = errors.New("timed out")

func main() {
	rate := flag.Int("rate", 500, "events published per second (open loop), throughout")
	rounds := flag.Int("rounds", 3, "kills per service")
	malformed := flag.Float64("malformed", 0.10, "share of malformed events in the load")
	seed := flag.Int("drain-records", 3000, "exhausted records seeded for the redriver's drain")
	drainRate := flag.Float64("drain-rate", 50, "the drain's rate ceiling (replays per second): it must last through the redriver's rounds")
	only := flag.String("services", strings.Join(services, ","), "the services to kill, in this order")
	flag.Parse()
	ctx := context.Background()
	if err := run(ctx, strings.Split(*only, ","), *rate, *rounds, *malformed, *seed, *drainRate); err != nil {
		log.Fatal(err)
	}
}

// services are the services measured, in their order.
var services = []string{access.Validator, access.Quarantiner, access.Redriver, access.Auditor}

func run(ctx context.Context, only []string, rate, rounds int, malformed float64, seeded int, drainRate float64) error {
	bins, dir, cleanup, err := chaos.BuildTemp(ctx, "deadletter-bench-resume-")
	if err != nil {
		return err
	}
	defer cleanup()
	o := chaos.DefaultOptions()
	o.Validators, o.Quarantiners, o.Nodes = 1, 1, 1
	o.Dir, o.Bins = filepath.Join(dir, "run"), bins
	sys, err := chaos.Start(ctx, o)
	if err != nil {
		return err
	}
	defer sys.Close()
	b, err := newBench(sys)
	if err != nil {
		return err
	}
	defer b.close()

	// Enough distinct events for the whole run: the seed, then the load
	// for every round with room to spare.
	total := seeded + rate*(60+rounds*len(only)*45)
	evs, err := sys.Events(total, malformed, 0, 1)
	if err != nil {
		return err
	}
	if !slices.Contains(only, access.Redriver) {
		seeded = 0 // no drain to seed
	}
	var seed, load []chaos.Event
	for _, e := range evs {
		if !e.Malformed && len(seed) < seeded {
			sys.FailAlways(e.Key)
			seed = append(seed, e)
			continue
		}
		load = append(load, e)
	}
	log.Printf("resume: seeding %d events that exhaust at the downstream", len(seed))
	if err := b.publishAll(ctx, seed); err != nil {
		return err
	}
	if err := b.quiet(ctx, 3*time.Minute); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	sys.Heal()

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadDone := make(chan error, 1)
	go func() { loadDone <- b.openLoop(loadCtx, load, rate) }()
	// Let the load reach a steady state.
	time.Sleep(5 * time.Second)

	results := map[string][]round{}
	for _, svc := range only {
		if !slices.Contains(services, svc) {
			return fmt.Errorf("no service %q", svc)
		}
		if svc == access.Redriver {
			if err := b.startDrain(ctx, drainRate); err != nil {
				return err
			}
		}
		for r := range rounds {
			if err := b.steady(ctx, svc, rate); err != nil {
				b.report(results, rate, rounds)
				return fmt.Errorf("%s round %d: before the kill: %w", svc, r+1, err)
			}
			res, err := b.round(ctx, svc)
			if err != nil {
				b.report(results, rate, rounds)
				return fmt.Errorf("%s round %d: %w\n%s", svc, r+1, err, sys.Tail(svc, 3000))
			}
			log.Printf("resume: %s round %d: %s", svc, r+1, res)
			results[svc] = append(results[svc], res)
		}
	}
	stopLoad()
	if err := <-loadDone; err != nil {
		return err
	}
	b.report(results, rate, rounds)
	return nil
}

// bench holds the connections of a run.
type bench struct {
	sys               *chaos.System
	admin, view, oper *nats.Conn
	pub               *nats.Conn
	js, pjs           jetstream.JetStream
	published, failed atomic.Int64
	start             time.Time
	drainID           string
	verifyTime        time.Duration
	ackWait           map[string]time.Duration
}

func newBench(sys *chaos.System) (*bench, error) {
	b := &bench{sys: sys, ackWait: map[string]time.Duration{}}
	var err error
	if b.admin, err = sys.Connect(access.Admin); err != nil {
		return nil, err
	}
	if b.view, err = sys.Connect(access.DefaultPerson(access.RoleViewer)); err != nil {
		return nil, err
	}
	if b.oper, err = sys.Connect(access.DefaultPerson(access.RoleOperator)); err != nil {
		return nil, err
	}
	if b.pub, err = sys.Connect(string(access.RolePublisher)); err != nil {
		return nil, err
	}
	if b.js, err = jetstream.New(b.admin); err != nil {
		return nil, err
	}
	if b.pjs, err = jetstream.New(b.pub, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bench) close() {
	for _, nc := range []*nats.Conn{b.admin, b.view, b.oper, b.pub} {
		if nc != nil {
			nc.Close()
		}
	}
}

// publishAll publishes evs as fast as the server acknowledges them.
func (b *bench) publishAll(ctx context.Context, evs []chaos.Event) error {
	for _, e := range evs {
		if _, err := b.pjs.PublishAsync(e.Subject, e.Data); err != nil {
			return err
		}
	}
	select {
	case <-b.pjs.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openLoop publishes evs at rate per second on a ticker, whatever the
// services do, until ctx is done; it fails if the events run out.
func (b *bench) openLoop(ctx context.Context, evs []chaos.Event, rate int) error {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	b.start = time.Now()
	next := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due := int(time.Since(b.start).Seconds() * float64(rate))
		for ; next < due; next++ {
			if next >= len(evs) {
				return fmt.Errorf("the load ran out of its %d events: fewer rounds or a lower rate", len(evs))
			}
			e := evs[next]
			f, err := b.pjs.PublishAsync(e.Subject, e.Data)
			if err != nil {
				b.failed.Add(1)
				continue
			}
			go func() {
				select {
				case <-f.Ok():
					b.published.Add(1)
				case <-f.Err():
					b.failed.Add(1)
				}
			}()
		}
	}
}

// until polls cond until it holds and returns when it first held.
func until(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := cond(cctx)
		cancel()
		if ok {
			return time.Now(), nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%w after %s (last error: %v)", errTimeout, timeout, last)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// consumerOf is the durable consumer a service reads its work from.
func consumerOf(svc string) (stream, name string) {
	switch svc {
	case access.Validator:
		return subjects.EventsStream, validator.DefaultConfig().Consumer
	case access.Quarantiner:
		return subjects.FailuresStream, quarantiner.DefaultConfig().FailuresConsumer
	}
	return "", ""
}

func (b *bench) consumer(ctx context.Context, svc string) (*jetstream.ConsumerInfo, error) {
	stream, name := consumerOf(svc)
	c, err := b.js.Consumer(ctx, stream, name)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

func (b *bench) lastSeq(ctx context.Context, stream string) (uint64, error) {
	s, err := b.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.LastSeq, nil
}

// quiet waits until neither the validator's nor the quarantiner's
// consumer has anything pending or unacknowledged.
func (b *bench) quiet(ctx context.Context, timeout time.Duration) error {
	_, err := until(ctx, timeout, func(ctx context.Context) (bool, error) {
		for _, svc := range []string{access.Validator, access.Quarantiner} {
			ci, err := b.consumer(ctx, svc)
			if err != nil || ci.NumPending > 0 || ci.NumAckPending > 0 {
				return false, err
			}
		}
		return true, nil
	})
	return err
}

// steady waits, before a kill of svc, until the pipeline keeps up with the
// load again (at most a second of the load waiting at the validator's and
// the quarantiner's consumers), svc's own consumer has no redelivery left
// from an earlier round, and svc answers discovery.
func (b *bench) steady(ctx context.Context, svc string, rate int) error {
	var state string
	_, err := until(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		state = ""
		ok := true
		for _, s := range []string{access.Validator, access.Quarantiner} {
			ci, err := b.consumer(ctx, s)
			if err != nil {
				return false, err
			}
			state += fmt.Sprintf("%s pending %d redelivered %d; ", s, ci.NumPending, ci.NumRedelivered)
			if ci.NumPending > uint64(rate) || (s == svc && ci.NumRedelivered > 0) {
				ok = false
			}
		}
		if !ok {
			return false, nil
		}
		_, err := b.view.Request("$SRV.PING."+svc, nil, 500*time.Millisecond)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, state)
	}
	// A second more: the round's figures start from a steady pipeline.
	time.Sleep(time.Second)
	return nil
}

// round is one kill of one service.
type round struct {
	// Startup and Ready are measured from the restart, InFlight from the
	// kill; Ready2 is the redriver's first new replay in EVENTS. InFlightN
	// is how many messages the killed instance had unacknowledged.
	Startup, Ready, Ready2, InFlight time.Duration
	InFlightN                        int
}

func (r round) String() string {
	s := fmt.Sprintf("start-up %s, ready %s", r.Startup.Round(time.Millisecond), r.Ready.Round(time.Millisecond))
	if r.Ready2 > 0 {
		s += fmt.Sprintf(" (first replay %s)", r.Ready2.Round(time.Millisecond))
	}
	if r.InFlight > 0 {
		s += fmt.Sprintf(", %d in flight done after %s", r.InFlightN, r.InFlight.Round(time.Millisecond))
	}
	return s
}

// round kills svc, starts it again at once and measures.
func (b *bench) round(ctx context.Context, svc string) (round, error) {
	var res round
	var before *api.DrainState
	if svc == access.Redriver {
		st, err := b.drainStatus(ctx, time.Second)
		if err != nil {
			return res, err
		}
		if st.Status != api.DrainRunning || st.Remaining < st.Selected/5 {
			return res, fmt.Errorf("the drain is %s with %d of %d left: raise -drain-records or lower -drain-rate", st.Status, st.Remaining, st.Selected)
		}
		before = st
	}
	if svc == access.Auditor {
		t0 := time.Now()
		if err := b.verify(ctx, time.Minute); err != nil {
			return res, err
		}
		b.verifyTime = time.Since(t0)
	}
	killed := time.Now()
	if err := b.sys.Kill(svc); err != nil {
		return res, err
	}
	// What the dead instance left: its consumer's last delivered sequence
	// and what it had unacknowledged; the stores' last sequences.
	var delivered uint64
	var err error
	if stream, _ := consumerOf(svc); stream != "" {
		ci, err := b.consumer(ctx, svc)
		if err != nil {
			return res, err
		}
		delivered, res.InFlightN = ci.Delivered.Stream, ci.NumAckPending
		b.ackWait[svc] = ci.Config.AckWait
	}
	// The server may still store what the dead instance had sent: the
	// stores' last sequences are taken once they stand still for 50 ms
	// (the restart waits that long).
	// replays is EVENTS' last sequence: the redriver publishes its replays
	// there directly (during a drain nothing else is published).
	var ledger, quar, replays uint64
	for stable := 0; stable < 2; {
		var seqs [3]uint64
		for i, stream := range []string{subjects.LedgerStream, subjects.QuarantineStream, subjects.EventsStream} {
			if seqs[i], err = b.lastSeq(ctx, stream); err != nil {
				return res, err
			}
		}
		if seqs == [3]uint64{ledger, quar, replays} {
			stable++
		} else {
			stable = 0
		}
		ledger, quar, replays = seqs[0], seqs[1], seqs[2]
		time.Sleep(25 * time.Millisecond)
	}
	restarted := time.Now()
	if err := b.sys.Restart(svc); err != nil {
		return res, err
	}
	const limit = 3 * time.Minute
	type mark struct {
		at  time.Time
		err error
	}
	wait := func(cond func(context.Context) (bool, error)) chan mark {
		ch := make(chan mark, 1)
		go func() {
			at, err := until(ctx, limit, cond)
			ch <- mark{at, err}
		}()
		return ch
	}
	pinged := wait(func(context.Context) (bool, error) {
		_, err := b.view.Request("$SRV.PING."+svc, nil, 200*time.Millisecond)
		return err == nil, nil
	})
	var ready, ready2, done chan mark
	switch svc {
	case access.Validator:
		ready = wait(func(ctx context.Context) (bool, error) {
			seq, err := b.lastSeq(ctx, subjects.LedgerStream)
			return seq > ledger, err
		})
	case access.Quarantiner:
		ready = wait(func(ctx context.Context) (bool, error) {
			seq, err := b.lastSeq(ctx, subjects.QuarantineStream)
			return seq > quar, err
		})
	case access.Redriver:
		ready = wait(func(ctx context.Context) (bool, error) {
			st, err := b.drainStatus(ctx, 200*time.Millisecond)
			return err == nil && st.Done() > before.Done(), nil
		})
		ready2 = wait(func(ctx context.Context) (bool, error) {
			seq, err := b.lastSeq(ctx, subjects.EventsStream)
			return seq > replays, err
		})
		done = wait(func(ctx context.Context) (bool, error) {
			st, err := b.drainStatus(ctx, 200*time.Millisecond)
			return err == nil && st.Done() >= before.Replayed, nil
		})
		res.InFlightN = before.Replayed - before.Done()
	case access.Auditor:
		// One verify at a time, each given as long as it needs (it reads
		// the whole store): a shorter timeout would pile up abandoned
		// verifies on the auditor.
		ready = make(chan mark, 1)
		go func() {
			deadline := time.Now().Add(limit)
			for {
				err := b.verify(ctx, time.Minute)
				if err == nil || time.Now().After(deadline) {
					ready <- mark{time.Now(), err}
					return
				}
				time.Sleep(poll)
			}
		}()
	}
	if delivered > 0 {
		done = wait(func(ctx context.Context) (bool, error) {
			ci, err := b.consumer(ctx, svc)
			return err == nil && ci.AckFloor.Stream >= delivered, err
		})
	}
	m := <-pinged
	if m.err != nil {
		return res, fmt.Errorf("discovery: %w", m.err)
	}
	res.Startup = m.at.Sub(restarted)
	m = <-ready
	if m.err != nil {
		return res, fmt.Errorf("first work: %w", m.err)
	}
	res.Ready = m.at.Sub(restarted)
	if ready2 != nil {
		if m = <-ready2; m.err != nil {
			return res, fmt.Errorf("first replay: %w", m.err)
		}
		res.Ready2 = m.at.Sub(restarted)
	}
	if done != nil {
		if m = <-done; m.err != nil {
			return res, fmt.Errorf("in flight: %w", m.err)
		}
		res.InFlight = m.at.Sub(killed)
	}
	return res, nil
}

// startDrain starts a drain of every exhausted record at rate as the
// operator.
func (b *bench) startDrain(ctx context.Context, rate float64) error {
	var reply api.DrainStartReply
	req := api.DrainStartRequest{Filter: api.DrainFilter{Classes: []string{string(record.ClassExhausted)}}, RatePerSecond: &rate}
	if err := call(ctx, b.oper, api.DrainStart, req, &reply, time.Minute); err != nil {
		return err
	}
	b.drainID = reply.DrainID
	_, err := until(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		st, err := b.drainStatus(ctx, time.Second)
		return err == nil && st.Status == api.DrainRunning && st.Done() > 0, err
	})
	return err
}

func (b *bench) drainStatus(ctx context.Context, timeout time.Duration) (*api.DrainState, error) {
	var st api.DrainState
	if err := call(ctx, b.oper, api.DrainStatus, api.DrainIDRequest{DrainID: b.drainID}, &st, timeout); err != nil {
		return nil, err
	}
	return &st, nil
}

func (b *bench) verify(ctx context.Context, timeout time.Duration) error {
	var v api.VerifyReply
	return call(ctx, b.view, api.AuditVerify, api.VerifyRequest{MaxProblems: 1}, &v, timeout)
}

// call calls a service endpoint and decodes its answer.
func call(ctx context.Context, nc *nats.Conn, subject string, req, out any, timeout time.Duration) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reply, err := endpoint.CallRaw(ctx, nc, subject, body)
	if err != nil {
		return fmt.Errorf("%s: %w", subject, err)
	}
	return json.Unmarshal(reply, out)
}

// report prints min / median / max of every figure per service.
func (b *bench) report(results map[string][]round, rate, rounds int) {
	secs := time.Since(b.start).Seconds()
	fmt.Printf("resume: one instance per service, one nats-server (sync_interval: always), open-loop load %d events/s (published %.0f/s acknowledged, %d failed), %d rounds per service, %d CPUs, %s\n",
		rate, float64(b.published.Load())/secs, b.failed.Load(), rounds, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("load average at the end (/proc/loadavg): %s\n", loadavg())
	for _, svc := range []string{access.Validator, access.Quarantiner} {
		if w, ok := b.ackWait[svc]; ok {
			fmt.Printf("AckWait of the %s's consumer: %s\n", svc, w)
		}
	}
	if b.verifyTime > 0 {
		fmt.Printf("audit.verify before a kill took %s (the auditor's 'ready' includes one)\n", b.verifyTime.Round(time.Millisecond))
	}
	fmt.Println()
	fmt.Println("| service | start-up: restart → discovery | ready: restart → first work | kill → in-flight done | in flight at the kill |")
	fmt.Println("|---|---|---|---|---|")
	for _, svc := range services {
		rs := results[svc]
		if len(rs) == 0 {
			continue
		}
		pick := func(f func(round) time.Duration) string {
			var ds []time.Duration
			for _, r := range rs {
				ds = append(ds, f(r))
			}
			if len(ds) == 0 || ds[len(ds)-1] == 0 && ds[0] == 0 {
				return "—"
			}
			slices.Sort(ds)
			return fmt.Sprintf("%s / %s / %s", ms(ds[0]), ms(ds[len(ds)/2]), ms(ds[len(ds)-1]))
		}
		ready := pick(func(r round) time.Duration { return r.Ready })
		if svc == access.Redriver {
			ready += " (drain.status); first replay " + pick(func(r round) time.Duration { return r.Ready2 })
		}
		var n []string
		for _, r := range rs {
			n = append(n, fmt.Sprint(r.InFlightN))
		}
		if svc == access.Auditor {
			n = []string{"— (holds no messages)"}
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", svc, pick(func(r round) time.Duration { return r.Startup }), ready,
			pick(func(r round) time.Duration { return r.InFlight }), strings.Join(n, ", "))
	}
	fmt.Printf("\n(min / median / max over the rounds, polled every %s)\n", poll)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

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
