package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a secured server with the store and the policy store on the
// redriver's connection (its real permissions).
type env struct {
	srv    *natstest.Secured
	js     jetstream.JetStream
	admin  jetstream.JetStream
	store  *approval.Store
	policy *approval.PolicyStore
	clock  *clock
	logs   *natstest.Buffer
	people map[string]*approvaltest.Person
	asked  int
}

// people of the default configuration.
var (
	operator  = access.Identity{User: access.DefaultPerson(access.RoleOperator), Role: access.RoleOperator}
	approver  = access.Identity{User: access.DefaultPerson(access.RoleApprover), Role: access.RoleApprover}
	viewer    = access.Identity{User: access.DefaultPerson(access.RoleViewer), Role: access.RoleViewer}
	policyman = access.Identity{User: access.DefaultPerson(access.RolePolicy), Role: access.RolePolicy}
)

func newEnv(tb testing.TB) *env {
	tb.Helper()
	srv := natstest.StartSecured(tb, streams.DefaultOptions())
	js, err := jetstream.New(srv.ConnectAs(tb, access.Redriver))
	if err != nil {
		tb.Fatal(err)
	}
	admin, err := jetstream.New(srv.ConnectAs(tb, access.Admin))
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{srv: srv, js: js, admin: admin, clock: &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, logs: &natstest.Buffer{}}
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Every person of the default configuration signs with a key of
	// their own, registered in AUDIT (the operator holds the approver
	// role too: her role login amara.okafor+approver).
	e.people = map[string]*approvaltest.Person{}
	for _, r := range access.Roles {
		for _, name := range access.DefaultPersonsOf(r) {
			roles := []access.Role{r}
			if r == access.RoleOperator {
				roles = append(roles, access.RoleApprover)
			}
			e.people[name] = approvaltest.Register(tb, admin, name, roles...)
		}
	}
	e.store, err = approval.Open(ctx(tb), js, approval.Config{
		Checker: approval.AuditRegistry{JS: js}, Logger: log, Now: e.clock.Now,
	})
	if err != nil {
		tb.Fatal(err)
	}
	e.policy = approval.NewPolicyStore(js, e.clock.Now)
	return e
}

// ctx is a context bounded for one test step.
func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return c
}

// person returns who's person (registered in newEnv).
func (e *env) person(tb testing.TB, who access.Identity) *approvaltest.Person {
	tb.Helper()
	p := e.people[access.PersonOf(who.User)]
	if p == nil {
		tb.Fatalf("no person %s", who.User)
	}
	return p
}

// stored returns approval id as stored, or one of that id alone when
// there is none (a decision of a missing approval).
func (e *env) stored(tb testing.TB, id string) api.Approval {
	tb.Helper()
	a, err := e.store.Get(ctx(tb), id)
	if err != nil {
		return api.Approval{ID: id}
	}
	return a
}

// approve is who's signed approval of approval id, meaning meaning, now.
func (e *env) approve(tb testing.TB, who access.Identity, id, meaning string) *api.SignedDecision {
	tb.Helper()
	return e.person(tb, who).Approve(e.stored(tb, id), meaning, e.clock.Now())
}

// reject is who's signed rejection of approval id, for reason, now.
func (e *env) reject(tb testing.TB, who access.Identity, id, reason string) *api.SignedDecision {
	tb.Helper()
	return e.person(tb, who).Reject(e.stored(tb, id), reason, e.clock.Now())
}

// request creates a pending approval of a correction asked for by who.
func (e *env) request(tb testing.TB, who access.Identity, d approval.Decision) api.Approval {
	tb.Helper()
	// Each request a body and a record of its own: the same request
	// asked again while pending answers the pending approval, and a
	// record has one open correction at a time.
	e.asked++
	dlqID := fmt.Sprintf("pharmacy_%032x", e.asked)
	body, _ := json.Marshal(api.RedriveRequest{DLQID: dlqID, Payload: corrected,
		Reason: fmt.Sprintf("the invoice disagrees (%d)", e.asked)})
	a, err := e.store.Create(ctx(tb), approval.Request{
		Action: api.ActionCorrect, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 1,
		Body: body, Payload: indented, Requester: who, Reason: "the invoice disagrees", Decision: d,
	}, approval.DefaultPolicy())
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	return a
}

// original is a pharmacy dispense; corrected turns it into a receive of
// +500 (same transaction and registrant: same idempotency key).
var (
	original  = []byte(`{"transaction_id":"TX-SECRET-PHI","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917","expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412"}`)
	corrected = []byte(`{"transaction_id":"TX-SECRET-PHI","registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917","expiry":"2026-09-30","quantity_delta":"500","unit":"EA","event_type":"receive","dea_schedule":"II","occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412"}`)
)

// indented is corrected as a person writes it (indented, with a character
// encoding/json escapes): a JSON value inside the approval would be
// re-encoded, the corrected payload must not.
var indented = []byte("{\n  \"note\": \"<as sent>\",\n  \"v\": 1\n}")

// sealedChain returns a sealed two-record chain: a quarantine and the
// approved record carrying sig.
func sealedChain(tb testing.TB, sig record.Signature) []record.Record {
	tb.Helper()
	at := sig.SignedAt
	first := record.Record{
		SchemaVersion: record.SchemaVersion, DLQID: "pharmacy_0123456789abcdef0123456789abcdef", Kind: record.KindQuarantined,
		Domain: "pharmacy", Class: record.ClassValidation, FirstSeen: at, QuarantinedAt: at,
		Payload: record.NewPayload(original), SourceSubject: "events.pharmacy.dispense", SourceStream: "EVENTS", SourceSeq: 1,
	}
	if err := record.Seal(&first); err != nil {
		tb.Fatal(err)
	}
	next := first
	next.Index, next.Kind, next.Payload, next.PrevHash, next.AuditHash = 1, record.KindApproved, nil, first.AuditHash, ""
	next.Actor, next.Reason, next.Signature = sig.Approver, sig.Meaning, &sig
	if err := record.Seal(&next); err != nil {
		tb.Fatal(err)
	}
	for _, r := range []record.Record{first, next} {
		raw, err := record.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := record.Parse(raw); err != nil {
			tb.Fatalf("record %d does not parse back: %v", r.Index, err)
		}
	}
	return []record.Record{first, next}
}

// logJSON logs v with a JSON handler into w.
func logJSON(w io.Writer, v any) {
	slog.New(slog.NewJSONHandler(w, nil)).Info("request", "req", v)
}
