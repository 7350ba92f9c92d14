// Package redteam attacks the running stack (every service on the
// embedded server, the trust boundary of package access) through what its
// users can reach, and checks both the refusal and that the stores are as
// they were. The permission-level attacks (every attack as every user) are
// in shared/access; these are the ones whose refusal comes from a service.
package redteam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

// env is one running stack shared by the tests of this package.
type env struct {
	st    *stack.Stack
	admin jetstream.JetStream
	conns sync.Map // person → *nats.Conn
	// planted are the ids (approval ids, idempotency keys) of the forgeries
	// the suite leaves in the shared store on purpose: AUDIT and LEDGER
	// keep them for good, so every later verify reports them (plant).
	planted sync.Map // id → struct{}
}

// TestMain removes the shared stack's directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if tempDir != "" {
		_ = os.RemoveAll(tempDir)
	}
	os.Exit(code)
}

var (
	tempDir    string
	shared     *env
	sharedOnce sync.Once
	sharedErr  error
)

// startEnv starts (once per package run) the stack on a free port with a
// temporary store, and returns it.
func startEnv(tb testing.TB) *env {
	tb.Helper()
	sharedOnce.Do(func() {
		cfg := stack.DefaultConfig()
		dir, err := os.MkdirTemp("", "redteam-")
		tempDir = dir
		if err != nil {
			sharedErr = err
			return
		}
		cfg.DataDir, cfg.AnchorDir = dir+"/data", dir+"/anchors"
		cfg.Port, cfg.SyncAlways, cfg.MetricsAddr = -1, false, ""
		cfg.PasswordCost = access.MinBcryptCost // the server checks passwords under the race detector
		cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
		// The redriver sweeps approvals (and takes drains over) at this
		// interval: forged approvals are found sooner.
		cfg.Redriver.DrainLease = 3 * time.Second
		st, err := stack.New(cfg, nil)
		if err != nil {
			sharedErr = err
			return
		}
		done := make(chan error, 1)
		go func() { done <- st.Run(context.Background()) }()
		select {
		case <-st.Ready():
		case err := <-done:
			sharedErr = fmt.Errorf("stack exited: %w", err)
			return
		case <-time.After(60 * time.Second):
			sharedErr = errors.New("stack not ready after 60 s")
			return
		}
		nc, err := st.ConnectAs(access.Admin)
		if err != nil {
			sharedErr = err
			return
		}
		js, err := jetstream.New(nc)
		if err != nil {
			sharedErr = err
			return
		}
		shared = &env{st: st, admin: js}
	})
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return shared
}

// conn returns a connection of person (one per person, kept open).
func (e *env) conn(tb testing.TB, person string) *nats.Conn {
	tb.Helper()
	if c, ok := e.conns.Load(person); ok {
		return c.(*nats.Conn)
	}
	nc, err := e.st.ConnectAs(person)
	if err != nil {
		tb.Fatalf("connect as %s: %v", person, err)
	}
	c, _ := e.conns.LoadOrStore(person, nc)
	return c.(*nats.Conn)
}

// request sends req as person and decodes the reply into rep; it returns
// the service error code, if any.
func (e *env) request(tb testing.TB, person, subject string, req, rep any) string {
	tb.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := e.conn(tb, person).Request(subject, b, 30*time.Second)
	if err != nil {
		tb.Fatalf("%s as %s: %v", subject, person, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return code
	}
	if rep != nil {
		if err := json.Unmarshal(m.Data, rep); err != nil {
			tb.Fatalf("%s: %v", subject, err)
		}
	}
	return ""
}

// msgs returns the number of messages and consumers of a stream.
func (e *env) msgs(tb testing.TB, stream string) (msgs uint64, consumers int) {
	tb.Helper()
	s, err := e.admin.Stream(context.Background(), stream)
	if err != nil {
		tb.Fatal(err)
	}
	in, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return in.State.Msgs, in.State.Consumers
}

// publish publishes an event as the publisher, through its import.
func (e *env) publish(tb testing.TB, subject, data string, h nats.Header) {
	tb.Helper()
	js, err := jetstream.New(e.conn(tb, string(access.RolePublisher)))
	if err != nil {
		tb.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = []byte(data)
	for k, v := range h {
		m.Header[k] = v
	}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		tb.Fatalf("publish: %v", err)
	}
}

// quarantine publishes a broken event carrying marker and returns its
// chain's dlq id (found by its payload, read as the inspector).
func (e *env) quarantine(tb testing.TB, marker string) string {
	tb.Helper()
	e.publish(tb, subjects.Event("pharmacy", "dispense"), `{"broken":"`+marker+`"`, nil)
	var id string
	natstest.CheckFor(tb, 20*time.Second, 50*time.Millisecond, func() error {
		var page api.ListReply
		if code := e.request(tb, access.DefaultPerson(access.RoleViewer), api.AuditList, api.ListRequest{}, &page); code != "" {
			return errors.New(code)
		}
		for _, it := range page.Items {
			var rep api.GetReply
			code := e.request(tb, access.DefaultPerson(access.RoleInspector), api.AuditGet, api.GetRequest{DLQID: it.DLQID, IncludePayload: true, Reason: "test"}, &rep)
			if code == "" && strings.Contains(payloadOf(rep), marker) {
				id = it.DLQID
				return nil
			}
		}
		return errors.New("no chain of the event listed yet")
	})
	return id
}

// payloadOf returns a chain's effective payload ("" when left out).
func payloadOf(rep api.GetReply) string {
	if rep.State.Payload == nil {
		return ""
	}
	b, err := rep.State.Payload.Bytes()
	if err != nil {
		return ""
	}
	return string(b)
}

// chain returns a chain as the admin's audit.get would (through the
// inspector, who may read it whole).
func (e *env) chain(tb testing.TB, id string) api.GetReply {
	tb.Helper()
	var rep api.GetReply
	if code := e.request(tb, access.DefaultPerson(access.RoleInspector), api.AuditGet, api.GetRequest{DLQID: id}, &rep); code != "" {
		tb.Fatalf("audit.get %s: %s", id, code)
	}
	return rep
}

// TestForgedRedriveHeaders (H3): a publisher's event carrying another
// chain's Deadletter-Dlq-Id and Deadletter-Redrive-Count is an ordinary
// event: it gets a chain of its own and the other chain is untouched.
func TestForgedRedriveHeaders(t *testing.T) {
	e := startEnv(t)
	victim := e.quarantine(t, "victim")
	before := len(e.chain(t, victim).Records)
	e.publish(t, subjects.Event("pharmacy", "dispense"), `{"broken":`, nats.Header{
		"Deadletter-Dlq-Id": []string{victim}, "Deadletter-Redrive-Count": []string{"9"},
	})
	own := e.quarantine(t, "forger")
	if own == victim {
		t.Fatal("the forged event was written into the victim's chain")
	}
	if after := e.chain(t, victim); len(after.Records) != before || after.State.Status != record.StatusOpen {
		t.Errorf("victim chain: %d records, status %s; want %d, open", len(after.Records), after.State.Status, before)
	}
}

// TestPayloadNeedsRole (H11): audit.get include_payload answers payload
// bytes only to the roles that read payloads; the others are refused with
// FORBIDDEN, the publisher cannot even reach audit.get, and without
// include_payload nobody gets payload bytes.
func TestPayloadNeedsRole(t *testing.T) {
	e := startEnv(t)
	id := e.quarantine(t, "phi-marker-7f3a")
	tests := []struct {
		person   access.Role
		include  bool
		wantCode string
		wantPHI  bool
	}{
		{access.RoleViewer, true, api.ErrForbidden, false},
		{access.RoleApprover, true, api.ErrForbidden, false},
		{access.RolePolicy, true, api.ErrForbidden, false},
		{access.RoleInspector, true, "", true},
		{access.RoleOperator, true, "", true},
		{access.RoleViewer, false, "", false},
		{access.RoleInspector, false, "", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s include=%v", tc.person, tc.include), func(t *testing.T) {
			var rep api.GetReply
			code := e.request(t, access.DefaultPerson(tc.person), api.AuditGet, api.GetRequest{DLQID: id, IncludePayload: tc.include, Reason: "red team"}, &rep)
			if code != tc.wantCode {
				t.Fatalf("code %q, want %q", code, tc.wantCode)
			}
			got := strings.Contains(payloadOf(rep), "phi-marker-7f3a")
			for _, r := range rep.Records {
				var m map[string]json.RawMessage
				if json.Unmarshal(r.Record, &m) == nil && m["payload"] != nil {
					got = true
				}
			}
			if got != tc.wantPHI {
				t.Errorf("payload in the reply: %v, want %v", got, tc.wantPHI)
			}
		})
	}
	t.Run("publisher", func(t *testing.T) {
		_, err := e.conn(t, string(access.RolePublisher)).Request(api.AuditGet, []byte(`{"dlq_id":"`+id+`","include_payload":true}`), time.Second)
		if err == nil {
			t.Fatal("the publisher reached audit.get")
		}
	})
}

// TestWhoamiIsTheServersWord: audit.whoami answers each person with the
// user and role the server authenticated, whatever Nats-Request-Info the
// client forged; the publisher's account does not import it.
func TestWhoamiIsTheServersWord(t *testing.T) {
	e := startEnv(t)
	for _, r := range access.Roles {
		t.Run(string(r), func(t *testing.T) {
			m := nats.NewMsg(api.AuditWhoami)
			m.Header.Set(access.RequestInfoHeader, `{"acc":"DEADLETTER_POLICY","user":"mallory"}`)
			m.Data = []byte(`{}`)
			rep, err := e.conn(t, access.DefaultPerson(r)).RequestMsg(m, 5*time.Second)
			if r == access.RolePublisher {
				if err == nil {
					t.Fatal("the publisher reached audit.whoami")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if code := rep.Header.Get(micro.ErrorCodeHeader); code != "" {
				t.Fatalf("audit.whoami: %s %s", code, rep.Header.Get(micro.ErrorHeader))
			}
			var who api.WhoamiReply
			if err := json.Unmarshal(rep.Data, &who); err != nil {
				t.Fatal(err)
			}
			if want := (api.WhoamiReply{User: access.DefaultPerson(r), Role: string(r), ReadsPayloads: r.ReadsPayloads()}); who != want {
				t.Errorf("whoami = %+v, want %+v", who, want)
			}
		})
	}
}

// TestExportAndAccessAudit: audit.export answers payload bytes only to
// the roles that read payloads; every payload read is in the access audit
// as the authenticated caller, whatever Nats-Request-Info the request
// carried; a read without a reason is refused; and no person can write
// the access audit itself.
func TestExportAndAccessAudit(t *testing.T) {
	e := startEnv(t)
	e.quarantine(t, "phi-marker-9c1e")
	for _, tc := range []struct {
		person   access.Role
		wantCode string
	}{
		{access.RoleViewer, api.ErrForbidden},
		{access.RoleApprover, api.ErrForbidden},
		{access.RolePolicy, api.ErrForbidden},
		{access.RoleInspector, ""},
		{access.RoleOperator, ""},
	} {
		t.Run(string(tc.person), func(t *testing.T) {
			var rep api.ExportReply
			code := e.request(t, access.DefaultPerson(tc.person), api.AuditExport, api.ExportRequest{Reason: "red team " + string(tc.person)}, &rep)
			if code != tc.wantCode {
				t.Fatalf("code %q, want %q", code, tc.wantCode)
			}
			got := false
			for _, c := range rep.Chains {
				for _, er := range c.Records {
					if r, err := record.Parse(er.Record); err == nil && r.Payload != nil {
						b, _ := r.Payload.Bytes()
						got = got || strings.Contains(string(b), "phi-marker-9c1e")
					}
				}
			}
			if got != (tc.wantCode == "") {
				t.Errorf("payload in the reply: %v", got)
			}
		})
	}
	t.Run("no reason", func(t *testing.T) {
		var rep api.GetReply
		code := e.request(t, access.DefaultPerson(access.RoleInspector), api.AuditExport, api.ExportRequest{}, &rep)
		if code != api.ErrBadRequest {
			t.Fatalf("export without a reason: %q, want BAD_REQUEST", code)
		}
	})
	t.Run("forged caller", func(t *testing.T) {
		m := nats.NewMsg(api.AuditExport)
		m.Header.Set(access.RequestInfoHeader, `{"acc":"DEADLETTER_OPERATOR","user":"mallory"}`)
		m.Data = []byte(`{"reason":"forged caller"}`)
		r, err := e.conn(t, access.DefaultPerson(access.RoleInspector)).RequestMsg(m, 30*time.Second)
		if err != nil || r.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("export: %v %v", err, r.Header)
		}
		var acc api.AccessReply
		if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditAccess, api.AccessRequest{Limit: 1000}, &acc); code != "" {
			t.Fatalf("audit.access as a viewer: %s", code)
		}
		found := false
		for _, it := range acc.Items {
			if it.Reason == "forged caller" {
				found = true
				if it.User == "mallory" || it.Role != string(access.RoleInspector) {
					t.Errorf("the access record names %s (%s), not the inspector", it.User, it.Role)
				}
			}
			if it.Reason == "red team viewer" || it.Reason == "written by a person" {
				t.Errorf("access record of a refused read or a person's write: %+v", it)
			}
		}
		if !found {
			t.Error("the export is not in the access audit")
		}
	})
	t.Run("a person cannot write the access audit", func(t *testing.T) {
		for _, p := range []access.Role{access.RoleInspector, access.RoleOperator} {
			_, err := e.conn(t, access.DefaultPerson(p)).Request(subjects.AuditAccess("bob"), []byte(`{"user":"bob","reason":"written by a person"}`), time.Second)
			if err == nil {
				t.Fatalf("%s published to the access audit and got an answer", p)
			}
		}
	})
}

// TestActorIsTheCaller (H13, H15): a drain started by the operator with
// another name in its request, and a forged Nats-Request-Info, is recorded
// as the operator; a viewer may not start one.
func TestActorIsTheCaller(t *testing.T) {
	e := startEnv(t)
	id := e.quarantine(t, "actor")
	m := nats.NewMsg(api.DrainStart)
	m.Header.Set(access.RequestInfoHeader, `{"acc":"DEADLETTER_OPERATOR","user":"mallory"}`)
	m.Data, _ = json.Marshal(api.DrainStartRequest{
		Filter: api.DrainFilter{DLQIDs: []string{id}, Classes: []string{string(record.ClassValidation)}}, Actor: "mallory", Reason: "red team",
	})
	rep, err := e.conn(t, access.DefaultPerson(access.RoleOperator)).RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := rep.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("drain.start: %s %s", code, rep.Header.Get(micro.ErrorHeader))
	}
	var started api.DrainStartReply
	if err := json.Unmarshal(rep.Data, &started); err != nil {
		t.Fatal(err)
	}
	var st api.DrainState
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.DrainStatus, api.DrainIDRequest{DrainID: started.DrainID}, &st); code != "" {
		t.Fatal(code)
	}
	if st.StartedBy != access.DefaultPerson(access.RoleOperator) {
		t.Errorf("drain started by %q, want operator", st.StartedBy)
	}
	// The viewer's account does not import drain.start: the server itself
	// refuses the request.
	if _, err := e.conn(t, access.DefaultPerson(access.RoleViewer)).Request(api.DrainStart, []byte(`{"dry_run":true}`), time.Second); err == nil {
		t.Error("the viewer reached drain.start")
	}
}

// TestReplyOnAStoreSubject (H14): a request whose reply subject is a
// stream's subject gets its reply on the server's _R_ mapping, never into
// the stream.
func TestReplyOnAStoreSubject(t *testing.T) {
	e := startEnv(t)
	before, _ := e.msgs(t, subjects.LedgerStream)
	nc := e.conn(t, string(access.RolePublisher))
	for range 3 {
		if err := nc.PublishRequest("validator.check.pharmacy.dispense", "ledger.pharmacy.forged", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A later request on the same path is answered: the earlier ones were
	// served (or refused) before it.
	if _, err := nc.Request("validator.check.pharmacy.dispense", []byte(`{}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if after, _ := e.msgs(t, subjects.LedgerStream); after != before {
		t.Errorf("LEDGER went from %d to %d messages", before, after)
	}
}

// TestManyScansLeaveNoConsumers (H7): a burst of concurrent verifications
// and dry runs leaves no consumer behind on any stream (services read by
// direct get) and the endpoints still answer afterwards.
func TestManyScansLeaveNoConsumers(t *testing.T) {
	e := startEnv(t)
	e.quarantine(t, "scan")
	_, qBefore := e.msgs(t, subjects.QuarantineStream)
	nc := e.conn(t, access.DefaultPerson(access.RoleViewer))
	const n = 300
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = nc.Request(api.AuditVerify, []byte(`{}`), 30*time.Second)
		}()
	}
	wg.Wait()
	for _, s := range []string{subjects.QuarantineStream, subjects.AuditStream, subjects.EventsStream, subjects.LedgerStream} {
		_, c := e.msgs(t, s)
		want := 0
		if s == subjects.QuarantineStream {
			want = qBefore
		}
		if s == subjects.EventsStream {
			want = 1 // the validator's
		}
		if c != want {
			t.Errorf("%s has %d consumers, want %d", s, c, want)
		}
	}
	var v api.VerifyReply
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditVerify, api.VerifyRequest{}, &v); code != "" {
		t.Fatalf("verify after the burst: %s", code)
	}
	if code := e.request(t, access.DefaultPerson(access.RoleOperator), api.DrainStart, api.DrainStartRequest{DryRun: true}, nil); code != "" {
		t.Fatalf("dry run after the burst: %s", code)
	}
}

// TestHeldBatchesStallNobody: EVENTS allows atomic batches (producers
// write many events with one fsync), so a publisher can open batches there
// and never commit them, up to the server's 50 per stream. Nothing of them
// is stored; another producer's batch may be refused meanwhile, and its
// events, sent again one per publish as dlqctl does, are all stored and
// committed: the held batches cost throughput, never an event. They expire
// after embedded.BatchTimeout.
func TestHeldBatchesStallNobody(t *testing.T) {
	e := startEnv(t)
	events, _ := e.msgs(t, subjects.EventsStream)
	ledger, _ := e.msgs(t, subjects.LedgerStream)
	attacker := e.conn(t, string(access.RolePublisher))
	held := 0
	opened := time.Now()
	for i := range 60 {
		m := nats.NewMsg(subjects.Event("pharmacy", "dispense"))
		m.Data = []byte(`{}`)
		m.Header.Set("Nats-Batch-Id", fmt.Sprintf("held-%d-%d", time.Now().UnixNano(), i))
		m.Header.Set("Nats-Batch-Sequence", "1")
		r, err := attacker.RequestMsg(m, 5*time.Second)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if !strings.Contains(string(r.Data), "error") {
			held++
		}
	}
	// A batch expires after embedded.BatchTimeout: on a slow machine the
	// first ones may have expired before the last were opened, freeing
	// their places, so the limit binds only within that time.
	if took := time.Since(opened); held > 50 && took < embedded.BatchTimeout {
		t.Errorf("%d batches held open on EVENTS within %s, the server's limit is 50", held, took)
	}
	// The victim: another producer's batch of valid events.
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	vnc, err := e.st.ConnectAs(string(access.RolePublisher))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vnc.Close)
	vjs, err := jetstream.New(vnc)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*nats.Msg
	for i := range 5 {
		ev, err := set.Valid(1_000_000 + i) // identities no other test uses
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, &nats.Msg{Subject: ev.Subject, Data: ev.Data, Header: nats.Header{}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := batch.Publish(ctx, vjs, msgs); err != nil {
		t.Logf("the victim's batch: %v; one event per publish", err)
		for _, m := range msgs {
			if _, err := vjs.PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Data: m.Data}); err != nil {
				t.Fatalf("the victim's event not stored: %v", err)
			}
		}
	}
	if after, _ := e.msgs(t, subjects.EventsStream); after != events+5 {
		t.Errorf("EVENTS went from %d to %d messages, want the victim's 5 only", events, after)
	}
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n, _ := e.msgs(t, subjects.LedgerStream); n != ledger+5 {
			return fmt.Errorf("LEDGER holds %d new commits, want 5", n-ledger)
		}
		return nil
	})
}

// TestForgedDirectReplay (H3): nobody but the redriver may publish a
// replay into EVENTS on redriven.>: a producer's (or a person's) forged
// replay, naming a real chain in its subject and headers, is refused, and
// EVENTS holds nothing on that subject; the chain is untouched.
func TestForgedDirectReplay(t *testing.T) {
	natstest.Long(t, "a drain or replay of many events, tens of seconds")
	e := startEnv(t)
	victim := e.quarantine(t, "direct-victim")
	before := len(e.chain(t, victim).Records)
	subject := subjects.Redriven("pharmacy", "dispense", victim, 9)
	for _, who := range []access.Role{access.RolePublisher, access.RoleOperator, access.RoleInspector, access.RoleApprover} {
		t.Run(string(who), func(t *testing.T) {
			js, err := jetstream.New(e.conn(t, access.DefaultPerson(who)))
			if err != nil {
				t.Fatal(err)
			}
			m := nats.NewMsg(subject)
			m.Data = []byte(`{"broken":`)
			m.Header.Set("Deadletter-Dlq-Id", victim)
			m.Header.Set("Deadletter-Redrive-Count", "9")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if ack, err := js.PublishMsg(ctx, m); err == nil {
				t.Fatalf("the forged replay was stored: %+v", ack)
			}
		})
	}
	s, err := e.admin.Stream(context.Background(), subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(context.Background(), subject); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("EVENTS holds a message on %s (%v)", subject, err)
	}
	if after := e.chain(t, victim); len(after.Records) != before || after.State.Status != record.StatusOpen {
		t.Errorf("victim chain: %d records, status %s; want %d, open", len(after.Records), after.State.Status, before)
	}
}
