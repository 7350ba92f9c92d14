package validator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// testConfig is a validator config with short timings for tests.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.AckWait = 2 * time.Second
	cfg.BackoffBase = 50 * time.Millisecond
	cfg.BackoffMax = 200 * time.Millisecond
	cfg.ClaimLease = 3 * time.Second
	cfg.DownstreamTimeout = time.Second
	cfg.Workers = 8
	return cfg
}

// running is a validator started by startValidator.
type running struct {
	*Service
	nc   *nats.Conn
	stop func()
}

// startValidator starts a validator on its own connection; it is stopped
// (drained) at cleanup or by calling stop.
func startValidator(tb testing.TB, srv *natstest.Server, cfg Config, hooks *testHooks) *running {
	tb.Helper()
	nc := srv.Connect(tb)
	v, err := New(nc, cfg, testLogger(tb))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	v.hooks = hooks
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	waitConsumer(tb, srv, cfg.Consumer)
	natstest.WaitServing(tb, nc, access.Validator)
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
				tb.Errorf("validator did not stop")
			}
		})
	}
	tb.Cleanup(stop)
	return &running{Service: v, nc: nc, stop: stop}
}

func testLogger(tb testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func waitConsumer(tb testing.TB, srv *natstest.Server, name string) {
	tb.Helper()
	js := srv.JetStream(tb)
	natstest.CheckFor(tb, 10*time.Second, 20*time.Millisecond, func() error {
		_, err := js.Consumer(context.Background(), subjects.EventsStream, name)
		return err
	})
}

// example returns a testdata file of a domain and the subject it belongs on.
func example(tb testing.TB, domain, dir, name string) (string, []byte) {
	tb.Helper()
	b, err := fs.ReadFile(schemas.FS, "testdata/"+domain+"/"+dir+"/"+name)
	if err != nil {
		tb.Fatalf("example: %v", err)
	}
	return subjectFor(tb, domain, b), b
}

// subjectFor derives a document's subject from its domain's checker.
func subjectFor(tb testing.TB, domain string, b []byte) string {
	tb.Helper()
	doc, err := gate.Decode(b)
	if err != nil {
		tb.Fatalf("decode example: %v", err)
	}
	for _, c := range gate.Checkers() {
		if c.Domain() == domain {
			typ, err := c.EventType(doc)
			if err != nil {
				tb.Fatalf("event type: %v", err)
			}
			return subjects.Event(domain, typ)
		}
	}
	tb.Fatalf("no checker for %s", domain)
	return ""
}

func publish(tb testing.TB, js jetstream.JetStream, subject string, data []byte, msgID string) uint64 {
	tb.Helper()
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := js.Publish(context.Background(), subject, data, opts...)
	if err != nil {
		tb.Fatalf("publish %s: %v", subject, err)
	}
	return ack.Sequence
}

func streamMsgs(tb testing.TB, js jetstream.JetStream, name string) uint64 {
	tb.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		tb.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatalf("stream info %s: %v", name, err)
	}
	return info.State.Msgs
}

// waitMsgs polls until stream holds exactly n messages.
func waitMsgs(tb testing.TB, js jetstream.JetStream, stream string, n uint64) {
	tb.Helper()
	natstest.CheckFor(tb, 20*time.Second, 20*time.Millisecond, func() error {
		if got := streamMsgs(tb, js, stream); got != n {
			return fmt.Errorf("%s has %d messages, want %d", stream, got, n)
		}
		return nil
	})
}

// failures reads every message stored in FAILURES.
func failures(tb testing.TB, js jetstream.JetStream) []record.Failure {
	tb.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, subjects.FailuresStream)
	if err != nil {
		tb.Fatalf("failures stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var out []record.Failure
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			tb.Fatalf("get failure %d: %v", seq, err)
		}
		var f record.Failure
		if err := json.Unmarshal(m.Data, &f); err != nil {
			tb.Fatalf("failure %d: %v", seq, err)
		}
		out = append(out, f)
	}
	return out
}

// keyState reads an IDEMPOTENCY entry.
func keyState(tb testing.TB, js jetstream.JetStream, key string) KeyState {
	tb.Helper()
	st, err := lookupKey(js, key)
	if err != nil {
		tb.Fatalf("idempotency %s: %v", key, err)
	}
	return st
}

// lookupKey reads an IDEMPOTENCY entry, for polling.
func lookupKey(js jetstream.JetStream, key string) (KeyState, error) {
	kv, err := js.KeyValue(context.Background(), subjects.IdempotencyBucket)
	if err != nil {
		return KeyState{}, err
	}
	e, err := kv.Get(context.Background(), key)
	if err != nil {
		return KeyState{}, err
	}
	var st KeyState
	err = json.Unmarshal(e.Value(), &st)
	return st, err
}

// ledgerCount returns how many LEDGER messages a key has.
func ledgerCount(tb testing.TB, js jetstream.JetStream, domain, key string) uint64 {
	tb.Helper()
	s, err := js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subjects.Ledger(domain, key)))
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Subjects[subjects.Ledger(domain, key)]
}

// fakeDownstream is a system of record answering with a scripted status per
// call; like a real one, it de-duplicates on Idempotency-Key.
type fakeDownstream struct {
	*httptest.Server
	calls    atomic.Int64
	mu       sync.Mutex
	accepted map[string]int // key -> accepted calls
	status   func(call int64) int
}

func newDownstream(tb testing.TB, status func(call int64) int) *fakeDownstream {
	d := &fakeDownstream{accepted: map[string]int{}, status: status}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := d.calls.Add(1)
		code := d.status(n)
		if code >= 200 && code < 300 {
			d.mu.Lock()
			d.accepted[r.Header.Get("Idempotency-Key")]++
			d.mu.Unlock()
		}
		w.WriteHeader(code)
	}))
	tb.Cleanup(d.Close)
	return d
}

// distinct returns how many distinct keys the downstream accepted.
func (d *fakeDownstream) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.accepted)
}
