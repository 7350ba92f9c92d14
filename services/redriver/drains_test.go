package redriver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
)

// startJSON asks drain.start with req and returns the reply or the coded
// error.
func (e *testEnv) startJSON(tb testing.TB, req api.DrainStartRequest) (api.DrainStartReply, *api.Error) {
	tb.Helper()
	body, _ := json.Marshal(req)
	data, code := e.request(tb, api.DrainStart, string(body))
	if code != "" {
		var ae api.Error
		if err := json.Unmarshal(data, &ae); err != nil {
			tb.Fatalf("error reply %s: %v", data, err)
		}
		return api.DrainStartReply{}, &ae
	}
	var rep api.DrainStartReply
	if err := json.Unmarshal(data, &rep); err != nil {
		tb.Fatal(err)
	}
	return rep, nil
}

// statusJSON returns a drain's status.
func (e *testEnv) statusJSON(tb testing.TB, id string) api.DrainState {
	tb.Helper()
	data, code := e.request(tb, api.DrainStatus, `{"drain_id":"`+id+`"}`)
	var st api.DrainState
	if err := json.Unmarshal(data, &st); code != "" || err != nil {
		tb.Fatalf("drain.status: %s %s %v", code, data, err)
	}
	return st
}

// waitStatus polls a drain until its status is one of want.
func (e *testEnv) waitStatus(tb testing.TB, id string, want ...string) api.DrainState {
	tb.Helper()
	var st api.DrainState
	natstest.CheckFor(tb, 30*time.Second, 20*time.Millisecond, func() error {
		st = e.statusJSON(tb, id)
		for _, w := range want {
			if st.Status == w {
				return nil
			}
		}
		return fmt.Errorf("drain %s is %s, want %v", id, st.Status, want)
	})
	return st
}

// cancelDrain cancels a drain and waits until it is stored cancelled (or
// completed: a drain of nothing may finish before the cancel).
func (e *testEnv) cancelDrain(tb testing.TB, id string) {
	tb.Helper()
	e.request(tb, api.DrainCancel, `{"drain_id":"`+id+`"}`)
	e.waitStatus(tb, id, api.DrainCancelled, api.DrainCompleted)
}

// TestOverlappingDrainRefused: a drain that would select records a
// running drain selects is refused with DRAIN_OVERLAP naming that drain
// and the overlap count, and its dry run's plan lists the overlap; a
// drain on other records starts; once the running drain is cancelled the
// refused one starts.
func TestOverlappingDrainRefused(t *testing.T) {
	e := newTestEnvWith(t, func(cfg *Config) {
		cfg.AllowAnonymous = true
		cfg.RedriveWait = 200 * time.Millisecond
	})
	ex, du := record.ClassExhausted, codes.DownstreamUnavailable
	for i := range 3 {
		e.write(t, spec{n: i, domain: "pharmacy", class: ex, code: du, party: "Müller & Söhne <Großhandel>", okey: fmt.Sprint("A", i)})
	}
	for i := range 2 {
		e.write(t, spec{n: 10 + i, domain: "pharmacy", class: ex, code: du, party: "Pharmacie Saint-Étienne", okey: fmt.Sprint("B", i)})
	}
	e.write(t, spec{n: 20, domain: "dscsa", class: ex, code: du, party: "Müller & Söhne <Großhandel>", okey: "D"})
	partyA := api.DrainFilter{PartyID: "Müller & Söhne <Großhandel>"}
	// A slow drain (no validator here: its replays stay pending): it runs
	// for as long as the test needs.
	slow := 0.001
	first, ae := e.startJSON(t, api.DrainStartRequest{Filter: partyA, RatePerSecond: &slow, NoGuard: true, Reason: "downstream back"})
	if ae != nil {
		t.Fatalf("first drain: %+v", ae)
	}
	e.waitStatus(t, first.DrainID, api.DrainRunning)

	for _, tc := range []struct {
		name    string
		f       api.DrainFilter
		overlap int // records shared with the first drain; 0: it starts
	}{
		{"the same filter", partyA, 4},
		{"the pharmacy domain", api.DrainFilter{Domain: "pharmacy"}, 3},
		{"one shared record named", api.DrainFilter{DLQIDs: []string{domainKey("dscsa", 20)}}, 1},
		{"another party", api.DrainFilter{PartyID: "Pharmacie Saint-Étienne"}, 0},
		{"a party matching nothing", api.DrainFilter{PartyID: "nobody <none>"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dry, ae := e.startJSON(t, api.DrainStartRequest{Filter: tc.f, DryRun: true})
			if ae != nil {
				t.Fatalf("dry run: %+v", ae)
			}
			if tc.overlap == 0 && len(dry.Plan.Overlaps) != 0 {
				t.Errorf("plan overlaps %+v, want none", dry.Plan.Overlaps)
			}
			if tc.overlap > 0 && (len(dry.Plan.Overlaps) != 1 || dry.Plan.Overlaps[0].DrainID != first.DrainID ||
				dry.Plan.Overlaps[0].Records != tc.overlap || dry.Plan.Overlaps[0].Status != api.DrainRunning) {
				t.Errorf("plan overlaps %+v, want %d records of %s", dry.Plan.Overlaps, tc.overlap, first.DrainID)
			}
			rep, ae := e.startJSON(t, api.DrainStartRequest{Filter: tc.f, NoGuard: true, Reason: "second"})
			if tc.overlap == 0 {
				if ae != nil {
					t.Fatalf("refused: %+v", ae)
				}
				e.cancelDrain(t, rep.DrainID)
				return
			}
			if ae == nil {
				e.cancelDrain(t, rep.DrainID)
				t.Fatalf("started %s, want %s", rep.DrainID, api.ErrDrainOverlap)
			}
			if ae.Code != api.ErrDrainOverlap || !strings.Contains(ae.Message, first.DrainID) ||
				!strings.Contains(ae.Message, fmt.Sprintf("selects %d of them", tc.overlap)) || len(ae.Overlaps) != 1 || ae.Overlaps[0].Records != tc.overlap {
				t.Errorf("refusal %+v, want %s naming %s and %d records", ae, api.ErrDrainOverlap, first.DrainID, tc.overlap)
			}
		})
	}
	e.cancelDrain(t, first.DrainID)
	again, ae := e.startJSON(t, api.DrainStartRequest{Filter: partyA, NoGuard: true, RatePerSecond: &slow, Reason: "again"})
	if ae != nil {
		t.Fatalf("after the cancel: %+v", ae)
	}
	e.cancelDrain(t, again.DrainID)
}

// domainKey is the dlq id spec{n: n, domain: dom} is written under.
func domainKey(dom string, n int) string {
	return domain.Key(dom, "test", strconv.Itoa(n))
}

// TestPlanShowsGuard: a request naming no guard control gets the default
// guard (canary and max failure rate), which the plan shows and the
// stored drain carries; one naming its own keeps it; no_guard turns it
// off, and no_guard with a guard control is refused.
func TestPlanShowsGuard(t *testing.T) {
	e := newTestEnv(t)
	for i := range 3 {
		e.write(t, spec{n: i, domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable, okey: fmt.Sprint("K", i)})
	}
	rate := 0.25
	for _, tc := range []struct {
		name   string
		req    api.DrainStartRequest
		want   api.DrainGuard
		picks  int
		refuse string
	}{
		{"no guard control: the default", api.DrainStartRequest{},
			api.DrainGuard{Default: true, Canary: api.DefaultCanary, MaxFailureRate: api.DefaultMaxFailureRate, PauseWindow: api.DefaultPauseWindow}, 3, ""},
		{"its own canary", api.DrainStartRequest{Canary: 2},
			api.DrainGuard{Canary: 2, MaxFailureRate: api.DefaultMaxFailureRate, PauseWindow: api.DefaultPauseWindow}, 2, ""},
		{"its own rate, no canary", api.DrainStartRequest{MaxFailureRate: &rate, PauseWindow: 50},
			api.DrainGuard{MaxFailureRate: 0.25, PauseWindow: 50}, 0, ""},
		{"turned off", api.DrainStartRequest{NoGuard: true}, api.DrainGuard{Off: true}, 0, ""},
		{"turned off with a canary", api.DrainStartRequest{NoGuard: true, Canary: 3}, api.DrainGuard{}, 0, api.ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.DryRun, req.Filter = true, api.DrainFilter{Domain: "fsma"}
			rep, ae := e.startJSON(t, req)
			if tc.refuse != "" {
				if ae == nil || ae.Code != tc.refuse {
					t.Fatalf("answer %+v %+v, want %s", rep, ae, tc.refuse)
				}
				return
			}
			if ae != nil {
				t.Fatal(ae)
			}
			if rep.Plan.Guard == nil || *rep.Plan.Guard != tc.want || len(rep.Plan.Canary) != tc.picks {
				t.Errorf("guard %+v with %d canary picks, want %+v with %d", rep.Plan.Guard, len(rep.Plan.Canary), tc.want, tc.picks)
			}
		})
	}
	// The stored drain carries the default guard explicitly.
	rep, ae := e.startJSON(t, api.DrainStartRequest{Filter: api.DrainFilter{PartyID: "nobody"}, Reason: "guard"})
	if ae != nil {
		t.Fatal(ae)
	}
	st := e.waitStatus(t, rep.DrainID, api.DrainCompleted)
	if on, maxRate, _ := st.Request.Guarded(); !on || st.Request.Canary != api.DefaultCanary || maxRate != api.DefaultMaxFailureRate {
		t.Errorf("stored request %+v: guard %v", st.Request, on)
	}
}

// TestDrainOutcomeSaysWhy: a completed drain that committed nothing says
// so and why (nothing selected, held by a legal hold), in drain.status
// and drain.list.
func TestDrainOutcomeSaysWhy(t *testing.T) {
	e := newTestEnv(t)
	ex, du := record.ClassExhausted, codes.DownstreamUnavailable
	for i := range 2 {
		e.write(t, spec{n: i, domain: "dscsa", class: ex, code: du, party: "Pharmacie Saint-Étienne", okey: fmt.Sprint("H", i)})
	}
	h, err := hold.NewStore(e.js, nil).Place(context.Background(), api.HoldPlaceRequest{CaseID: "CASE-7 <recall>", Reason: "subpoena",
		Target: api.HoldTarget{PartyID: "Pharmacie Saint-Étienne"}}, access.Identity{User: "counsel", Role: access.RoleInspector}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		f       api.DrainFilter
		reason  string
		holds   []api.HoldCount
		heldHow int
	}{
		{"nothing selected", api.DrainFilter{PartyID: "nobody"}, "nothing selected", nil, 0},
		{"every event under a legal hold", api.DrainFilter{Domain: "dscsa"}, "2 held by a legal hold",
			[]api.HoldCount{{HoldID: h.ID, CaseID: "CASE-7 <recall>", Records: 2}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dry, ae := e.startJSON(t, api.DrainStartRequest{Filter: tc.f, DryRun: true})
			if ae != nil {
				t.Fatal(ae)
			}
			if fmt.Sprint(dry.Plan.Holds) != fmt.Sprint(tc.holds) {
				t.Errorf("plan holds %+v, want %+v", dry.Plan.Holds, tc.holds)
			}
			rep, ae := e.startJSON(t, api.DrainStartRequest{Filter: tc.f, Reason: "outcome"})
			if ae != nil {
				t.Fatal(ae)
			}
			st := e.waitStatus(t, rep.DrainID, api.DrainCompleted)
			if st.Outcome != api.DrainOutcomeNothingCommitted || st.OutcomeReason != tc.reason || st.HeldByHold != tc.heldHow ||
				fmt.Sprint(st.Holds) != fmt.Sprint(tc.holds) {
				t.Errorf("outcome %q (%q), held by hold %d, holds %+v; want %q (%q), %d, %+v", st.Outcome, st.OutcomeReason, st.HeldByHold, st.Holds,
					api.DrainOutcomeNothingCommitted, tc.reason, tc.heldHow, tc.holds)
			}
			data, _ := e.request(t, api.DrainList, `{}`)
			var list api.DrainListReply
			if err := json.Unmarshal(data, &list); err != nil {
				t.Fatal(err)
			}
			for _, d := range list.Drains {
				if d.DrainID == rep.DrainID && (d.Outcome != st.Outcome || d.OutcomeReason != tc.reason) {
					t.Errorf("drain.list outcome %q (%q)", d.Outcome, d.OutcomeReason)
				}
			}
		})
	}
}

// TestOutcomeWords: the outcome of a completed drain by its counts.
func TestOutcomeWords(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  string
		c       api.DrainCounts
		outcome string
		reason  string
	}{
		{"all committed", api.DrainCompleted, api.DrainCounts{Selected: 3, Committed: 2, SkippedDuplicate: 1}, api.DrainOutcomeAllResolved, ""},
		{"partial", api.DrainCompleted, api.DrainCounts{Selected: 4, Committed: 1, ReplayFailed: 1, Held: 2}, api.DrainOutcomePartial,
			"2 held behind a failed event of their key, 1 failed again"},
		{"all failed", api.DrainCompleted, api.DrainCounts{Selected: 2, ReplayFailed: 1, Poisoned: 1}, api.DrainOutcomeNothingCommitted, "1 failed again, 1 poisoned"},
		{"all skipped", api.DrainCompleted, api.DrainCounts{Selected: 2, Skipped: 2}, api.DrainOutcomeNothingCommitted,
			"2 skipped (resolved elsewhere or no longer redrivable)"},
		{"held by earlier", api.DrainCompleted, api.DrainCounts{Selected: 1, Held: 1, HeldByEarlier: 1}, api.DrainOutcomeNothingCommitted,
			"1 held by an earlier unresolved event of their key"},
		{"still running", api.DrainRunning, api.DrainCounts{Selected: 2}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := api.DrainState{Status: tc.status, DrainCounts: tc.c}.WithOutcome()
			if st.Outcome != tc.outcome || st.OutcomeReason != tc.reason {
				t.Errorf("outcome %q (%q), want %q (%q)", st.Outcome, st.OutcomeReason, tc.outcome, tc.reason)
			}
		})
	}
}
