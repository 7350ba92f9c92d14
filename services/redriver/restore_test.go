package redriver

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestRestoredAtStart (issue #38 E4, ADR 0024): a pending approval and a
// finished drain whose entries were delete-marked while the redriver was
// down come back, whole, when it starts again: the approval pending with
// its request and corrected payload byte for byte (the digest its signed
// decisions name), the drain completed (its end in REQUESTS) with its
// filter, not failed or cancelled.
func TestRestoredAtStart(t *testing.T) {
	srv, nc, js, cfg := provisioned(t, "redriver-restore-test")
	ctx := context.Background()
	_, stop := startStoppable(t, srv.Connect(t), cfg)
	waitRedriver(t, nc)

	drain := drainCompleted(t, nc, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy", ErrorCodes: []string{"SCHEMA_VALIDATION_ERROR"}, PartyID: "urn:epc:id:sgln:0614141.00001.0"},
		NoGuard: true, Reason: "invoice of Müller & Söhne <Großhandel> \"Nord\" re-keyed"})
	store, err := approval.Open(ctx, js, approval.Config{Checker: approval.AuditRegistry{JS: js}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"dlq_id": "pharmacy_0123456789abcdef0123456789abcdef", "reason": "NDC fixed, 陈伟 & <Müller>"})
	pending, err := store.Create(ctx, approval.Request{Action: api.ActionCorrect, DLQID: "pharmacy_0123456789abcdef0123456789abcdef",
		Domain: "pharmacy", ChainRecords: 2, ChainHead: "3f9a", Body: body,
		Payload:   []byte(`{"ndc":"0409-4888-20","pharmacist":"陈伟","note":"A1&B<2> \"x\""}`),
		Requester: access.Identity{User: "amara.okafor", Role: access.RoleOperator}, Reason: "NDC fixed",
		Decision: approval.Decision{Needed: true, Reasons: []string{"identity_change"}}}, approval.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	stop()

	for _, b := range []struct{ bucket, key string }{{subjects.ApprovalsBucket, pending.ID}, {subjects.DrainsBucket, drain.DrainID}} {
		kv, err := js.KeyValue(ctx, b.bucket)
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Delete(ctx, b.key); err != nil {
			t.Fatal(err)
		}
	}
	if ps, err := rebuild.Compare(ctx, js, subjects.ApprovalsBucket); err != nil || len(ps) != 1 || ps[0].Kind != rebuild.Missing {
		t.Fatalf("APPROVALS while the redriver is down: %+v %v, want the approval missing", ps, err)
	}

	_, stop = startStoppable(t, srv.Connect(t), cfg)
	defer stop()
	waitRedriver(t, nc)
	got, err := store.Get(ctx, pending.ID)
	if err != nil || got.Status != api.ApprovalPending || string(got.Payload) != string(pending.Payload) ||
		string(got.Request) != string(pending.Request) || approval.RequestDigest(got) != approval.RequestDigest(pending) {
		t.Errorf("approval after the restart: %+v %v, want %+v", got, err, pending)
	}
	var back api.DrainState
	callJSON(t, nc, api.DrainStatus, api.DrainIDRequest{DrainID: drain.DrainID}, &back)
	x, _ := json.Marshal(back.Request)
	y, _ := json.Marshal(drain.Request)
	if back.Status != api.DrainCompleted || string(x) != string(y) || back.StartedBy != drain.StartedBy || back.Error != "" {
		t.Errorf("drain after the restart: %s, request %s, started by %q, error %q; want completed, %s, %q", back.Status, x, back.StartedBy,
			back.Error, y, drain.StartedBy)
	}
	for _, bucket := range []string{subjects.ApprovalsBucket, subjects.DrainsBucket} {
		if ps, err := rebuild.Compare(ctx, js, bucket); err != nil || len(ps) != 0 {
			t.Errorf("%s after the restart: %+v %v", bucket, ps, err)
		}
	}
}

// TestForgedDrainNotResumed (ADR 0024): DRAINS entries written by the
// redriver's credential rather than by a drain.start (no start in
// REQUESTS, or another filter than the one started) are never run: a
// running one whose owner's lease ran out is not taken over, a paused
// one is not resumed (CONFLICT); audit.verify's comparison reports the
// second altered (filter). The first it does not report (a drain of an
// earlier store may have no source either: ADR 0024).
func TestForgedDrainNotResumed(t *testing.T) {
	srv, nc, js, cfg := provisioned(t, "redriver-forged-test")
	ctx := context.Background()
	svc, stop := startStoppable(t, srv.Connect(t), cfg)
	defer stop()
	waitRedriver(t, nc)

	// A paused drain started for real, its filter then rewritten.
	id := drainCompleted(t, nc, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy", PartyID: "urn:epc:id:sgln:0614141.00001.0"},
		NoGuard: true, Reason: "Müller & Söhne <Großhandel>"}).DrainID
	kv, err := js.KeyValue(ctx, subjects.DrainsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var rewritten api.DrainState
	if err := json.Unmarshal(e.Value(), &rewritten); err != nil {
		t.Fatal(err)
	}
	rewritten.Status, rewritten.FinishedAt, rewritten.Request.Filter = api.DrainPaused, nil, api.DrainFilter{Domain: "pharmacy"}
	b, _ := json.Marshal(rewritten)
	if _, err := kv.Put(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	// A running drain no one started, its owner long gone.
	old := time.Now().Add(-time.Hour).UTC()
	forged := api.DrainState{DrainID: "drain-20261207T000000-f0f0f0f0", Status: api.DrainRunning, Owner: "gone", Heartbeat: old, StartedAt: old,
		StartedBy: "amara.okafor", Request: api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, NoGuard: true}}
	b, _ = json.Marshal(forged)
	if _, err := kv.Put(ctx, forged.DrainID, b); err != nil {
		t.Fatal(err)
	}

	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	svc.drainRunner.TakeOver(tctx)
	cancel()
	if _, ok := svc.Status(forged.DrainID); ok {
		t.Errorf("the forged drain runs")
	}
	e, err = kv.Get(ctx, forged.DrainID)
	if err != nil {
		t.Fatal(err)
	}
	var after api.DrainState
	if err := json.Unmarshal(e.Value(), &after); err != nil || after.Owner != "gone" || after.Resumed != 0 {
		t.Errorf("the forged drain after a takeover: owner %q, resumed %d (%v); want untouched", after.Owner, after.Resumed, err)
	}
	rep, ae := callErr(t, nc, api.DrainResume, api.DrainResumeRequest{DrainID: id, Reason: "go on"})
	if ae == nil || ae.Code != api.ErrConflict {
		t.Errorf("drain.resume of the rewritten drain: %s %v, want CONFLICT", rep, ae)
	}

	ps, err := rebuild.Compare(ctx, js, subjects.DrainsBucket)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Key] = string(p.Kind)
		if p.Kind == rebuild.Altered {
			got[p.Key] += ":" + p.Fields[0]
		}
	}
	if want := map[string]string{id: "altered:filter"}; !maps.Equal(got, want) {
		t.Errorf("compare: %v (%+v), want %v", got, ps, want)
	}
}

// callErr sends req on subject and returns the reply and its service
// error, if any.
func callErr(tb testing.TB, nc *nats.Conn, subject string, req any) (string, *api.Error) {
	tb.Helper()
	b, _ := json.Marshal(req)
	m, err := nc.Request(subject, b, 30*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	return string(m.Data), endpoint.ErrorOf(m)
}
