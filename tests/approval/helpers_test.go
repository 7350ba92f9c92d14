// Package approval tests two-person approval (issue #18) end to end: the
// validator, the quarantiner and the redriver on one secured embedded
// server (natstest.StartSecured), each service as its own user, and every
// person (operator, approver, policy, viewer) calling through his role's
// account, so that every identity comes from the server.
package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/chains"
)

// clock is a settable clock (the redriver's approvals and policy).
type clock struct {
	mu sync.Mutex
	d  time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.d)
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d += d
}

// env is the secured pipeline.
type env struct {
	srv    *natstest.Secured
	admin  *nats.Conn
	js     jetstream.JetStream
	idem   jetstream.KeyValue
	gate   *gate.Gate
	clock  *clock
	people map[string]*nats.Conn
	// signers are the people's signing keys, registered in AUDIT.
	signers map[string]*approvaltest.Person
}

func testLogger() *slog.Logger {
	if os.Getenv("APPROVAL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newEnv starts the server, a validator (no downstream: it commits to
// LEDGER) and a quarantiner; startRedriver starts redrivers.
func newEnv(tb testing.TB) *env {
	tb.Helper()
	srv := natstest.StartSecured(tb, streams.DefaultOptions())
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{srv: srv, admin: srv.ConnectAs(tb, access.Admin), gate: g, clock: &clock{}, people: map[string]*nats.Conn{}}
	if e.js, err = jetstream.New(e.admin); err != nil {
		tb.Fatal(err)
	}
	if e.idem, err = e.js.KeyValue(context.Background(), subjects.IdempotencyBucket); err != nil {
		tb.Fatal(err)
	}
	vcfg := validator.DefaultConfig()
	vcfg.Provision, vcfg.CreateConsumer = false, false
	vcfg.MaxDeliver = 2
	vcfg.BackoffBase, vcfg.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	vcfg.AckWait, vcfg.ClaimLease = 2*time.Second, 2*time.Second
	qcfg := quarantiner.DefaultConfig()
	qcfg.Provision, qcfg.CreateConsumer = false, false
	qcfg.AckWait, qcfg.RetryDelay, qcfg.TerminatedGrace = 2*time.Second, 100*time.Millisecond, 200*time.Millisecond
	// No service may create a consumer: the administrator's step.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := stack.ProvisionConsumers(ctx, e.js, vcfg, qcfg); err != nil {
		tb.Fatal(err)
	}
	v, err := validator.New(srv.ConnectAs(tb, access.Validator), vcfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	natstest.Run(tb, "validator", v.Run)
	q, err := quarantiner.New(srv.ConnectAs(tb, access.Quarantiner), qcfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	natstest.Run(tb, "quarantiner", q.Run)
	e.signers = map[string]*approvaltest.Person{}
	for _, r := range []access.Role{access.RoleOperator, access.RoleApprover, access.RolePolicy, access.RoleViewer} {
		e.people[access.DefaultPerson(r)] = srv.ConnectAs(tb, access.DefaultPerson(r))
		e.signers[access.DefaultPerson(r)] = approvaltest.Register(tb, e.js, access.DefaultPerson(r), r)
	}
	e.waitService(tb, "validator")
	e.waitService(tb, "quarantiner")
	return e
}

func (e *env) waitService(tb testing.TB, name string) {
	tb.Helper()
	// Discovery through a person's account (the services answer only
	// requests that come through an import).
	natstest.WaitServing(tb, e.people[access.DefaultPerson(access.RoleViewer)], name)
}

// redriverConfig is the redriver of the tests: no anonymous caller, the
// test clock.
func (e *env) redriverConfig() redriver.Config {
	cfg := redriver.DefaultConfig()
	cfg.Provision = false
	cfg.OutcomeTimeout, cfg.RedriveWait = 15*time.Second, 10*time.Second
	cfg.PollMax, cfg.DrainLease = 500*time.Millisecond, 2*time.Second
	cfg.InstanceID = "redriver-approval-test"
	cfg.Now = e.clock.Now
	return cfg
}

// startRedriver runs a redriver on nc (nil: a new connection as the
// redriver) and returns its stop.
func (e *env) startRedriver(tb testing.TB, nc *nats.Conn, cfg redriver.Config) func() {
	tb.Helper()
	if nc == nil {
		nc = e.srv.ConnectAs(tb, access.Redriver)
	}
	r, err := redriver.New(nc, cfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	stop := natstest.Run(tb, "redriver", r.Run)
	e.waitService(tb, "redriver")
	return stop
}

// call sends v to subject as user and returns the reply body or the
// service's error (an *api.Error) or a transport error.
func (e *env) call(tb testing.TB, user, subject string, v any, timeout time.Duration) ([]byte, error) {
	tb.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			tb.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return endpoint.CallRaw(ctx, e.people[user], subject, b)
}

// ok calls subject as user and decodes a successful reply into out.
func (e *env) ok(tb testing.TB, user, subject string, v, out any) {
	tb.Helper()
	data, err := e.call(tb, user, subject, v, 30*time.Second)
	if err != nil {
		tb.Fatalf("%s as %s: %v", subject, user, err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			tb.Fatalf("%s: reply %s: %v", subject, data, err)
		}
	}
}

// refused calls subject as user and returns the service's error, failing
// the test on a success or a transport error.
func (e *env) refused(tb testing.TB, user, subject string, v any) *api.Error {
	tb.Helper()
	data, err := e.call(tb, user, subject, v, 30*time.Second)
	if err == nil {
		tb.Fatalf("%s as %s succeeded: %s", subject, user, data)
	}
	ae := api.AsError(err)
	if ae == nil {
		tb.Fatalf("%s as %s: not a service error: %v", subject, user, err)
	}
	return ae
}

// pending asks for an action that needs approval and returns the pending
// approval of the APPROVAL_REQUIRED answer.
func (e *env) pending(tb testing.TB, user, subject string, v any) api.Approval {
	tb.Helper()
	ae := e.refused(tb, user, subject, v)
	if ae.Code != api.ErrApprovalRequired || ae.Approval == nil || ae.Approval.ID == "" {
		tb.Fatalf("%s: %+v, want %s with an approval", subject, ae, api.ErrApprovalRequired)
	}
	return *ae.Approval
}

// publish publishes an event as the admin.
func (e *env) publish(tb testing.TB, subject string, data []byte) {
	tb.Helper()
	if _, err := e.js.Publish(context.Background(), subject, data); err != nil {
		tb.Fatal(err)
	}
}

// chain reads a chain and folds it (tests/internal/chains).
func (e *env) chain(tb testing.TB, dlqID string) ([]record.Record, record.State, error) {
	tb.Helper()
	return chains.Read(tb, e.js, dlqID)
}

// waitState polls until the chain's state satisfies ok.
func (e *env) waitState(tb testing.TB, dlqID string, ok func(record.State) bool, what string) []record.Record {
	tb.Helper()
	var recs []record.Record
	natstest.CheckFor(tb, 30*time.Second, 20*time.Millisecond, func() error {
		var st record.State
		var err error
		if recs, st, err = e.chain(tb, dlqID); err != nil {
			return err
		}
		if !ok(st) {
			return fmt.Errorf("chain %s is %s/%s, want %s", dlqID, st.Status, st.Class, what)
		}
		return nil
	})
	return recs
}

// committedOnce checks key is committed with exactly one LEDGER message.
func (e *env) committedOnce(tb testing.TB, key string) {
	tb.Helper()
	dom, _, _ := strings.Cut(key, "_")
	ls, err := e.js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		tb.Fatal(err)
	}
	natstest.CheckFor(tb, 20*time.Second, 20*time.Millisecond, func() error {
		st, found, err := idempotency.Lookup(context.Background(), e.idem, key)
		if err != nil || !found || !st.Committed() {
			return fmt.Errorf("%s: key %+v found %v err %v, want committed", key, st, found, err)
		}
		return nil
	})
	info, err := ls.Info(context.Background(), jetstream.WithSubjectFilter(subjects.Ledger(dom, key)))
	if err != nil {
		tb.Fatal(err)
	}
	if n := info.State.Subjects[subjects.Ledger(dom, key)]; n != 1 {
		tb.Errorf("%s: %d LEDGER messages, want 1", key, n)
	}
}

// dispense is a valid pharmacy dispense of transaction tx.
func dispense(tx string) map[string]any {
	return map[string]any{
		"transaction_id": tx, "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
		"lot": "L" + tx, "expiry": "2026-09-30", "quantity_delta": "-30", "unit": "EA",
		"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2025-03-14T15:42:10Z", "actor_id": "RPH-0412",
	}
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// quarantineInvalid publishes a dispense of tx with an invalid NDC and
// waits for its validation-class chain; it returns the dlq id.
func (e *env) quarantineInvalid(tb testing.TB, tx string) string {
	tb.Helper()
	doc := dispense(tx)
	doc["ndc"] = "12345" // INVALID_NDC
	b := mustJSON(tb, doc)
	e.publish(tb, "events.pharmacy.dispense", b)
	id := record.PayloadDLQID("pharmacy", "events.pharmacy.dispense", b)
	e.waitState(tb, id, func(st record.State) bool { return st.Class == record.ClassValidation }, "validation")
	return id
}

// receive500 is the identity-changing correction of tx's dispense: a
// receive of +500 (valid).
func (e *env) receive500(tb testing.TB, tx string) (payload []byte, key string) {
	tb.Helper()
	doc := dispense(tx)
	doc["event_type"], doc["quantity_delta"] = "receive", "500"
	b := mustJSON(tb, doc)
	envl, err := e.gate.Check("events.pharmacy.receive", b)
	if err != nil {
		tb.Fatalf("the correction is invalid: %v", err)
	}
	return b, envl.IdempotencyKey
}

// seed writes chains straight into QUARANTINE as the quarantiner seals
// them: the first record of an exhausted valid dispense of each tx,
// followed by records of kinds (e.g. poisoned). It returns the dlq ids and
// idempotency keys.
func (e *env) seed(tb testing.TB, txs []string, kinds ...record.Kind) (ids, keys []string) {
	tb.Helper()
	for i, tx := range txs {
		id, key := e.seedDoc(tb, dispense(tx), uint64(1_000_000+i), kinds...)
		ids, keys = append(ids, id), append(keys, key)
	}
	return ids, keys
}

// seedDoc writes the chain of an exhausted valid dispense doc (stored at
// EVENTS sequence seq) straight into QUARANTINE, followed by records of
// kinds; it returns the dlq id and the idempotency key.
func (e *env) seedDoc(tb testing.TB, doc map[string]any, seq uint64, kinds ...record.Kind) (id, key string) {
	tb.Helper()
	now := time.Now().UTC()
	b := mustJSON(tb, doc)
	envl, err := e.gate.Check("events.pharmacy.dispense", b)
	if err != nil {
		tb.Fatal(err)
	}
	f := record.Failure{
		Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Detail: "downstream answered HTTP 503",
		Domain: envl.Domain, Subject: "events.pharmacy.dispense", Stream: subjects.EventsStream, Seq: seq, Deliveries: 2,
		Published: now, Payload: b, Envelope: &envl, FailedAt: now,
	}
	recs := []record.Record{record.FromFailure(f, now)}
	if err := record.Seal(&recs[0]); err != nil {
		tb.Fatal(err)
	}
	for _, k := range kinds {
		prev := recs[len(recs)-1]
		next := prev
		next.Index, next.Kind, next.Payload, next.PrevHash, next.AuditHash = prev.Index+1, k, nil, prev.AuditHash, ""
		if k == record.KindPoisoned {
			next.Class = record.ClassPoison
		}
		if err := record.Seal(&next); err != nil {
			tb.Fatal(err)
		}
		recs = append(recs, next)
	}
	for _, r := range recs {
		raw, err := record.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		var opts []jetstream.PublishOpt
		if r.Index == 0 {
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(0))
		}
		if _, err := e.js.Publish(context.Background(), subjects.Quarantine(r.Domain, r.DLQID), raw, opts...); err != nil {
			tb.Fatal(err)
		}
	}
	if _, st, err := e.chain(tb, recs[0].DLQID); err != nil || len(kinds) > 0 && st.Status != record.StatusAfter(record.StatusOpen, kinds[len(kinds)-1]) {
		tb.Fatalf("seeded chain %s: %s, %v", recs[0].DLQID, st.Status, err)
	}
	return recs[0].DLQID, envl.IdempotencyKey
}

// signer returns user's signing key (a default person's).
func (e *env) signer(tb testing.TB, user string) *approvaltest.Person {
	tb.Helper()
	p := e.signers[user]
	if p == nil {
		tb.Fatalf("%s has no signing key", user)
	}
	return p
}

// roleOf is the role of a default person.
func roleOf(user string) access.Role {
	for _, r := range access.Roles {
		if access.DefaultPerson(r) == user {
			return r
		}
	}
	return ""
}

// approveReq is user's signed approval of approval id, meaning meaning,
// now (the test clock).
func (e *env) approveReq(tb testing.TB, user, id, meaning string) api.ApprovalDecisionRequest {
	tb.Helper()
	return e.signer(tb, user).ApproveRequest(tb, e.js, id, meaning, e.clock.Now())
}

// rejectReq is user's signed rejection of approval id, for reason, now.
func (e *env) rejectReq(tb testing.TB, user, id, reason string) api.ApprovalDecisionRequest {
	tb.Helper()
	return e.signer(tb, user).RejectRequest(tb, e.js, id, reason, e.clock.Now())
}

// release is req signed by user, of the chain as it stands, now.
func (e *env) release(tb testing.TB, user string, req api.ReleaseRequest) api.ReleaseRequest {
	tb.Helper()
	return e.signer(tb, user).SignRelease(tb, e.js, req, roleOf(user), e.clock.Now())
}

// dismiss is req signed by user, of the chain as it stands, now.
func (e *env) dismiss(tb testing.TB, user string, req api.DismissRequest) api.DismissRequest {
	tb.Helper()
	return e.signer(tb, user).SignDismiss(tb, e.js, req, roleOf(user), e.clock.Now())
}

// lift is req signed by user, of the hold as it stands, now.
func (e *env) lift(tb testing.TB, user string, req api.HoldLiftRequest) api.HoldLiftRequest {
	tb.Helper()
	return e.signer(tb, user).SignLift(tb, e.js, req, roleOf(user), e.clock.Now())
}

// auditLast returns the last AUDIT message on subject.
func (e *env) auditLast(tb testing.TB, subject string) []byte {
	tb.Helper()
	s, err := e.js.Stream(context.Background(), subjects.AuditStream)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		tb.Fatalf("AUDIT %s: %v", subject, err)
	}
	return m.Data
}
