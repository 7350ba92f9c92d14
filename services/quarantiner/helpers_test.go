package quarantiner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.AckWait = 2 * time.Second
	cfg.RetryDelay = 100 * time.Millisecond
	cfg.TerminatedGrace = 200 * time.Millisecond
	cfg.Provision = false
	return cfg
}

// env is a provisioned test server.
type env struct {
	srv  *natstest.Server
	js   jetstream.JetStream
	gate *gate.Gate
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	srv := natstest.Start(tb)
	srv.Provision(tb, streams.DefaultOptions())
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	return &env{srv: srv, js: srv.JetStream(tb), gate: g}
}

type running struct {
	*Service
	nc   *nats.Conn
	stop func()
}

func (e *env) start(tb testing.TB, cfg Config, hooks *testHooks) *running {
	tb.Helper()
	nc := e.srv.Connect(tb)
	q, err := New(nc, cfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	q.hooks = hooks
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	// This instance's own start-up, not another's consumer: a test may
	// call its methods directly.
	select {
	case <-q.started:
	case err := <-done:
		tb.Fatalf("quarantiner stopped during start-up: %v", err)
	case <-time.After(10 * time.Second):
		tb.Fatal("quarantiner not started after 10 s")
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("Run: %v", err)
				}
			case <-time.After(15 * time.Second):
				tb.Errorf("quarantiner did not stop")
			}
		})
	}
	tb.Cleanup(stop)
	return &running{Service: q, nc: nc, stop: stop}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// publishEvent stores an event in EVENTS and returns its sequence.
func (e *env) publishEvent(tb testing.TB, subject string, data []byte, hdr nats.Header) uint64 {
	tb.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range hdr {
		m.Header[k] = v
	}
	ack, err := e.js.PublishMsg(context.Background(), m)
	if err != nil {
		tb.Fatal(err)
	}
	return ack.Sequence
}

// reportFailure publishes a failure report the way the validator does.
func (e *env) reportFailure(tb testing.TB, f record.Failure) {
	tb.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := e.js.Publish(context.Background(), subjects.Failure(f.Domain), b); err != nil {
		tb.Fatal(err)
	}
}

// structural builds the failure report of an event stored at seq.
func structural(subject string, seq uint64, data []byte, code codes.Code) record.Failure {
	now := time.Now().UTC()
	return record.Failure{
		Class: record.ClassValidation, Code: code, Detail: "test detail for " + string(code),
		Domain: subjects.DomainOf(subject, []string{"pharmacy", "dscsa", "fsma"}), Subject: subject,
		Stream: subjects.EventsStream, Seq: seq, Deliveries: 1, Published: now, Payload: data,
		Headers:  map[string][]string{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		Attempts: []record.Attempt{{At: now, Stage: record.StageValidate, Code: code, Reason: "test", Delivery: 1}},
		FailedAt: now,
	}
}

// exhaust makes EVENTS message seq exhaust its deliveries on a consumer
// named like the validator's, recording attempts as the validator does, so
// the server publishes a real max-deliveries advisory.
func (e *env) exhaust(tb testing.TB, seq uint64, maxDeliver int) {
	tb.Helper()
	ctx := context.Background()
	cons, err := e.js.CreateOrUpdateConsumer(ctx, subjects.EventsStream, jetstream.ConsumerConfig{
		Durable: subjects.ValidatorConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		MaxDeliver: maxDeliver, FilterSubject: subjects.EventsAll, AckWait: 5 * time.Second,
	})
	if err != nil {
		tb.Fatal(err)
	}
	kv, err := e.js.KeyValue(ctx, subjects.AttemptsBucket)
	if err != nil {
		tb.Fatal(err)
	}
	var hist record.History
	for d := 1; d <= maxDeliver; d++ {
		var got jetstream.Msg
		natstest.CheckFor(tb, 10*time.Second, 10*time.Millisecond, func() error {
			batch, err := cons.FetchNoWait(1)
			if err != nil {
				return err
			}
			for m := range batch.Messages() {
				got = m
			}
			if got == nil {
				return errors.New("no delivery yet")
			}
			return nil
		})
		meta, _ := got.Metadata()
		if meta.Sequence.Stream != seq {
			tb.Fatalf("delivered seq %d, want %d", meta.Sequence.Stream, seq)
		}
		if env, err := e.gate.Check(got.Subject(), got.Data()); err == nil {
			hist.Subject, hist.Domain, hist.IdempotencyKey = got.Subject(), env.Domain, env.IdempotencyKey
		}
		hist.Attempts = append(hist.Attempts, record.Attempt{At: time.Now().UTC(), Stage: record.StageCommit, Code: codes.DownstreamUnavailable,
			Reason: "downstream answered HTTP 503", Delivery: meta.NumDelivered})
		b, _ := json.Marshal(hist)
		if _, err := kv.Put(ctx, strconv.FormatUint(seq, 10), b); err != nil {
			tb.Fatal(err)
		}
		if err := got.Nak(); err != nil {
			tb.Fatal(err)
		}
		got = nil
	}
	// A pending pull lets the server notice the exhausted message and
	// publish its advisory, as the validator's standing pulls do.
	adv, err := e.js.Stream(ctx, subjects.AdvisoriesStream)
	if err != nil {
		tb.Fatal(err)
	}
	natstest.CheckFor(tb, 10*time.Second, 10*time.Millisecond, func() error {
		info, err := adv.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.LastSeq > 0 {
			return nil
		}
		if _, err := cons.FetchNoWait(1); err != nil {
			return err
		}
		return errors.New("no max-deliveries advisory yet")
	})
}

// chainOf reads the stored records of a chain (raw bytes, in order).
func (e *env) chainOf(tb testing.TB, domain, dlqID string) [][]byte {
	tb.Helper()
	s, err := e.js.Stream(context.Background(), subjects.QuarantineStream)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	next := uint64(1)
	for {
		m, err := s.GetMsg(context.Background(), next, jetstream.WithGetMsgSubject(subjects.Quarantine(domain, dlqID)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, m.Data)
		next = m.Sequence + 1
	}
}

// allRecords reads every record in QUARANTINE.
func (e *env) allRecords(tb testing.TB) []record.Record {
	tb.Helper()
	s, err := e.js.Stream(context.Background(), subjects.QuarantineStream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var out []record.Record
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			tb.Fatal(err)
		}
		var r record.Record
		if err := json.Unmarshal(m.Data, &r); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func (e *env) waitRecords(tb testing.TB, n int) {
	tb.Helper()
	natstest.CheckFor(tb, 30*time.Second, 20*time.Millisecond, func() error {
		s, err := e.js.Stream(context.Background(), subjects.QuarantineStream)
		if err != nil {
			return err
		}
		info, err := s.Info(context.Background())
		if err != nil {
			return err
		}
		if info.State.Msgs != uint64(n) {
			return fmt.Errorf("QUARANTINE holds %d records, want %d", info.State.Msgs, n)
		}
		return nil
	})
}

// intakeEmpty polls until FAILURES and ADVISORIES hold nothing unacked.
// storeState describes QUARANTINE and the intake streams, for a failure
// message.
func (e *env) storeState(tb testing.TB) string {
	tb.Helper()
	var out []string
	for _, name := range []string{subjects.QuarantineStream, subjects.FailuresStream, subjects.AdvisoriesStream} {
		s, err := e.js.Stream(context.Background(), name)
		if err != nil {
			return err.Error()
		}
		info, err := s.Info(context.Background())
		if err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("%s holds %d messages", name, info.State.Msgs))
	}
	return strings.Join(out, ", ")
}

func (e *env) intakeEmpty(tb testing.TB) {
	tb.Helper()
	natstest.CheckFor(tb, 30*time.Second, 20*time.Millisecond, func() error {
		for _, name := range []string{subjects.FailuresStream, subjects.AdvisoriesStream} {
			s, err := e.js.Stream(context.Background(), name)
			if err != nil {
				return err
			}
			info, err := s.Info(context.Background())
			if err != nil {
				return err
			}
			if info.State.Msgs != 0 {
				return fmt.Errorf("%s still holds %d messages", name, info.State.Msgs)
			}
		}
		return nil
	})
}
