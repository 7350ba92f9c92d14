package auditor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// t0 is the fixed clock of the fixtures.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a provisioned test server and an admin JetStream context (no
// permissions: it may write QUARANTINE directly, as a break-glass admin).
type env struct {
	srv *natstest.Server
	js  jetstream.JetStream
	nc  *nats.Conn
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	srv := natstest.Start(tb)
	srv.Provision(tb, streams.DefaultOptions())
	nc := srv.Connect(tb)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return &env{srv: srv, js: js, nc: nc}
}

// running is an auditor running on an env.
type running struct {
	*Service
	reg  *prometheus.Registry
	logs *syncBuffer
	stop func()
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.CheckpointInterval, cfg.ReconcileInterval = 0, 0
	cfg.AllowAnonymous = true // a server without accounts: no caller to attach
	return cfg
}

// startAuditor runs an auditor with cfg (its clock is now, when set) until
// cleanup, and waits until its endpoints answer.
func (e *env) startAuditor(tb testing.TB, cfg Config, now func() time.Time) *running {
	tb.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	logs := &syncBuffer{}
	nc := e.srv.Connect(tb)
	a, err := New(nc, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	if now != nil {
		a.now = now
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	r := &running{Service: a, reg: reg, logs: logs}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("auditor Run: %v", err)
			}
		})
	}
	tb.Cleanup(r.stop)
	natstest.WaitServing(tb, nc, access.Auditor)
	e.waitApplied(tb, r) // the live view holds what was stored before the start
	return r
}

// request sends req to subject and decodes the reply into out, failing on
// a service error.
func request(tb testing.TB, nc *nats.Conn, subject string, req, out any) {
	tb.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := nc.Request(subject, b, 30*time.Second)
	if err != nil {
		tb.Fatalf("request %s: %v", subject, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		tb.Fatalf("request %s: %s %s", subject, code, m.Header.Get("Nats-Service-Error"))
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		tb.Fatalf("reply of %s: %v", subject, err)
	}
}

// fixture describes the first record of a test chain.
type fixture struct {
	id, domain  string
	class       record.Class
	code        codes.Code
	party       string
	firstSeen   time.Time
	quarantined time.Time
}

// first builds the sealed first record of f.
func first(tb testing.TB, f fixture) record.Record {
	tb.Helper()
	r := record.FromFailure(record.Failure{
		Class: f.class, Code: f.code, Detail: "rule failed", Domain: f.domain,
		Subject: "events." + f.domain + ".dispense", Stream: subjects.EventsStream, Seq: 1,
		Deliveries: 1, Published: f.firstSeen, Payload: []byte(`{"transaction_id":"TX-SECRET-PHI"}`),
		Headers:  map[string][]string{envelope.Traceparent: {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		Envelope: &envelope.Envelope{Domain: f.domain, EventType: "dispense", IdempotencyKey: f.id, PartyID: f.party},
		FailedAt: f.quarantined,
	}, f.quarantined)
	if err := record.Seal(&r); err != nil {
		tb.Fatal(err)
	}
	return r
}

// next builds the sealed record of kind that follows prev, at time at.
func next(tb testing.TB, prev record.Record, kind record.Kind, at time.Time) record.Record {
	tb.Helper()
	r := prev
	r.Index, r.Kind, r.PrevHash, r.QuarantinedAt, r.Payload, r.Headers, r.Attempts = prev.Index+1, kind, prev.AuditHash, at, nil, nil, nil
	r.AuditHash = ""
	switch kind {
	case record.KindResolved:
		r.Actor, r.Reason = "alice", "handled"
	case record.KindPoisoned:
		r.Class, r.RedriveCount = record.ClassPoison, prev.RedriveCount+1
	case record.KindRedriveRequested:
		r.DrainID = "drain-1"
	}
	if err := record.Seal(&r); err != nil {
		tb.Fatal(err)
	}
	return r
}

// publish stores r on its quarantine subject as the admin and returns its
// sequence. A record a drain sealed has its drain in DRAINS, as the
// redriver writes it before its replays (verify compares DRAINS with
// them, package rebuild).
func (e *env) publish(tb testing.TB, r record.Record) uint64 {
	tb.Helper()
	b, err := record.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	if r.DrainID != "" {
		e.drain(tb, r)
	}
	return e.publishRaw(tb, subjects.Quarantine(r.Domain, r.DLQID), b)
}

// drain writes the DRAINS entry of the drain that sealed r, once.
func (e *env) drain(tb testing.TB, r record.Record) {
	tb.Helper()
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, subjects.DrainsBucket)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := json.Marshal(api.DrainState{DrainID: r.DrainID, Status: api.DrainCompleted, StartedBy: r.Actor, StartedAt: r.QuarantinedAt})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := kv.Create(ctx, r.DrainID, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		tb.Fatalf("drain %s: %v", r.DrainID, err)
	}
}

// publishRaw stores raw bytes on subject in QUARANTINE.
func (e *env) publishRaw(tb testing.TB, subject string, raw []byte) uint64 {
	tb.Helper()
	m := nats.NewMsg(subject)
	m.Data = raw
	m.Header.Set("Deadletter-Record-Kind", "test")
	ack, err := e.js.PublishMsg(context.Background(), m)
	if err != nil {
		tb.Fatalf("publish %s: %v", subject, err)
	}
	return ack.Sequence
}

// chainOf publishes a chain: the first record of f, then kinds, a minute
// apart. It returns the records.
func (e *env) chainOf(tb testing.TB, f fixture, kinds ...record.Kind) []record.Record {
	tb.Helper()
	rs := []record.Record{first(tb, f)}
	for i, k := range kinds {
		rs = append(rs, next(tb, rs[len(rs)-1], k, f.quarantined.Add(time.Duration(i+1)*time.Minute)))
	}
	for _, r := range rs {
		e.publish(tb, r)
	}
	return rs
}

// id returns a dlq id like a pharmacy idempotency key.
func id(n int) string { return fmt.Sprintf("pharmacy_%032d", n) }

// seqs returns the record-level sequences of problems (checkpoint
// problems excluded) as a sorted, de-duplicated string.
func seqs(ps []api.VerifyProblem) string {
	seen := map[uint64]bool{}
	var out []uint64
	for _, p := range ps {
		if p.Seq != 0 && !seen[p.Seq] {
			seen[p.Seq] = true
			out = append(out, p.Seq)
		}
	}
	s := ""
	for i, q := range out {
		if i > 0 {
			s += ","
		}
		s += strconv.FormatUint(q, 10)
	}
	return s
}
