package rebuild

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestApprovals: approvals as approval.Store writes them (the request
// whole to REQUESTS, its digest to AUDIT, then the entry). A request AUDIT
// recorded whose key was never written (a create a limit refused after
// the request was recorded) is no problem; one delete-marked is missing
// and restored whole from REQUESTS; one whose corrected payload was
// altered is altered ("request") and restored with the payload asked
// for; one whose identity diff was altered is altered ("diff"); one whose
// status was flipped is restored with its request. An approval of a store
// before REQUESTS (AUDIT only) is missing and unrestorable, as before,
// and so is one whose REQUESTS message does not hash to AUDIT's digest.
func TestApprovals(t *testing.T) {
	js := store(t)
	ctx := context.Background()
	as, err := approval.Open(ctx, js, approval.Config{Checker: approval.AuditRegistry{JS: js}})
	if err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Hour)
	as2, err := approval.Open(ctx, js, approval.Config{Checker: approval.AuditRegistry{JS: js}, Now: func() time.Time { return then }})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(dlqID string, payload string) api.Approval {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"dlq_id": dlqID, "reason": "NDC fixed from the invoice, Müller & Söhne <Großhandel>"})
		a, err := as2.Create(ctx, approval.Request{Action: api.ActionCorrect, DLQID: dlqID, Domain: "pharmacy", ChainRecords: 2,
			Body: body, Payload: []byte(payload), Requester: access.Identity{User: "amara.okafor", Role: access.RoleOperator},
			Reason: "NDC fixed from the invoice", Decision: approval.Decision{Reasons: []string{"identity_change"}}}, approval.DefaultPolicy())
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	wiped := ask("pharmacy_00000000000000000000000000000001", `{"pharmacist":"陈伟","ndc":"0409-4888-20"}`)
	payload := ask("pharmacy_00000000000000000000000000000002", `{"pharmacist":"陈伟","ndc":"0409-4888-20","quantity":30}`)
	flipped := ask("pharmacy_00000000000000000000000000000003", `{"lot":"A1&B<2>"}`)
	differ := ask("pharmacy_00000000000000000000000000000004", `{"ndc":"0409-4888-20","note":"\"quoted\" & <tagged>"}`)
	// An approval of an earlier store: its request in AUDIT and its
	// entry, nothing in REQUESTS.
	legacy := flipped
	legacy.ID, legacy.DLQID = "appr-20261207T000000-00000000000000aa", "pharmacy_00000000000000000000000000000005"
	if err := as.Audit(ctx, legacy, approval.AuditRequested); err != nil {
		t.Fatal(err)
	}
	lb, _ := json.Marshal(legacy)
	putRaw(t, js, subjects.ApprovalsBucket, legacy.ID, lb)
	// One whose REQUESTS message is not the request AUDIT recorded (a
	// forger's, written first under an id not created yet).
	forged := legacy
	forged.ID, forged.DLQID = "appr-20261207T000000-00000000000000bb", "pharmacy_00000000000000000000000000000006"
	if err := as.Audit(ctx, forged, approval.AuditRequested); err != nil {
		t.Fatal(err)
	}
	fb, _ := json.Marshal(forged)
	putRaw(t, js, subjects.ApprovalsBucket, forged.ID, fb)
	other := forged
	other.Payload = []byte(`{"quantity":-9999}`)
	ob, _ := json.Marshal(other)
	if err := streams.WriteOnce(ctx, js, streams.RequestsStream, streams.ApprovalRequestSubject(forged.ID), "", ob, nil); err != nil {
		t.Fatal(err)
	}
	// A request whose create a limit refused: AUDIT holds it, the key was
	// never written.
	refused := flipped
	refused.ID = "appr-20261207T000000-00000000000000ff"
	if err := as.Audit(ctx, refused, approval.AuditRequested); err != nil {
		t.Fatal(err)
	}
	r := New(js, Options{})
	if ps, err := r.Compare(ctx, subjects.ApprovalsBucket); err != nil || len(ps) != 0 {
		t.Fatalf("clean APPROVALS (a refused create's request among the actions): %+v %v", ps, err)
	}

	kv, err := js.KeyValue(ctx, subjects.ApprovalsBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{wiped.ID, legacy.ID, forged.ID} {
		if err := kv.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	edit := func(a api.Approval, f func(*api.Approval)) {
		t.Helper()
		e, err := kv.Get(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var cur api.Approval
		if err := json.Unmarshal(e.Value(), &cur); err != nil {
			t.Fatal(err)
		}
		f(&cur)
		b, _ := json.Marshal(cur)
		if _, err := kv.Update(ctx, a.ID, b, e.Revision()); err != nil {
			t.Fatal(err)
		}
	}
	edit(payload, func(a *api.Approval) {
		a.Payload = []byte(`{"pharmacist":"陈伟","ndc":"0409-4888-20","quantity":-9999}`)
	})
	edit(flipped, func(a *api.Approval) {
		at := then.Add(time.Minute)
		a.Status, a.Decider, a.DecidedAt, a.Meaning = api.ApprovalExecuted, "chen.wei", &at, "reviewed"
		a.ExecutedAt, a.Outcome = &at, "replayed"
	})
	edit(differ, func(a *api.Approval) {
		a.Diff = []api.IdentityChange{{Field: "idempotency_key", Before: "pharmacy_0409-4888-20", After: "pharmacy_0409-4888-99 <陈伟>"}}
	})
	ps, err := r.Compare(ctx, subjects.ApprovalsBucket)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{wiped.ID: "missing", payload.ID: "altered:request", flipped.ID: "altered:status", differ.ID: "altered:diff",
		legacy.ID: "missing", forged.ID: "missing"}
	for _, p := range ps {
		got := string(p.Kind)
		if len(p.Fields) > 0 {
			got += ":" + strings.SplitN(p.Fields[0], " ", 2)[0]
		}
		if want[p.Key] != got {
			t.Errorf("%s: %s %v, want %s", p.Key, p.Kind, p.Fields, want[p.Key])
		}
		delete(want, p.Key)
		for _, v := range []string{"陈伟", "9999", "chen.wei", "Müller"} {
			if strings.Contains(p.Detail, v) {
				t.Errorf("%s's detail carries %q: %s", p.Key, v, p.Detail)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("not reported: %v", want)
	}
	rep, err := r.Restore(ctx, subjects.ApprovalsBucket)
	if err != nil || rep.Created != 1 || rep.Updated != 3 || len(rep.Unrestorable) != 2 {
		t.Fatalf("restore: %+v %v", rep, err)
	}
	for _, p := range rep.Unrestorable {
		switch {
		case p.Key == legacy.ID && strings.Contains(p.Detail, "holds none"):
		case p.Key == forged.ID && strings.Contains(p.Detail, "does not hash to AUDIT's digest"):
		default:
			t.Errorf("unrestorable %s: %s", p.Key, p.Detail)
		}
	}
	for _, want := range []api.Approval{wiped, payload, flipped, differ} {
		got, err := as.Get(ctx, want.ID)
		if err != nil || got.Status != api.ApprovalPending || got.Decider != "" || got.ExecutedAt != nil || string(got.Payload) != string(want.Payload) ||
			string(got.Request) != string(want.Request) || !sameDiff(got.Diff, want.Diff) || approval.RequestDigest(got) != approval.RequestDigest(want) {
			t.Errorf("restored %+v %v, want %+v", got, err, want)
		}
	}
	if ps, err := r.Compare(ctx, subjects.ApprovalsBucket); err != nil || len(ps) != 2 {
		t.Errorf("after the restore: %+v %v (the earlier store's approval and the forged source's alone)", ps, err)
	}
}
