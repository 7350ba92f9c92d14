package auditor

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
)

// TestHoldMatchingNothingNeedsConfirm: a party or filter hold that
// matches no stored event is refused HOLD_MATCHES_NOTHING unless the
// request confirms it; one that matches, or names an event, needs no
// confirmation.
func TestHoldMatchingNothingNeedsConfirm(t *testing.T) {
	e := newEnv(t)
	const party = "Pharmacie Saint-Étienne"
	rs := e.chainOf(t, fixture{id: id(1), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC, party: party,
		firstSeen: t0, quarantined: t0})
	e.startAuditor(t, testConfig(), nil)
	for _, tc := range []struct {
		name   string
		target api.HoldTarget
		ok     bool // placed without confirm
	}{
		{"a party with events", api.HoldTarget{PartyID: party}, true},
		{"a misspelt party", api.HoldTarget{PartyID: "Pharmacie Saint-Etienne"}, false},
		{"a party with no event yet", api.HoldTarget{PartyID: "Müller & Söhne <Großhandel>"}, false},
		{"a filter matching nothing", api.HoldTarget{Filter: &api.HoldFilter{Domain: "dscsa"}}, false},
		{"a filter matching", api.HoldTarget{Filter: &api.HoldFilter{Domain: "pharmacy", ErrorCodes: []string{string(pharmacy.InvalidNDC)}}}, true},
		{"an event", api.HoldTarget{DLQID: rs[0].DLQID}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, confirm := range []bool{false, true} {
				b, _ := json.Marshal(api.HoldPlaceRequest{CaseID: "CASE <" + tc.name + ">", Reason: "subpoena", Target: tc.target, Confirm: confirm})
				m, err := e.nc.Request(api.HoldPlace, b, 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				code := m.Header.Get("Nats-Service-Error-Code")
				want := ""
				if !tc.ok && !confirm {
					want = api.ErrHoldMatchesNothing
				}
				if code != want {
					t.Errorf("confirm %v: code %q (%s), want %q", confirm, code, m.Data, want)
				}
				if tc.ok {
					break // placed: not again
				}
			}
		})
	}
}

// TestHoldCountsAndHeldFlag: hold.list answers how many events a hold
// holds and at most api.MaxListedHoldIDs of their ids (hold.get all of
// them); audit.list names the holds each listed event carries, and
// those that hold it whose record is not written yet.
func TestHoldCountsAndHeldFlag(t *testing.T) {
	e := newEnv(t)
	h, err := hold.NewStore(e.js, nil).Place(context.Background(), api.HoldPlaceRequest{CaseID: "CASE-7 <recall>", Reason: "subpoena",
		Target: api.HoldTarget{PartyID: "BW4829137"}}, access.Identity{User: "counsel", Role: access.RoleInspector}, t0)
	if err != nil {
		t.Fatal(err)
	}
	const heldN = api.MaxListedHoldIDs + 5
	var heldIDs []string
	for i := range heldN + 3 {
		f := fixture{id: id(100 + i), domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable, party: "BW4829137",
			firstSeen: t0, quarantined: t0}
		rs := e.chainOf(t, f)
		if i < heldN {
			r := holdRecord(t, rs[0], record.KindHoldPlaced, record.StatusOpen, t0.Add(time.Hour))
			r.Hold.HoldID, r.Hold.CaseID = h.ID, h.CaseID
			r.AuditHash = ""
			if err := record.Seal(&r); err != nil {
				t.Fatal(err)
			}
			e.publish(t, r)
			heldIDs = append(heldIDs, f.id)
		}
	}
	e.startAuditor(t, testConfig(), nil)
	var l api.HoldListReply
	request(t, e.nc, api.HoldList, api.HoldListRequest{}, &l)
	if len(l.Holds) != 1 || l.Holds[0].Count != heldN || len(l.Holds[0].DLQIDs) != api.MaxListedHoldIDs || !l.Holds[0].Truncated {
		t.Fatalf("hold.list: %d holds, count %d, %d ids, truncated %v", len(l.Holds), l.Holds[0].Count, len(l.Holds[0].DLQIDs), l.Holds[0].Truncated)
	}
	var g api.HoldReply
	request(t, e.nc, api.HoldGet, api.HoldGetRequest{ID: h.ID}, &g)
	if g.Count != heldN || !slices.Equal(g.DLQIDs, heldIDs) || g.Truncated {
		t.Errorf("hold.get: count %d, %d ids, truncated %v", g.Count, len(g.DLQIDs), g.Truncated)
	}
	// The party hold holds the party's 3 chains without its record too
	// (no quarantiner appends it here): audit.list names it for them,
	// as the redriver refuses them (hold.Refuse).
	var list api.ListReply
	request(t, e.nc, api.AuditList, api.ListRequest{Limit: 100}, &list)
	held := 0
	for _, it := range list.Items {
		if !slices.Equal(it.HoldIDs, []string{h.ID}) {
			t.Errorf("%s: hold ids %v, want %s (carried: %v)", it.DLQID, it.HoldIDs, h.ID, slices.Contains(heldIDs, it.DLQID))
			continue
		}
		held++
	}
	if held != heldN+3 || len(list.Items) != heldN+3 {
		t.Errorf("%d of %d listed events held, want %d of %d", held, len(list.Items), heldN+3, heldN+3)
	}
}
