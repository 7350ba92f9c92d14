package redriver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// servicesAccount is the account of the test server's services.
const servicesAccount = "SERVICES"

// testPassword is every test user's password.
const testPassword = "s3cret-test"

// accountsServer is a test server with the trust boundary's shape: the
// redriver in a services' account with JetStream that exports its
// endpoints, and an account per person role (access.RoleAccount) that
// imports them with share: true, so the server attaches the caller to each
// request crossing the import (Nats-Request-Info, overwriting any the
// client sent).
type accountsServer struct {
	*server.Server
}

// startAccounts starts an accounts server with users "redriver" (the
// services' account) and "operator" and "viewer" (their roles' accounts).
func startAccounts(tb testing.TB) *accountsServer {
	tb.Helper()
	var exports, imports []string
	for _, e := range access.RedriverEndpoints() {
		exports = append(exports, fmt.Sprintf("{service: %q}", e))
		imports = append(imports, fmt.Sprintf("{service: {account: %s, subject: %q}, share: true}", servicesAccount, e))
	}
	role := func(r access.Role) string {
		return fmt.Sprintf("%s {\n users: [{user: %q, password: %q}]\n imports: [%s]\n}\n",
			access.RoleAccount(r), string(r), testPassword, strings.Join(imports, ", "))
	}
	text := fmt.Sprintf(`
jetstream { store_dir: %q }
accounts {
  %s {
    jetstream: enabled
    users: [{user: redriver, password: %q}]
    exports: [%s]
  }
  %s
  %s
}
`, tb.TempDir(), servicesAccount, testPassword, strings.Join(exports, ", "), role(access.RoleOperator), role(access.RoleViewer))
	opts := &server.Options{}
	if err := opts.ProcessConfigString(text); err != nil {
		tb.Fatalf("server config: %v", err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("server not ready")
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return &accountsServer{Server: s}
}

// connect opens a connection as user, closed at cleanup.
func (a *accountsServer) connect(tb testing.TB, user string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(a.ClientURL(), nats.UserInfo(user, testPassword), nats.Name("test-"+user))
	if err != nil {
		tb.Fatalf("connect as %s: %v", user, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// fakeAppends answers quarantiner.append in the services' account as the
// quarantiner would (writing nothing) and keeps the requests.
type fakeAppends struct {
	mu   sync.Mutex
	reqs []api.AppendRequest
}

func newFakeAppends(tb testing.TB, nc *nats.Conn) *fakeAppends {
	tb.Helper()
	f := &fakeAppends{}
	sub, err := nc.Subscribe(api.QuarantinerAppend, func(m *nats.Msg) {
		var req api.AppendRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		idx := 0
		if req.ExpectedIndex != nil {
			idx = *req.ExpectedIndex
		}
		b, _ := json.Marshal(api.AppendReply{DLQID: req.DLQID, Index: idx, AuditHash: "test", Status: record.StatusOpen})
		_ = m.Respond(b)
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
	return f
}

// first returns the first append of kind, waiting for it.
func (f *fakeAppends) first(tb testing.TB, kind record.Kind) api.AppendRequest {
	tb.Helper()
	var out api.AppendRequest
	natstest.CheckFor(tb, 10*time.Second, 10*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range f.reqs {
			if r.Kind == kind {
				out = r
				return nil
			}
		}
		return fmt.Errorf("no %s append among %d", kind, len(f.reqs))
	})
	return out
}

// boundaryEnv is an accounts server with a provisioned store, a redriver
// that allows no anonymous request, and a stand-in quarantiner.
type boundaryEnv struct {
	*testEnv
	appends  *fakeAppends
	operator *nats.Conn
	viewer   *nats.Conn
	secret   []byte
}

func newBoundaryEnv(tb testing.TB) *boundaryEnv {
	tb.Helper()
	a := startAccounts(tb)
	nc := a.connect(tb, access.Redriver)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := streams.EnsureCore(ctx, js, streams.DefaultOptions()); err != nil {
		tb.Fatal(err)
	}
	if err := streams.EnsureWORM(ctx, js, streams.DefaultOptions()); err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Provision = false
	cfg.RedriveWait, cfg.OutcomeTimeout, cfg.PollMax = 200*time.Millisecond, time.Second, 200*time.Millisecond
	cfg.ReplaySecret = []byte(strings.Repeat("k", minReplaySecret))
	runRedriver(tb, a.connect(tb, access.Redriver), cfg)
	waitRedriver(tb, nc)
	return &boundaryEnv{
		testEnv: &testEnv{js: js, nc: nc}, appends: newFakeAppends(tb, nc),
		operator: a.connect(tb, string(access.RoleOperator)), viewer: a.connect(tb, string(access.RoleViewer)),
		secret: cfg.ReplaySecret,
	}
}

// call sends body to subject on nc with headers h; it returns the reply and
// its error code.
func call(tb testing.TB, nc *nats.Conn, subject, body string, h nats.Header) ([]byte, string) {
	tb.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for k, v := range h {
		m.Header[k] = v
	}
	rep, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
	return rep.Data, rep.Header.Get(micro.ErrorCodeHeader)
}

// forged is a Nats-Request-Info a client writes itself, claiming to be
// alice of the operators.
var forged = nats.Header{access.RequestInfoHeader: {`{"acc":"` + access.RoleAccount(access.RoleOperator) + `","user":"alice"}`}}

// TestCallerIsRecorded: a drain, a cancel, a release and a redrive are
// recorded under the caller the server attached, whatever the request's
// actor or a forged Nats-Request-Info says; a viewer may read drains but
// not change anything.
func TestCallerIsRecorded(t *testing.T) {
	e := newBoundaryEnv(t)
	start := `{"filter":{"domain":"fsma"},"actor":"mallory","reason":"test"}`
	for _, tc := range []struct {
		name   string
		nc     *nats.Conn
		header nats.Header
		code   string
	}{
		{"operator naming mallory", e.operator, nil, ""},
		{"operator forging alice", e.operator, forged, ""},
		{"viewer", e.viewer, nil, CodeForbidden},
		{"viewer forging an operator", e.viewer, forged, CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, code := call(t, tc.nc, api.DrainStart, start, tc.header)
			if code != tc.code {
				t.Fatalf("drain.start: code %q (%s), want %q", code, data, tc.code)
			}
			if code != "" {
				return
			}
			var rep api.DrainStartReply
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			// Read as the viewer: reads are allowed.
			var st api.DrainState
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				data, code := call(t, e.viewer, api.DrainStatus, `{"drain_id":"`+rep.DrainID+`"}`, nil)
				if code != "" {
					return fmt.Errorf("drain.status: %s %s", code, data)
				}
				if err := json.Unmarshal(data, &st); err != nil {
					return err
				}
				if st.FinishedAt == nil {
					return fmt.Errorf("drain %s", st.Status)
				}
				return nil
			})
			if st.StartedBy != "operator" || st.Request.Actor != "operator" {
				t.Errorf("drain recorded started_by %q, request actor %q; want operator", st.StartedBy, st.Request.Actor)
			}
		})
	}
	for _, tc := range []struct{ subject, body string }{
		{api.DrainCancel, `{"drain_id":"drain-nope"}`},
		{api.Redrive, `{"dlq_id":"fsma_x"}`},
		{api.Release, `{"dlq_id":"fsma_x","reason":"r"}`},
	} {
		if data, code := call(t, e.viewer, tc.subject, tc.body, forged); code != CodeForbidden {
			t.Errorf("viewer %s: code %q (%s), want %s", tc.subject, code, data, CodeForbidden)
		}
	}
	if data, code := call(t, e.viewer, api.DrainList, ``, nil); code != "" {
		t.Errorf("viewer drain.list: %s %s", code, data)
	}

	poison := e.write(t, spec{n: 1, domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable,
		kinds: []record.Kind{record.KindPoisoned}})
	// Under the default policy a release waits for a second person.
	// The operator signs her release (the actor she names is ignored: the
	// authenticated caller's person signs).
	release := signed(t, e.js, api.ReleaseRequest{DLQID: poison, Actor: "operator", Reason: "checked"}, "operator", access.RoleOperator)
	if data, code := call(t, e.operator, api.Release, release, forged); code != api.ErrApprovalRequired {
		t.Fatalf("release under the default policy: %s %s, want %s", code, data, api.ErrApprovalRequired)
	}
	p := approval.DefaultPolicy()
	p.ReleasePoison = false
	if _, err := approval.NewPolicyStore(e.js, nil).Set(context.Background(), access.Identity{User: "policy", Role: access.RolePolicy},
		api.PolicySetRequest{Policy: p, Reason: "this test releases without approval"}); err != nil {
		t.Fatal(err)
	}
	if data, code := call(t, e.operator, api.Release, release, forged); code != "" {
		t.Fatalf("release: %s %s", code, data)
	}
	if got := e.appends.first(t, record.KindReleased); got.Actor != "operator" || got.Reason != "checked" {
		t.Errorf("released record: actor %q reason %q, want operator / checked", got.Actor, got.Reason)
	}

	open := e.write(t, spec{n: 2, domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable})
	if data, code := call(t, e.operator, api.Redrive, `{"dlq_id":"`+open+`","actor":"mallory","reason":"retry"}`, forged); code != "" {
		t.Fatalf("redrive: %s %s", code, data)
	}
	if got := e.appends.first(t, record.KindRedriveRequested); got.Actor != "operator" {
		t.Errorf("redrive_requested record: actor %q, want operator", got.Actor)
	}
	// The replay is on its own subject, with an unguessable message id.
	q, err := e.js.Stream(context.Background(), subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.GetLastMsgForSubject(context.Background(), subjects.Redriven("fsma", "x", open, 1))
	if err != nil {
		t.Fatalf("no replay on %s: %v", subjects.Redriven("fsma", "x", open, 1), err)
	}
	if id := m.Header.Get(envelope.MsgID); id != replay.MsgID(e.secret, open, 1) {
		t.Errorf("replay msg id %q, want %q", id, replay.MsgID(e.secret, open, 1))
	}
	if m.Header.Get(envelope.DLQID) != open || m.Header.Get(envelope.RedriveCount) != "1" {
		t.Errorf("replay headers %v", m.Header)
	}
}

// TestNoCaller: without AllowAnonymous, a request no person's import
// carried (here: from within the one account) is refused on every endpoint.
func TestNoCaller(t *testing.T) {
	e := newTestEnvWith(t, func(*Config) {})
	for _, tc := range []struct{ name, subject, body string }{
		{"drain.start", api.DrainStart, `{"actor":"mallory"}`},
		{"drain.start dry run", api.DrainStart, `{"dry_run":true}`},
		{"drain.status", api.DrainStatus, `{"drain_id":"drain-x"}`},
		{"drain.cancel", api.DrainCancel, `{"drain_id":"drain-x"}`},
		{"drain.list", api.DrainList, ``},
		{"redrive", api.Redrive, `{"dlq_id":"fsma_x","actor":"mallory"}`},
		{"release", api.Release, `{"dlq_id":"fsma_x","actor":"mallory","reason":"r"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if data, code := e.request(t, tc.subject, tc.body); code != CodeUnauthenticated {
				t.Errorf("code %q (%s), want %s", code, data, CodeUnauthenticated)
			}
		})
	}
	kv, _ := e.js.KeyValue(context.Background(), subjects.DrainsBucket)
	if st, _ := kv.Status(context.Background()); st.Values() != 0 {
		t.Errorf("DRAINS holds %d values after refused requests", st.Values())
	}
}

// TestAnonymous: with AllowAnonymous and no caller attached, the request's
// actor (else "anonymous") stands for the caller.
func TestAnonymous(t *testing.T) {
	e := newTestEnv(t)
	for _, tc := range []struct{ name, body, want string }{
		{"named", `{"filter":{"domain":"fsma"},"actor":"dev"}`, "dev"},
		{"unnamed", `{"filter":{"domain":"fsma"}}`, anonymousActor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, code := e.request(t, api.DrainStart, tc.body)
			if code != "" {
				t.Fatalf("drain.start: %s %s", code, data)
			}
			var rep api.DrainStartReply
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			data, code = e.request(t, api.DrainStatus, `{"drain_id":"`+rep.DrainID+`"}`)
			var st api.DrainState
			if err := json.Unmarshal(data, &st); code != "" || err != nil {
				t.Fatalf("drain.status: %s %s %v", code, data, err)
			}
			if st.StartedBy != tc.want {
				t.Errorf("started_by %q, want %q", st.StartedBy, tc.want)
			}
		})
	}
}

// TestReplyGuard: a request whose reply subject is no inbox (a consumer's
// $JS.ACK. delivery, a stored subject, none) gets no answer on any
// endpoint, and the service keeps serving.
func TestReplyGuard(t *testing.T) {
	e := newTestEnv(t)
	for _, subject := range access.RedriverEndpoints() {
		for _, tc := range []struct{ name, reply string }{
			{"consumer ack", "$JS.ACK.EVENTS.x.1.2.3.4.0"},
			{"jetstream api", "$JS.API.STREAM.DELETE.EVENTS"},
			{"ledger", "ledger.pharmacy.forged"},
			{"no reply", ""},
		} {
			t.Run(subject+"/"+tc.name, func(t *testing.T) {
				spy := e.srv.Connect(t)
				got := make(chan *nats.Msg, 4)
				if tc.reply != "" {
					sub, err := spy.ChanSubscribe(tc.reply, got)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = sub.Unsubscribe() }()
					if err := spy.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				if err := e.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: tc.reply, Data: []byte(`{}`)}); err != nil {
					t.Fatal(err)
				}
				// One endpoint serves its requests in order: once a request
				// sent after it is answered, the refused one was handled.
				if _, err := e.nc.Request(subject, []byte(`{}`), 10*time.Second); err != nil {
					t.Fatalf("the endpoint stopped answering: %v", err)
				}
				if err := spy.Flush(); err != nil {
					t.Fatal(err)
				}
				if len(got) != 0 {
					t.Errorf("%d answers on %q", len(got), tc.reply)
				}
			})
		}
	}
}

// TestReplayMsgID: a replay's id is stable for one replay and secret, and
// differs with the replay number, the chain and the secret.
func TestReplayMsgID(t *testing.T) {
	k1, k2 := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32))
	base := replay.MsgID(k1, "pharmacy_x", 1)
	if !strings.HasPrefix(base, "pharmacy_x-1-") || len(base) != len("pharmacy_x-1-")+32 {
		t.Errorf("id %q: want pharmacy_x-1-<32 hex>", base)
	}
	for _, tc := range []struct {
		name string
		id   string
		same bool
	}{
		{"retry", replay.MsgID(k1, "pharmacy_x", 1), true},
		{"next replay", replay.MsgID(k1, "pharmacy_x", 2), false},
		{"other chain", replay.MsgID(k1, "pharmacy_y", 1), false},
		{"other secret", replay.MsgID(k2, "pharmacy_x", 1), false},
		{"old form", "pharmacy_x-" + strconv.Itoa(1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.id == base) != tc.same {
				t.Errorf("%q vs %q: same %v, want %v", tc.id, base, tc.id == base, tc.same)
			}
		})
	}
}
