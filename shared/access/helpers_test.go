package access_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// refusalTimeout bounds a request the server is expected to refuse: a
// permission violation drops the request, so the requester times out.
const refusalTimeout = 2 * time.Second

// env is a test server enforcing the trust boundary, provisioned by the
// admin, with records records in QUARANTINE appended by the quarantiner.
type env struct {
	srv   *natstest.Secured
	admin jetstream.JetStream
}

// startEnv starts a secured server (natstest.StartSecured), provisions the
// services' durable consumers as the admin, and seeds QUARANTINE.
func startEnv(tb testing.TB, records int) *env {
	tb.Helper()
	srv := natstest.StartSecured(tb, streams.DefaultOptions())
	e := &env{srv: srv}
	e.admin = e.js(tb, e.conn(tb, access.Admin, nil))
	ctx := testCtx(tb, 10*time.Second)
	if records > 0 {
		q := e.js(tb, e.conn(tb, access.Quarantiner, nil))
		for i := range records {
			subj := subjects.Quarantine("pharmacy", fmt.Sprintf("seed%d", i))
			if _, err := q.Publish(ctx, subj, []byte(`{"seed":true}`), jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
				tb.Fatalf("seed quarantine: %v", err)
			}
		}
	}
	return e
}

// violations records the permission violations the server reports to one
// connection.
type violations struct {
	mu      sync.Mutex
	errs    []string
	once    sync.Once
	seen    chan struct{} // closed at the first violation
	changed chan struct{} // signalled at every violation
}

func newViolations() *violations {
	return &violations{seen: make(chan struct{}), changed: make(chan struct{}, 1)}
}

func (v *violations) add(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
	v.once.Do(func() { close(v.seen) })
	select {
	case v.changed <- struct{}{}:
	default:
	}
}

// reset forgets the violations seen so far.
func (v *violations) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = nil
}

// wait reports whether the server reports a permission violation whose
// text holds what (e.g. `publish to "x"`) within refusalTimeout.
func (v *violations) wait(what string) bool {
	want := strings.ToLower("Permissions Violation for " + what)
	deadline := time.NewTimer(refusalTimeout)
	defer deadline.Stop()
	for {
		v.mu.Lock()
		for _, e := range v.errs {
			if strings.Contains(strings.ToLower(e), want) {
				v.mu.Unlock()
				return true
			}
		}
		v.mu.Unlock()
		select {
		case <-v.changed:
		case <-deadline.C:
			return false
		}
	}
}

// conn connects as user. When v is not nil, it collects the connection's
// permission violations.
func (e *env) conn(tb testing.TB, user string, v *violations) *nats.Conn {
	tb.Helper()
	opts := append([]nats.Option{nats.Name("access-test-" + user)}, e.srv.Secrets.NATSOptions(user)...)
	if v != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				v.add(err)
			}
		}))
	}
	return e.srv.Connect(tb, opts...)
}

// js returns a JetStream context on nc.
func (e *env) js(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// testCtx returns a context cancelled at cleanup or after d.
func testCtx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// users are every user of the default configuration: the services'
// account's and the people.
func users() []string {
	out := access.ServiceNames()
	for _, p := range access.DefaultPeople() {
		out = append(out, p.Name)
	}
	return out
}
