package redriver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/redriver/replay"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
)

// TestActiveHoldRefuses: a party hold stored in HOLDS whose records no
// chain carries yet (the auditor has not appended them: a dynamic hold
// placed a moment ago) already holds its events: the selection never
// selects them and they hold the later events of their key, also when
// the drain ignores order and names only the later event; a redrive and a
// release of one answer HELD.
func TestActiveHoldRefuses(t *testing.T) {
	e := newTestEnv(t)
	ex, du := record.ClassExhausted, codes.DownstreamUnavailable
	held := e.write(t, spec{n: 1, domain: "dscsa", class: ex, code: du, party: "P-HELD", okey: "K", at: "2024-02-01T00:00:00Z"})
	after := e.write(t, spec{n: 2, domain: "dscsa", class: ex, code: du, party: "P-FREE", okey: "K", at: "2024-02-02T00:00:00Z"})
	free := e.write(t, spec{n: 3, domain: "dscsa", class: ex, code: du, party: "P-FREE", okey: "K2", at: "2024-02-01T00:00:00Z"})
	poison := e.write(t, spec{n: 4, domain: "dscsa", class: ex, code: du, party: "P-HELD", okey: "K3", kinds: []record.Kind{record.KindPoisoned}})
	h, err := hold.NewStore(e.js, nil).Place(context.Background(), api.HoldPlaceRequest{CaseID: "C-1", Reason: "subpoena",
		Target: api.HoldTarget{PartyID: "P-HELD"}}, access.Identity{User: "counsel", Role: access.RoleInspector}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The blocker names its party: the event it holds is another party's.
	legal := api.Blocker{DLQID: held, Reason: api.ReasonLegalHold, HoldID: h.ID, CaseID: "C-1", PartyID: "P-HELD"}

	for _, tc := range []struct {
		name        string
		f           api.DrainFilter
		ignoreOrder bool
		selected    []string // replayable, in lane order
		heldBy      int      // selected events held behind the held one
		heldByHold  int
	}{
		{"domain", api.DrainFilter{Domain: "dscsa"}, false, []string{after, free}, 1, 1},
		{"domain, ignore order", api.DrainFilter{Domain: "dscsa"}, true, []string{after, free}, 1, 1},
		{"later one named, ignore order", api.DrainFilter{DLQIDs: []string{after}}, true, []string{after}, 1, 0},
		{"held one named", api.DrainFilter{DLQIDs: []string{held}}, true, nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(api.DrainStartRequest{Filter: tc.f, IgnoreOrder: tc.ignoreOrder, DryRun: true, Reason: "plan"})
			data, code := e.request(t, api.DrainStart, string(body))
			var rep api.DrainStartReply
			if err := json.Unmarshal(data, &rep); err != nil || code != "" || rep.Plan == nil {
				t.Fatalf("dry run: %s %s %v", code, data, err)
			}
			p := rep.Plan
			if p.HeldByHold != tc.heldByHold || p.HeldByEarlier != tc.heldBy {
				t.Errorf("held by hold %d, held by earlier %d; want %d, %d", p.HeldByHold, p.HeldByEarlier, tc.heldByHold, tc.heldBy)
			}
			if tc.heldBy > 0 && (len(p.HeldBy) != 1 || p.HeldBy[0].DLQID != legal.DLQID || p.HeldBy[0].HoldID != h.ID || p.HeldBy[0].CaseID != "C-1") {
				t.Errorf("held by %+v, want %+v", p.HeldBy, legal)
			}
			if tc.heldByHold > 0 && (len(p.UnderHold) != 1 || p.UnderHold[0] != legal) {
				t.Errorf("under hold %+v, want %+v", p.UnderHold, legal)
			}
			if p.Selected != len(tc.selected)+tc.heldByHold {
				t.Errorf("selected %d, want %d", p.Selected, len(tc.selected)+tc.heldByHold)
			}
		})
	}

	for _, c := range []struct{ subject, body string }{
		{api.Redrive, `{"dlq_id":"` + held + `","reason":"try"}`},
		{api.Release, `{"dlq_id":"` + poison + `","reason":"try"}`},
	} {
		data, code := e.request(t, c.subject, c.body)
		if code != api.ErrHeld {
			t.Errorf("%s of a held event: %s %s, want %s", c.subject, code, data, api.ErrHeld)
		}
	}
}

// BenchmarkActiveHolds measures the read a drain makes at its selection
// and at most once per holdsRefresh (one multi-last direct get on HOLDS),
// with 100 active holds.
func BenchmarkActiveHolds(b *testing.B) {
	e := newTestEnv(b)
	st := hold.NewStore(e.js, nil)
	for i := range 100 {
		if _, err := st.Place(context.Background(), api.HoldPlaceRequest{CaseID: "C", Reason: "r",
			Target: api.HoldTarget{PartyID: "P" + string(rune('A'+i%26))}}, access.Identity{User: "counsel", Role: access.RoleInspector}, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if hs, err := st.Active(context.Background()); err != nil || len(hs) != 100 {
			b.Fatal(len(hs), err)
		}
	}
}

// TestReplayChecksHoldsAtItsTurn: a drain's replay checks the chain
// against the holds its Opts.Holds returns at the event's turn (a hold
// placed after the selection), and names the hold and its case (a drain
// counts it held by the hold: drains.TestCount): nothing is appended to
// the chain.
func TestReplayChecksHoldsAtItsTurn(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Provision, cfg.AllowAnonymous = false, true
	s := runRedriver(t, srv.Connect(t), cfg) // the only redriver: it answers once started
	waitRedriver(t, nc)
	e := &testEnv{srv: srv, js: js, nc: nc}
	id := e.write(t, spec{n: 1, domain: "dscsa", class: record.ClassExhausted, code: codes.DownstreamUnavailable, party: "P", okey: "K"})
	h := api.Hold{ID: "hold-late", CaseID: "C-9", Status: api.HoldActive, Target: api.HoldTarget{PartyID: "P"}}
	for _, tc := range []struct {
		name  string
		holds []api.Hold
		held  bool
	}{
		{"a hold placed after the selection", []api.Hold{h}, true},
		{"another party's hold", []api.Hold{{ID: "hold-other", CaseID: "C", Status: api.HoldActive, Target: api.HoldTarget{PartyID: "Q"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := s.replayer.Replay(context.Background(), "dscsa", id, replay.Opts{DrainID: "drain-x",
				Holds: func(context.Context) ([]api.Hold, error) { return tc.holds, nil }, Wait: 10 * time.Millisecond})
			if got := res.Code == api.ErrHeld; got != tc.held {
				t.Fatalf("held %v (%s %v), want %v", got, res.Code, res.Err, tc.held)
			}
			if tc.held && (res.HoldID != h.ID || res.CaseID != "C-9") {
				t.Errorf("held by %s/%s", res.HoldID, res.CaseID)
			}
		})
	}
}
