package redrive

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/chains"
)

// downstream is a controllable system of record: it answers 503 while down
// (or for the keys in failing), else 200, and counts accepted posts per key.
type downstream struct {
	*httptest.Server
	down     atomic.Bool
	mu       sync.Mutex
	failing  map[string]bool
	accepted map[string]int
	order    []string // accepted keys, in order
}

func newDownstream(tb testing.TB) *downstream {
	d := &downstream{failing: map[string]bool{}, accepted: map[string]int{}}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(envelope.DownstreamIdempotencyKey)
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.down.Load() || d.failing[key] {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		d.accepted[key]++
		d.order = append(d.order, key)
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(d.Close)
	return d
}

func (d *downstream) fail(key string, on bool) {
	d.mu.Lock()
	d.failing[key] = on
	d.mu.Unlock()
}

func (d *downstream) acceptedOf(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.accepted[key]
}

func (d *downstream) acceptedOrder() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.order...)
}

// env is a provisioned server with the real validator and quarantiner.
type env struct {
	srv  *natstest.Server
	js   jetstream.JetStream
	nc   *nats.Conn
	down *downstream
	gate *gate.Gate
	kv   jetstream.KeyValue
}

func testLogger() *slog.Logger {
	if testing.Verbose() && os.Getenv("REDRIVE_LOGS") != "" {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// newEnv starts the pipeline: a validator whose downstream can fail
// transiently (2 deliveries, 10 ms back-off: events exhaust fast) and a
// quarantiner with a redrive cap of 3.
func newEnv(tb testing.TB) *env {
	tb.Helper()
	return newEnvWith(tb, 1, true)
}

// newEnvWith is newEnv with n quarantiner instances, and with or without
// the downstream (without it the validator commits to LEDGER only).
func newEnvWith(tb testing.TB, n int, withDownstream bool) *env {
	tb.Helper()
	e := newEnvWithoutValidator(tb, n)
	e.startValidator(tb, withDownstream)
	return e
}

// newEnvWithoutValidator is newEnvWith before its validator starts
// (startValidator): replays are stored in EVENTS and nobody commits them.
func newEnvWithoutValidator(tb testing.TB, n int) *env {
	tb.Helper()
	srv := natstest.Start(tb)
	srv.Provision(tb, streams.DefaultOptions())
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{srv: srv, nc: srv.Connect(tb), down: newDownstream(tb), gate: g}
	e.js, err = jetstream.New(e.nc)
	if err != nil {
		tb.Fatal(err)
	}
	if e.kv, err = e.js.KeyValue(context.Background(), subjects.IdempotencyBucket); err != nil {
		tb.Fatal(err)
	}
	qcfg := quarantiner.DefaultConfig()
	qcfg.Provision = false
	qcfg.AckWait = 2 * time.Second
	qcfg.RetryDelay = 100 * time.Millisecond
	qcfg.TerminatedGrace = 200 * time.Millisecond
	for range n {
		q, err := quarantiner.New(srv.Connect(tb), qcfg, testLogger())
		if err != nil {
			tb.Fatal(err)
		}
		natstest.Run(tb, "quarantiner", q.Run)
	}
	if n > 0 {
		natstest.WaitServing(tb, e.nc, access.Quarantiner)
	}
	return e
}

// startValidator starts the pipeline's validator (with or without the
// downstream).
func (e *env) startValidator(tb testing.TB, withDownstream bool) {
	tb.Helper()
	vcfg := validator.DefaultConfig()
	vcfg.Provision = false
	if withDownstream {
		vcfg.DownstreamURL = e.down.URL
	}
	vcfg.MaxDeliver = 2
	vcfg.BackoffBase, vcfg.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	vcfg.AckWait = 2 * time.Second
	vcfg.DownstreamTimeout = time.Second
	vcfg.ClaimLease = 2 * time.Second
	vcfg.Workers = 32
	v, err := validator.New(e.srv.Connect(tb), vcfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	natstest.Run(tb, "validator", v.Run)
	natstest.WaitServing(tb, e.nc, access.Validator)
}

// redriverConfig is a redriver configuration for tests.
func redriverConfig() redriver.Config {
	cfg := redriver.DefaultConfig()
	cfg.Provision = false
	cfg.OutcomeTimeout = 15 * time.Second
	cfg.PollMax = 500 * time.Millisecond
	cfg.DrainLease = 2 * time.Second
	cfg.InstanceID = "redriver-test"
	cfg.AllowAnonymous = true // one account: no caller is ever attached
	return cfg
}

// runningRedriver is a redriver started by a test.
type runningRedriver struct {
	*redriver.Service
	nc   *nats.Conn
	stop func()
}

func (e *env) startRedriver(tb testing.TB, cfg redriver.Config) *runningRedriver {
	tb.Helper()
	nc := e.srv.Connect(tb)
	r, err := redriver.New(nc, cfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	stop := natstest.Run(tb, "redriver", r.Run)
	natstest.WaitServing(tb, e.nc, access.Redriver)
	return &runningRedriver{Service: r, nc: nc, stop: stop}
}

// event is one published event.
type event struct {
	subject string
	data    []byte
	key     string
	// dlq is the event's dlq id when it is not its key (an event that
	// did not parse).
	dlq string
}

// dlqID returns the event's dlq id.
func (ev event) dlqID() string {
	if ev.dlq != "" {
		return ev.dlq
	}
	return ev.key
}

// pharmacyEvent returns a valid dispense with its own transaction id and lot
// (so its own ordering key).
func (e *env) pharmacyEvent(tb testing.TB, i int) event {
	tb.Helper()
	doc := map[string]any{
		"transaction_id": fmt.Sprintf("TX-%06d", i), "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
		"lot": fmt.Sprintf("LOT%06d", i), "expiry": "2026-09-30", "quantity_delta": "-30", "unit": "EA",
		"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2025-03-14T15:42:10Z", "actor_id": "RPH-0412",
	}
	return e.mustEvent(tb, "events.pharmacy.dispense", doc)
}

func (e *env) mustEvent(tb testing.TB, subject string, doc map[string]any) event {
	tb.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	env, err := e.gate.Check(subject, b)
	if err != nil {
		tb.Fatalf("test event %s invalid: %v", subject, err)
	}
	return event{subject: subject, data: b, key: env.IdempotencyKey}
}

func (e *env) publish(tb testing.TB, ev event) uint64 {
	tb.Helper()
	ack, err := e.js.Publish(context.Background(), ev.subject, ev.data)
	if err != nil {
		tb.Fatal(err)
	}
	return ack.Sequence
}

// quarantineOutage publishes events while the downstream is down and waits
// until each is quarantined exhausted; it leaves the downstream down.
func (e *env) quarantineOutage(tb testing.TB, events []event) {
	tb.Helper()
	e.down.down.Store(true)
	for _, ev := range events {
		e.publish(tb, ev)
	}
	for _, ev := range events {
		e.waitState(tb, ev.key, func(st record.State) bool {
			return st.Status == record.StatusOpen && st.Class == record.ClassExhausted
		}, "open exhausted")
	}
}

// seedExhausted writes the first records of exhausted events straight into
// QUARANTINE, sealed as the quarantiner writes them (faster than an outage
// through the pipeline, for tests that need thousands).
func (e *env) seedExhausted(tb testing.TB, events []event) {
	tb.Helper()
	now := time.Now().UTC()
	for i, ev := range events {
		envl, err := e.gate.Check(ev.subject, ev.data)
		if err != nil {
			tb.Fatal(err)
		}
		f := record.Failure{
			Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Detail: "downstream answered HTTP 503",
			Domain: envl.Domain, Subject: ev.subject, Stream: subjects.EventsStream, Seq: uint64(1_000_000 + i), Deliveries: 2,
			Published: now, Payload: ev.data, Envelope: &envl, FailedAt: now,
		}
		r := record.FromFailure(f, now)
		if err := record.Seal(&r); err != nil {
			tb.Fatal(err)
		}
		b, err := record.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := e.js.PublishAsync(subjects.Quarantine(r.Domain, r.DLQID), b, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		tb.Fatal("seed acks timed out")
	}
}

// chain reads a chain and folds it (tests/internal/chains).
func (e *env) chain(tb testing.TB, dlqID string) ([]record.Record, record.State, error) {
	tb.Helper()
	return chains.Read(tb, e.js, dlqID)
}

// waitState polls until the chain's state satisfies ok.
func (e *env) waitState(tb testing.TB, dlqID string, ok func(record.State) bool, what string) record.State {
	tb.Helper()
	var st record.State
	natstest.CheckFor(tb, 30*time.Second, 20*time.Millisecond, func() error {
		var err error
		_, st, err = e.chain(tb, dlqID)
		if err != nil {
			return err
		}
		if !ok(st) {
			return fmt.Errorf("chain %s is %s/%s (redrives %d), want %s", dlqID, st.Status, st.Class, st.RedriveCount, what)
		}
		return nil
	})
	return st
}

// request sends a request and returns the reply body and its error code.
func (e *env) request(tb testing.TB, subject string, body []byte) ([]byte, string) {
	tb.Helper()
	m, err := e.nc.Request(subject, body, 30*time.Second)
	if err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
	return m.Data, m.Header.Get(micro.ErrorCodeHeader)
}

// requestJSON sends v and decodes a successful reply into out.
func (e *env) requestJSON(tb testing.TB, subject string, v, out any) {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	data, code := e.request(tb, subject, b)
	if code != "" {
		tb.Fatalf("%s: error %s", subject, code)
	}
	if err := json.Unmarshal(data, out); err != nil {
		tb.Fatalf("%s: reply %s: %v", subject, data, err)
	}
}

// startDrain starts a drain and returns its id.
func (e *env) startDrain(tb testing.TB, req api.DrainStartRequest) string {
	tb.Helper()
	var rep api.DrainStartReply
	e.requestJSON(tb, api.DrainStart, req, &rep)
	if rep.DrainID == "" {
		tb.Fatalf("drain.start gave no drain id: %+v", rep)
	}
	return rep.DrainID
}

// waitDrain polls drain.status until the drain finishes.
func (e *env) waitDrain(tb testing.TB, id string, total time.Duration) api.DrainState {
	tb.Helper()
	var st api.DrainState
	natstest.CheckFor(tb, total, 50*time.Millisecond, func() error {
		e.requestJSON(tb, api.DrainStatus, api.DrainIDRequest{DrainID: id}, &st)
		if st.FinishedAt == nil {
			return fmt.Errorf("drain %s is %s: %+v", id, st.Status, st.DrainCounts)
		}
		return nil
	})
	return st
}

// committedOnce checks each event is committed exactly once: one LEDGER
// message on its key's subject, one accepted downstream post, the key
// committed, and its chain resolved.
func (e *env) committedOnce(tb testing.TB, events []event) {
	tb.Helper()
	ls, err := e.js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		tb.Fatal(err)
	}
	for _, ev := range events {
		dom, _, _ := strings.Cut(ev.key, "_")
		info, err := ls.Info(context.Background(), jetstream.WithSubjectFilter(subjects.Ledger(dom, ev.key)))
		if err != nil {
			tb.Fatal(err)
		}
		if n := info.State.Subjects[subjects.Ledger(dom, ev.key)]; n != 1 {
			tb.Errorf("%s: %d LEDGER messages, want 1", ev.key, n)
		}
		if n := e.down.acceptedOf(ev.key); n != 1 {
			tb.Errorf("%s: downstream accepted %d posts, want 1", ev.key, n)
		}
		st, found, err := idempotency.Lookup(context.Background(), e.kv, ev.key)
		if err != nil || !found || !st.Committed() {
			tb.Errorf("%s: key state %+v found %v err %v, want committed", ev.key, st, found, err)
		}
		_, cs, err := e.chain(tb, ev.dlqID())
		if err != nil {
			tb.Fatal(err)
		}
		if cs.Status != record.StatusResolved {
			tb.Errorf("%s: chain %s, want resolved", ev.key, cs.Status)
		}
	}
}

func ptr[T any](v T) *T { return &v }
