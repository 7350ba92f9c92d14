package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/retry"
	"github.com/deadletter/deadletter/shared/streams"
)

// payloads look like the trade's: markup characters, quotes, non-ASCII
// names and a long string.
var payloads = []string{
	`{"party_name":"Müller & Söhne <GmbH>","note":"\"boxed\""}`,
	`{"pharmacist":"陈伟","drug":"Oxycodone 5 mg > 30 ct"}`,
	`{"lot":"` + strings.Repeat("LOT-Ä&<>", 512) + `"}`,
}

func newBase(t *testing.T, srv *natstest.Server) Base {
	t.Helper()
	b, err := New(srv.Connect(t), "tester", "tester-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStartupSteps: a step that cannot succeed is retried until the
// context ends; stopped (cancelled) it is a clean stop that Clean clears,
// run out of time (a deadline) it is an error that Clean keeps, and a step
// that can succeed returns at once.
func TestStartupSteps(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	b := newBase(t, srv)
	for _, tc := range []struct {
		name    string
		stream  string
		ctx     func() (context.Context, context.CancelFunc)
		want    error
		cleaned bool
	}{
		{"present", "EVENTS", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, nil, true},
		{"stopped while missing", "NO_SUCH_STREAM", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}, retry.ErrStopped, true},
		{"gave up while missing", "NO_SUCH_STREAM", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, retry.ErrGaveUp, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			st, err := b.Stream(ctx, "test stream", tc.stream)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Stream: %v, want %v", err, tc.want)
			}
			if err == nil && st.CachedInfo().Config.Name != tc.stream {
				t.Errorf("stream %q, want %q", st.CachedInfo().Config.Name, tc.stream)
			}
			Clean(&err)
			if (err == nil) != tc.cleaned {
				t.Errorf("after Clean: %v, cleaned want %v", err, tc.cleaned)
			}
		})
	}
}

// TestConsume: every message of every intake reaches a worker, at most
// workers at once, and once the context ends Consume returns only after
// the messages delivered are handled (none is acknowledged by nobody).
func TestConsume(t *testing.T) {
	srv := natstest.Start(t)
	b := newBase(t, srv)
	ctx := context.Background()
	intake := func(stream string) *Intake {
		return &Intake{Step: stream + " consumer", Stream: stream, Create: true, Config: func() jetstream.ConsumerConfig {
			return jetstream.ConsumerConfig{Durable: "test-" + stream, AckPolicy: jetstream.AckExplicitPolicy}
		}}
	}
	for _, tc := range []struct {
		name    string
		workers int
		streams []string
		each    int
		// deleted: the consumers are deleted once the first half is
		// handled (an administrator re-provisioning them), then the
		// second half is published.
		deleted bool
	}{
		{"one intake, one worker", 1, []string{"ONE"}, 5, false},
		{"no worker is one", 0, []string{"ONE"}, 5, false},
		{"two intakes, three workers", 3, []string{"ONE", "TWO"}, 20, false},
		{"consumers deleted and bound again", 2, []string{"ONE", "TWO"}, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Streams of the case's own: a consumer bound again delivers
			// its stream from the start.
			for i, s := range tc.streams {
				tc.streams[i] = s + "_" + strings.ReplaceAll(strings.ToUpper(t.Name()[len("TestConsume/"):]), ",", "")
				if _, err := b.JS.CreateStream(ctx, jetstream.StreamConfig{Name: tc.streams[i],
					Subjects: []string{strings.ToLower(tc.streams[i]) + ".>"}}); err != nil {
					t.Fatal(err)
				}
			}
			var ins []*Intake
			for _, s := range tc.streams {
				in := intake(s)
				if err := b.Bind(ctx, in); err != nil {
					t.Fatal(err)
				}
				ins = append(ins, in)
			}
			var (
				mu           sync.Mutex
				seen         = map[string]int{}
				busy, most   atomic.Int32
				handled, ack atomic.Int32
			)
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				b.Consume(cctx, tc.workers, func(m jetstream.Msg) {
					n := busy.Add(1)
					defer busy.Add(-1)
					for {
						if o := most.Load(); n <= o || most.CompareAndSwap(o, n) {
							break
						}
					}
					mu.Lock()
					seen[string(m.Data())]++
					mu.Unlock()
					// A worker holds its message until the others are busy
					// too (or briefly), so the pool's bound is reached.
					natstest.Until(20*time.Millisecond, time.Millisecond, func() bool { return busy.Load() >= int32(max(tc.workers, 1)) })
					handled.Add(1)
					if m.Ack() == nil {
						ack.Add(1)
					}
				}, ins...)
			}()
			want := 0
			publish := func(from, to int) {
				t.Helper()
				for _, s := range tc.streams {
					for i := from; i < to; i++ {
						p := fmt.Sprintf(`{"n":%d,"stream":%q,"body":%s}`, i, s, payloads[i%len(payloads)])
						if _, err := b.JS.Publish(ctx, strings.ToLower(s)+".event", []byte(p)); err != nil {
							t.Fatal(err)
						}
						want++
					}
				}
				natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
					mu.Lock()
					defer mu.Unlock()
					if len(seen) != want {
						return fmt.Errorf("handled %d of %d", len(seen), want)
					}
					return nil
				})
			}
			if !tc.deleted {
				publish(0, tc.each)
			} else {
				publish(0, tc.each/2)
				for _, s := range tc.streams {
					if err := b.JS.DeleteConsumer(ctx, s, "test-"+s); err != nil {
						t.Fatal(err)
					}
				}
				publish(tc.each/2, tc.each)
			}
			cancel()
			select {
			case <-done:
			case <-time.After(natstest.Patience(t, 10*time.Second)):
				t.Fatal("Consume did not return after its context ended")
			}
			// Every message handled was acknowledged; only a consumer
			// bound again delivers one more than once.
			if n := int(ack.Load()); n != int(handled.Load()) || len(seen) != want || (!tc.deleted && n != want) {
				t.Errorf("acknowledged %d, handled %d, distinct %d, want %d", n, handled.Load(), len(seen), want)
			}
			if int(most.Load()) > max(tc.workers, 1) {
				t.Errorf("%d handled at once, workers %d", most.Load(), tc.workers)
			}
		})
	}
}

// TestRequests: the requests handed over are served, those arriving once
// Stop has begun are refused UNAVAILABLE, naming the service, and a
// request whose reply subject is no inbox gets no answer; Stop returns
// once the workers have finished.
func TestRequests(t *testing.T) {
	srv := natstest.Start(t)
	b := newBase(t, srv)
	client := srv.Connect(t)
	release, held := make(chan struct{}), make(chan struct{})
	var served atomic.Int32
	reqs := b.NewRequests(2, func(r micro.Request) {
		if string(r.Data()) == "slow" {
			close(held)
			<-release
		}
		served.Add(1)
		_ = r.Respond(r.Data())
	})
	svc, stop, err := b.Micro(micro.Config{Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.AddEndpoint("echo", reqs.Handler(), micro.WithEndpointSubject("tester.echo")); err != nil {
		t.Fatal(err)
	}
	waitServing(t, client, "tester.echo")
	// A reply subject that is no inbox: dropped, unanswered.
	sub, err := client.SubscribeSync("not.an.inbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := client.PublishRequest("tester.echo", "not.an.inbox", []byte(payloads[0])); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		m, err := client.Request("tester.echo", []byte(p), natstest.Patience(t, 5*time.Second))
		if err != nil || string(m.Data) != p {
			t.Fatalf("echo: %v", err)
		}
	}
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a non-inbox reply subject was answered: %q", m.Data)
	}
	// One request held by its worker while the service stops.
	slow := make(chan error, 1)
	go func() {
		m, err := client.Request("tester.echo", []byte("slow"), natstest.Patience(t, 10*time.Second))
		if err == nil && string(m.Data) != "slow" {
			err = fmt.Errorf("answer %q", m.Data)
		}
		slow <- err
	}()
	select {
	case <-held:
	case <-time.After(natstest.Patience(t, 5*time.Second)):
		t.Fatal("the slow request did not reach a worker")
	}
	if got := served.Load(); got != int32(len(payloads)) {
		t.Fatalf("served %d, want %d", got, len(payloads))
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		reqs.Stop()
	}()
	// Stopping: a later request is refused, not lost.
	natstest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		reqs.mu.RLock()
		defer reqs.mu.RUnlock()
		if !reqs.stopped {
			return errors.New("not stopping yet")
		}
		return nil
	})
	m, err := client.Request("tester.echo", []byte(payloads[1]), natstest.Patience(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != api.ErrUnavailable || !strings.Contains(m.Header.Get(micro.ErrorHeader), "tester is stopping") {
		t.Errorf("while stopping: code %q, %q", code, m.Header.Get(micro.ErrorHeader))
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned before the request handed over was served")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("the request handed over: %v", err)
	}
	<-stopped
	stop()
	stop() // twice: harmless
}

type echoReq struct {
	Name string `json:"name"`
}

// Validate accepts every name.
func (echoReq) Validate() error { return nil }

// TestServe: typed endpoints registered through Serve answer; a failed
// registration is the service's micro error; Stop stops taking requests
// and waits for those in flight.
func TestServe(t *testing.T) {
	srv := natstest.Start(t)
	b := newBase(t, srv)
	client := srv.Connect(t)
	s, err := b.Serve(micro.Config{Version: "0.0.1"}, endpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		regs    []error
		wantErr bool
	}{
		{"registered", []error{endpoint.Add(s.Server, s.Service, endpoint.Spec{Name: "echo", Subject: "tester.typed"},
			func(_ context.Context, _ endpoint.Meta, r echoReq) (echoReq, error) { return r, nil })}, false},
		{"not in the table", []error{nil, endpoint.AddListed(s.Server, s.Service, "tester.unlisted",
			func(_ context.Context, _ endpoint.Meta, r echoReq) (echoReq, error) { return r, nil })}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Add(tc.regs...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Add: %v, want error %v", err, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, endpoint.ErrNotListed) || !strings.HasPrefix(err.Error(), "tester: micro: ")) {
				t.Errorf("Add: %v", err)
			}
		})
	}
	waitServing(t, client, "tester.typed")
	body, _ := json.Marshal(echoReq{Name: "Müller & Söhne <陈伟>"})
	m, err := client.Request("tester.typed", body, natstest.Patience(t, 5*time.Second))
	if err != nil || string(m.Data) != string(body) {
		t.Fatalf("typed echo: %v %q", err, m.Data)
	}
	s.Stop()
	// After Stop: no responder, or (the micro service's unsubscription
	// not yet at the server) refused UNAVAILABLE; never served.
	m, err = client.Request("tester.typed", body, natstest.Patience(t, time.Second))
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout):
	case err == nil && m.Header.Get(micro.ErrorCodeHeader) == api.ErrUnavailable:
	default:
		t.Errorf("after Stop: %v %q, want no responder or UNAVAILABLE", err, m.Data)
	}
}

// waitServing waits until the tester service lists subject.
func waitServing(t *testing.T, nc *nats.Conn, subject string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Patience(t, 10*time.Second))
	defer cancel()
	if err := endpoint.WaitServing(ctx, nc, 10*time.Millisecond, "tester", subject); err != nil {
		t.Fatal(err)
	}
}
