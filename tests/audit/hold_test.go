package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// holdEnv is the stack (the real accounts and permissions, every service)
// and connections of its people.
type holdEnv struct {
	stack *stack.Stack
	pub   jetstream.JetStream // the publisher's
	// inspector, operator and viewer are people's connections.
	inspector, operator, viewer *nats.Conn
	admin                       jetstream.JetStream
}

// startHoldEnv starts the stack with streams o until cleanup.
func startHoldEnv(t *testing.T, o streams.Options) *holdEnv {
	t.Helper()
	cfg := stack.DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = t.TempDir(), t.TempDir()
	cfg.Port, cfg.PasswordCost, cfg.SyncAlways, cfg.MetricsAddr = -1, access.MinBcryptCost, false, ""
	cfg.Streams = o
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	s, err := stack.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stack: %v", err)
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("stack exited at start-up: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("stack not ready after 30 s")
	}
	conn := func(user string) *nats.Conn {
		nc, err := s.ConnectAs(user)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	e := &holdEnv{stack: s, inspector: conn(access.DefaultPerson(access.RoleInspector)), operator: conn(access.DefaultPerson(access.RoleOperator)),
		viewer: conn(access.DefaultPerson(access.RoleViewer))}
	if e.pub, err = jetstream.New(conn(string(access.RolePublisher))); err != nil {
		t.Fatal(err)
	}
	if e.admin, err = jetstream.New(conn(access.Admin)); err != nil {
		t.Fatal(err)
	}
	return e
}

// badEvent returns a pharmacy event of party (a DEA number) that fails
// validation (INVALID_NDC) with its own transaction id.
func badEvent(tx, party string) []byte {
	b := bytes.Replace(event(tx), []byte("00406-0512-01"), []byte("0406-512-1"), 1)
	return bytes.Replace(b, []byte("BW4829137"), []byte(party), 1)
}

// quarantine publishes a bad event and returns its dlq id once
// quarantined.
func (e *holdEnv) quarantine(t *testing.T, tx, party string) string {
	t.Helper()
	var before api.ListReply
	request(t, e.inspector, api.AuditList, api.ListRequest{}, &before)
	if _, err := e.pub.Publish(context.Background(), "events.pharmacy.dispense", badEvent(tx, party)); err != nil {
		t.Fatal(err)
	}
	var id string
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		var l api.ListReply
		request(t, e.inspector, api.AuditList, api.ListRequest{}, &l)
		for _, it := range l.Items {
			if !slices.ContainsFunc(before.Items, func(b api.Summary) bool { return b.DLQID == it.DLQID }) {
				id = it.DLQID
				return nil
			}
		}
		var n []uint64
		for _, st := range []string{subjects.EventsStream, subjects.FailuresStream, subjects.QuarantineStream} {
			s, err := e.admin.Stream(context.Background(), st)
			if err != nil {
				return err
			}
			info, _ := s.Info(context.Background())
			n = append(n, info.State.Msgs)
		}
		return fmt.Errorf("not quarantined yet (EVENTS, FAILURES, QUARANTINE: %v; list %d)", n, len(l.Items))
	})
	return id
}

// chainOf returns the chain of id as audit.get answers it.
func chainOf(t *testing.T, nc *nats.Conn, id string) (api.GetReply, []record.Record) {
	t.Helper()
	var g api.GetReply
	request(t, nc, api.AuditGet, api.GetRequest{DLQID: id}, &g)
	var recs []record.Record
	for _, cr := range g.Records {
		var r record.Record
		if err := json.Unmarshal(cr.Record, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return g, recs
}

// call sends req and returns the coded error of the reply (nil: success).
func call(t *testing.T, nc *nats.Conn, subject string, req any, out any) *api.Error {
	t.Helper()
	b, ok := req.([]byte)
	if !ok {
		b, _ = json.Marshal(req)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := endpoint.CallRaw(ctx, nc, subject, b)
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatal(err)
		}
	}
	return nil
}

// TestHoldDynamicParty: a hold on a party holds its events quarantined
// before and after it was placed (its record sealed into each chain, by
// the authenticated inspector), not another party's; hold.list lists
// them; the operator's lift is sealed in turn, and a second lift is
// refused.
func TestHoldDynamicParty(t *testing.T) {
	e := startHoldEnv(t, streams.DefaultOptions())
	const party, other = "BW4829137", "AB1234563"
	before := e.quarantine(t, "TX-H1", party)

	var placed api.HoldReply
	if ae := call(t, e.inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "CASE-2026-17", Reason: "subpoena duces tecum",
		Target: api.HoldTarget{PartyID: party}}, &placed); ae != nil {
		t.Fatalf("hold.place: %v", ae)
	}
	h := placed.Hold
	if h.PlacedBy != access.DefaultPerson(access.RoleInspector) || h.Status != api.HoldActive || !slices.Equal(placed.DLQIDs, []string{before}) {
		t.Fatalf("placed %+v holding %v, want by the inspector holding %s", h, placed.DLQIDs, before)
	}
	after := e.quarantine(t, "TX-H2", party)
	unheld := e.quarantine(t, "TX-H3", other)
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		var g api.HoldReply
		request(t, e.viewer, api.HoldGet, api.HoldGetRequest{ID: h.ID}, &g)
		want := []string{before, after}
		slices.Sort(want)
		if !slices.Equal(g.DLQIDs, want) {
			return fmt.Errorf("hold holds %v (pending %v), want %v", g.DLQIDs, g.Pending, want)
		}
		return nil
	})
	g, recs := chainOf(t, e.viewer, after)
	last := recs[len(recs)-1]
	if last.Kind != record.KindHoldPlaced || last.Hold == nil || last.Hold.HoldID != h.ID || last.Hold.CaseID != h.CaseID ||
		last.Actor != access.DefaultPerson(access.RoleInspector) || last.Reason != h.Reason || !last.Hold.At.Equal(h.PlacedAt) {
		t.Errorf("last record of the later chain: %+v hold %+v", last, last.Hold)
	}
	if !g.State.Held() || g.State.Status != record.StatusOpen {
		t.Errorf("state: held %v status %s", g.State.Held(), g.State.Status)
	}
	if g, _ := chainOf(t, e.viewer, unheld); g.State.Held() {
		t.Errorf("another party's event is held: %+v", g.State.Holds)
	}
	var list api.HoldListReply
	request(t, e.viewer, api.HoldList, api.HoldListRequest{}, &list)
	if len(list.Holds) != 1 || list.Holds[0].Hold.ID != h.ID || len(list.Holds[0].DLQIDs) != 2 {
		t.Errorf("hold.list = %+v", list)
	}

	// The default policy makes a lift wait for a second person (see
	// tests/approval); here the operator may lift alone.
	pnc, err := e.stack.ConnectAs(access.DefaultPerson(access.RolePolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pnc.Close)
	p := approval.DefaultPolicy()
	p.HoldLift = false
	var set api.PolicyReply
	request(t, pnc, api.PolicySet, api.PolicySetRequest{Policy: p, Reason: "counsel lifts holds alone"}, &set)
	// The operator signs the lift with a key of her own (issue #38).
	op := approvaltest.Register(t, e.admin, access.DefaultPerson(access.RoleOperator), access.RoleOperator)
	var lifted api.HoldReply
	if ae := call(t, e.operator, api.HoldLift, op.SignLift(t, e.admin, api.HoldLiftRequest{ID: h.ID, CaseID: h.CaseID, Reason: "case closed"}, access.RoleOperator, time.Now()), &lifted); ae != nil {
		t.Fatalf("hold.lift: %v", ae)
	}
	if lifted.Hold.LiftedBy != access.DefaultPerson(access.RoleOperator) || len(lifted.DLQIDs) != 2 || len(lifted.Failed) != 0 {
		t.Errorf("lifted %+v, lifted from %v (failed %v)", lifted.Hold, lifted.DLQIDs, lifted.Failed)
	}
	g, recs = chainOf(t, e.viewer, before)
	if last := recs[len(recs)-1]; g.State.Held() || last.Kind != record.KindHoldLifted || last.Actor != access.DefaultPerson(access.RoleOperator) || last.Reason != "case closed" {
		t.Errorf("after the lift: held %v, last record %s by %s (%s)", g.State.Held(), last.Kind, last.Actor, last.Reason)
	}
	if ae := call(t, e.operator, api.HoldLift, api.HoldLiftRequest{ID: h.ID, CaseID: h.CaseID, Reason: "again"}, nil); ae == nil || ae.Code != api.ErrNotPlaced {
		t.Errorf("second lift: %v, want %s", ae, api.ErrNotPlaced)
	}
	// AUDIT holds both actions, by the people who did them.
	var actions []api.AuditAction
	err = streams.ReadSubject(context.Background(), e.admin, subjects.AuditStream, subjects.AuditAction("hold", h.ID), func(m *jetstream.RawStreamMsg) error {
		var a api.AuditAction
		if err := json.Unmarshal(m.Data, &a); err != nil {
			return err
		}
		actions = append(actions, a)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 2 || actions[0].Action != "placed" || actions[0].Actor != access.DefaultPerson(access.RoleInspector) || actions[1].Action != "lifted" || actions[1].Actor != access.DefaultPerson(access.RoleOperator) {
		t.Errorf("AUDIT actions of the hold: %+v", actions)
	}
}

// TestHoldBadRequests: malformed places and lifts get coded errors, and a
// role that may not place holds cannot reach the endpoint.
func TestHoldBadRequests(t *testing.T) {
	e := startHoldEnv(t, streams.DefaultOptions())
	id := e.quarantine(t, "TX-B1", "BW4829137")
	var placed api.HoldReply
	if ae := call(t, e.inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "C-1", Reason: "r", Target: api.HoldTarget{DLQID: id}}, &placed); ae != nil {
		t.Fatal(ae)
	}
	target := fmt.Sprintf(`{"dlq_id":%q}`, id)
	tests := []struct {
		name    string
		subject string
		body    string
		want    string
	}{
		{"unknown member", api.HoldPlace, `{"case_id":"C","reason":"r","target":` + target + `,"placed_by":"mallory"}`, api.ErrBadRequest},
		{"no case id", api.HoldPlace, `{"reason":"r","target":` + target + `}`, api.ErrBadRequest},
		{"no reason", api.HoldPlace, `{"case_id":"C","target":` + target + `}`, api.ErrBadRequest},
		{"blank reason", api.HoldPlace, `{"case_id":"C","reason":"  ","target":` + target + `}`, api.ErrBadRequest},
		{"no target", api.HoldPlace, `{"case_id":"C","reason":"r"}`, api.ErrBadRequest},
		{"two targets", api.HoldPlace, `{"case_id":"C","reason":"r","target":{"dlq_id":"` + id + `","party_id":"BW4829137"}}`, api.ErrBadRequest},
		{"empty filter", api.HoldPlace, `{"case_id":"C","reason":"r","target":{"filter":{}}}`, api.ErrBadRequest},
		{"unknown domain", api.HoldPlace, `{"case_id":"C","reason":"r","target":{"filter":{"domain":"nowhere"}}}`, api.ErrBadRequest},
		{"unknown event", api.HoldPlace, `{"case_id":"C","reason":"r","target":{"dlq_id":"pharmacy_00000000000000000000000000000000"}}`, api.ErrNotFound},
		{"lift of an unknown hold", api.HoldLift, `{"id":"hold-20260101T000000-0000000000000000","case_id":"C","reason":"r"}`, api.ErrNotFound},
		{"lift without reason", api.HoldLift, `{"id":"` + placed.Hold.ID + `","case_id":"C-1"}`, api.ErrBadRequest},
		{"lift for another case", api.HoldLift, `{"id":"` + placed.Hold.ID + `","case_id":"C-2","reason":"r"}`, api.ErrNotPlaced},
		{"lift with an unknown member", api.HoldLift, `{"id":"` + placed.Hold.ID + `","case_id":"C-1","reason":"r","lifted_by":"mallory"}`, api.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ae := call(t, e.operator, tt.subject, []byte(tt.body), nil)
			if ae == nil || ae.Code != tt.want {
				t.Errorf("error = %v, want %s", ae, tt.want)
			}
		})
	}
	// A viewer may list holds but not place or lift one (no import).
	if _, err := e.viewer.Request(api.HoldPlace, []byte(`{"case_id":"C","reason":"r","target":`+target+`}`), 2*time.Second); err == nil {
		t.Error("a viewer reached hold.place")
	}
	if g, _ := chainOf(t, e.viewer, id); len(g.State.Holds) != 1 {
		t.Errorf("the refused requests changed the holds: %+v", g.State.Holds)
	}
}

// TestLegalHoldOutlivesMaxAge: with a QUARANTINE MaxAge of seconds, a
// held chain is copied to LEGALHOLD before its originals expire; once
// they have, verify finds it whole there and audit.get still answers from
// it, while an unheld chain is gone. An auditor configured with the
// registry's retentions refuses that QUARANTINE.
func TestLegalHoldOutlivesMaxAge(t *testing.T) {
	o := streams.DefaultOptions()
	o.QuarantineMaxAge, o.DuplicateWindow = 3*time.Second, time.Second
	o.Retention = map[string]time.Duration{}
	for _, d := range registry.Names() {
		o.Retention[d] = 2 * time.Second
	}
	e := startHoldEnv(t, o)
	held := e.quarantine(t, "TX-L1", "BW4829137")
	unheld := e.quarantine(t, "TX-L2", "BW4829137")
	var placed api.HoldReply
	if ae := call(t, e.inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "CASE-9", Reason: "litigation hold",
		Target: api.HoldTarget{DLQID: held}}, &placed); ae != nil {
		t.Fatal(ae)
	}
	ctx := context.Background()
	quarantine, err := e.admin.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		info, err := quarantine.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs > 0 {
			return fmt.Errorf("QUARANTINE still holds %d records", info.State.Msgs)
		}
		return nil
	})
	var v api.VerifyReply
	request(t, e.inspector, api.AuditVerify, api.VerifyRequest{}, &v)
	if !v.OK || v.LegalHold == nil || v.LegalHold.Chains != 1 || v.LegalHold.Records != 2 || v.LegalHold.Expired != 1 {
		t.Fatalf("verify: ok %v problems %+v legal hold %+v", v.OK, v.Problems, v.LegalHold)
	}
	g, recs := chainOf(t, e.viewer, held)
	if len(recs) != 2 || g.Records[0].Stream != subjects.LegalHoldStream || len(g.Problems) != 0 || !g.State.HeldBy(placed.Hold.ID) {
		t.Errorf("audit.get of the expired held chain: %d records (%+v), problems %+v, holds %+v", len(recs), g.Records, g.Problems, g.State.Holds)
	}
	if ae := call(t, e.viewer, api.AuditGet, api.GetRequest{DLQID: unheld}, nil); ae == nil || ae.Code != api.ErrNotFound {
		t.Errorf("audit.get of the expired unheld chain: %v, want NOT_FOUND", ae)
	}

	// The registry's retentions (DSCSA 6 y) refuse a QUARANTINE MaxAge of
	// seconds: the auditor does not start.
	anc, err := e.stack.ConnectAs(access.Auditor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(anc.Close)
	a, err := auditor.New(anc, auditor.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = a.Run(runCtx)
	if !errors.Is(err, streams.ErrRetention) || !strings.Contains(err.Error(), "3s") || !strings.Contains(err.Error(), "dscsa") {
		t.Errorf("auditor start with the registry's retentions: %v, want %v naming both", err, streams.ErrRetention)
	}
}
