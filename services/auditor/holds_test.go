package auditor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// holdRecord builds the sealed hold record of kind that follows prev,
// keeping status.
func holdRecord(tb testing.TB, prev record.Record, kind record.Kind, status record.Status, at time.Time) record.Record {
	tb.Helper()
	r := prev
	r.Index, r.Kind, r.PrevHash, r.QuarantinedAt, r.Payload, r.Headers, r.Attempts = prev.Index+1, kind, prev.AuditHash, at, nil, nil, nil
	r.AuditHash, r.Actor, r.Reason = "", "inspector", "subpoena"
	r.Hold = &record.HoldMark{HoldID: "hold-1", CaseID: "C-1", At: at, Status: status}
	if err := record.Seal(&r); err != nil {
		tb.Fatal(err)
	}
	return r
}

// TestHoldRecordsKeepTheStatus: a hold placed on a resolved chain leaves
// it resolved in the live view (not counted again as an open event), one
// placed on an open chain leaves it open; both chains are listed as held
// until the lift.
func TestHoldRecordsKeepTheStatus(t *testing.T) {
	e := newEnv(t)
	f := fixture{id: id(1), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC, party: "BW4829137",
		firstSeen: t0, quarantined: t0}
	resolved := e.chainOf(t, f, record.KindResolved)
	f.id = id(2)
	open := e.chainOf(t, f)
	e.publish(t, holdRecord(t, resolved[1], record.KindHoldPlaced, record.StatusResolved, t0.Add(time.Hour)))
	placed := holdRecord(t, open[0], record.KindHoldPlaced, record.StatusOpen, t0.Add(time.Hour))
	e.publish(t, placed)
	a := e.startAuditor(t, testConfig(), nil)

	var l api.ListReply
	request(t, e.nc, api.AuditList, api.ListRequest{Status: string(record.StatusOpen)}, &l)
	if l.Total != 1 || l.Items[0].DLQID != open[0].DLQID {
		t.Errorf("open events: %+v, want only the open one", l.Items)
	}
	if _, ok := a.index.entryOf(resolved[0].DLQID); ok {
		t.Error("the resolved chain's hold record put it back among the unresolved")
	}
	request(t, e.nc, api.AuditList, api.ListRequest{}, &l)
	for _, it := range l.Items {
		if it.DLQID == resolved[0].DLQID && it.Status != string(record.StatusResolved) {
			t.Errorf("the held resolved chain lists as %s", it.Status)
		}
	}
	var g api.GroupsReply
	request(t, e.nc, api.AuditGroups, api.GroupsRequest{}, &g)
	total := 0
	for _, gr := range g.Groups {
		total += gr.Total
	}
	if total != 2 {
		t.Errorf("the groups count %d events, want 2 (a hold's record counted a chain again)", total)
	}
	held := a.index.heldChains("hold-1")
	if len(held) != 2 {
		t.Fatalf("held chains %+v, want both", held)
	}
	e.publish(t, holdRecord(t, placed, record.KindHoldLifted, record.StatusOpen, t0.Add(2*time.Hour)))
	e.waitApplied(t, a)
	if held := a.index.heldChains("hold-1"); len(held) != 1 || held[0].dlqID != resolved[0].DLQID {
		t.Errorf("held chains after the lift of one: %+v", held)
	}
}

// TestVerifyLegalHold: with a QUARANTINE max age, the auditor copies a
// held chain to LEGALHOLD (completing a copy begun elsewhere), and verify
// reports a copy whose bytes differ from the original (its seal fails and
// it is not the original).
func TestVerifyLegalHold(t *testing.T) {
	srv := natstest.Start(t)
	o := streams.DefaultOptions()
	o.QuarantineMaxAge = time.Hour
	o.Retention = map[string]time.Duration{}
	for _, d := range registry.Names() {
		o.Retention[d] = time.Minute
	}
	srv.Provision(t, o)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, js: js, nc: nc}
	f := fixture{id: id(1), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC, party: "BW4829137",
		firstSeen: t0, quarantined: t0}
	rs := e.chainOf(t, f)
	e.publish(t, holdRecord(t, rs[0], record.KindHoldPlaced, record.StatusOpen, t0.Add(time.Hour)))
	// A forged copy of record 0 (another detail, so another seal), with
	// the provenance headers.
	forged := rs[0]
	forged.ErrorDetail = "rewritten"
	raw, err := json.Marshal(forged) // the stale seal: record.Marshal would refuse it
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subjects.LegalHold("pharmacy", rs[0].DLQID))
	m.Data = raw
	m.Header.Set(HeaderSourceStream, subjects.QuarantineStream)
	m.Header.Set(HeaderSourceSeq, "1")
	m.Header.Set(HeaderSourceSubject, subjects.Quarantine("pharmacy", rs[0].DLQID))
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Retention = o.Retention
	e.startAuditor(t, cfg, nil)
	lh, err := js.Stream(context.Background(), subjects.LegalHoldStream)
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		info, err := lh.Info(context.Background())
		if err != nil || info.State.Msgs != 2 {
			return fmt.Errorf("LEGALHOLD holds %v copies (%v), want 2", info.State.Msgs, err)
		}
		return nil
	})
	var v api.VerifyReply
	request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &v)
	kinds := map[string]int{}
	for _, p := range v.Problems {
		kinds[p.Kind]++
	}
	if v.OK || v.LegalHold == nil || v.LegalHold.Chains != 1 || v.LegalHold.Records != 2 || kinds[api.ProblemLegalHoldCopy] < 2 || len(kinds) != 1 {
		t.Errorf("verify: ok %v legal hold %+v problems %+v", v.OK, v.LegalHold, v.Problems)
	}
}

// TestHoldNeedsAnAuthenticatedCaller: without AllowAnonymous, a place or
// lift that carries no caller the server attached is refused, and no hold
// is stored.
func TestHoldNeedsAnAuthenticatedCaller(t *testing.T) {
	e := newEnv(t)
	rs := e.chainOf(t, fixture{id: id(1), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC, firstSeen: t0, quarantined: t0})
	cfg := testConfig()
	cfg.AllowAnonymous = false
	e.startAuditor(t, cfg, nil)
	for _, tt := range []struct {
		subject string
		body    any
	}{
		{api.HoldPlace, api.HoldPlaceRequest{CaseID: "C", Reason: "r", Target: api.HoldTarget{DLQID: rs[0].DLQID}}},
		{api.HoldLift, api.HoldLiftRequest{ID: "hold-1", CaseID: "C", Reason: "r"}},
	} {
		b, _ := json.Marshal(tt.body)
		m, err := e.nc.Request(tt.subject, b, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != api.ErrUnauthenticated {
			t.Errorf("%s without a caller: code %q, want %s", tt.subject, code, api.ErrUnauthenticated)
		}
	}
	var l api.HoldListReply
	request(t, e.nc, api.HoldList, api.HoldListRequest{IncludeLifted: true}, &l)
	if len(l.Holds) != 0 {
		t.Errorf("holds stored: %+v", l.Holds)
	}
}
