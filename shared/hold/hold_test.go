package hold

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMatches(t *testing.T) {
	sub := Subject{DLQID: "pharmacy_01", Domain: "pharmacy", PartyID: "BW4829137", ErrorCode: pharmacy.InvalidNDC, FirstSeen: t0}
	before, after := t0.Add(-time.Hour), t0.Add(time.Hour)
	tests := []struct {
		name   string
		target api.HoldTarget
		want   bool
	}{
		{"its dlq id", api.HoldTarget{DLQID: "pharmacy_01"}, true},
		{"another dlq id", api.HoldTarget{DLQID: "pharmacy_02"}, false},
		{"its party", api.HoldTarget{PartyID: "BW4829137"}, true},
		{"another party", api.HoldTarget{PartyID: "AB1234563"}, false},
		{"its domain", api.HoldTarget{Filter: &api.HoldFilter{Domain: "pharmacy"}}, true},
		{"another domain", api.HoldTarget{Filter: &api.HoldFilter{Domain: "dscsa"}}, false},
		{"its code among others", api.HoldTarget{Filter: &api.HoldFilter{ErrorCodes: []string{"SCHEMA_VALIDATION", string(pharmacy.InvalidNDC)}}}, true},
		{"other codes", api.HoldTarget{Filter: &api.HoldFilter{ErrorCodes: []string{"SCHEMA_VALIDATION"}}}, false},
		{"first seen in range", api.HoldTarget{Filter: &api.HoldFilter{Since: &before, Until: &after}}, true},
		{"since is inclusive", api.HoldTarget{Filter: &api.HoldFilter{Since: &t0}}, true},
		{"until is exclusive", api.HoldTarget{Filter: &api.HoldFilter{Until: &t0}}, false},
		{"every member must match", api.HoldTarget{Filter: &api.HoldFilter{Domain: "pharmacy", PartyID: "AB1234563"}}, false},
		{"no target", api.HoldTarget{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Matches(tt.target, sub); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRefuse: a chain is held by the holds it carries and by an active
// dynamic hold that matches it (its record not written yet), never by a
// lifted one.
func TestRefuse(t *testing.T) {
	st := record.State{DLQID: "pharmacy_01", Domain: "pharmacy", PartyID: "BW4829137"}
	party := api.Hold{ID: "hold-p", Status: api.HoldActive, Target: api.HoldTarget{PartyID: "BW4829137"}}
	lifted := party
	lifted.ID, lifted.Status = "hold-l", api.HoldLifted
	other := api.Hold{ID: "hold-o", Status: api.HoldActive, Target: api.HoldTarget{PartyID: "AB1234563"}}
	carried := st
	carried.Holds = []record.HoldRef{{HoldID: "hold-c", CaseID: "c"}}
	tests := []struct {
		name  string
		st    record.State
		holds []api.Hold
		want  []string
	}{
		{"not held", st, []api.Hold{other, lifted}, nil},
		{"a matching active hold", st, []api.Hold{party, other}, []string{"hold-p"}},
		{"a carried hold", carried, nil, []string{"hold-c"}},
		{"both, once each", carried, []api.Hold{party, {ID: "hold-c", Status: api.HoldActive, Target: api.HoldTarget{DLQID: "pharmacy_01"}}}, []string{"hold-c", "hold-p"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Holding(tt.st, FromState(tt.st), tt.holds)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Holding = %v, want %v", got, tt.want)
			}
			err := Refuse(tt.st, tt.holds)
			var ae *api.Error
			if held := errors.As(err, &ae) && ae.Code == api.ErrHeld; held != (len(tt.want) > 0) {
				t.Errorf("Refuse = %v", err)
			}
		})
	}
}

// newStore starts a secured server and returns the store as the auditor
// (which writes HOLDS) and as the redriver (which reads it).
func newStore(t *testing.T) (auditor, redriver *Store) {
	t.Helper()
	srv := natstest.StartSecured(t, streams.DefaultOptions())
	js := func(user string) jetstream.JetStream {
		j, err := jetstream.New(srv.ConnectAs(t, user))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	return NewStore(js(access.Auditor), nil), NewStore(js(access.Redriver), nil)
}

// TestStore: a placed hold is read back (Get, All, Active) by the
// redriver with direct gets; of concurrent lifts exactly one succeeds, the
// others get ErrNotPlaced; a lift for another case is refused; the
// actions reach AUDIT.
func TestStore(t *testing.T) {
	a, r := newStore(t)
	ctx := context.Background()
	inspector := access.Identity{User: "inspector", Role: access.RoleInspector}
	h1, err := a.Place(ctx, api.HoldPlaceRequest{CaseID: "C-1", Reason: "subpoena", Target: api.HoldTarget{PartyID: "BW4829137"}}, inspector, t0)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := a.Place(ctx, api.HoldPlaceRequest{CaseID: "C-2", Reason: "audit", Target: api.HoldTarget{DLQID: "pharmacy_01"}}, inspector, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Audit(ctx, h1, AuditPlaced); err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(ctx, h1.ID)
	if err != nil || got.CaseID != "C-1" || got.PlacedBy != "inspector" || got.Status != api.HoldActive || got.Revision != h1.Revision {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	all, err := r.All(ctx)
	if err != nil || len(all) != 2 || all[0].ID != h2.ID || all[1].ID != h1.ID {
		t.Fatalf("All = %+v, %v (want newest first)", all, err)
	}
	if _, err := a.Lift(ctx, h1.ID, "C-9", "wrong case", inspector, t0); !errors.Is(err, ErrNotPlaced) {
		t.Errorf("lift for another case: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = a.Lift(ctx, h1.ID, "C-1", "closed", access.Identity{User: "operator", Role: access.RoleOperator}, t0.Add(time.Hour))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrNotPlaced) && !errors.Is(err, ErrConflict):
			t.Errorf("concurrent lift: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent lifts succeeded, want 1 (%v)", ok, len(errs), errs)
	}
	active, err := r.Active(ctx)
	if err != nil || len(active) != 1 || active[0].ID != h2.ID {
		t.Errorf("Active = %+v, %v", active, err)
	}
	lifted, _ := r.Get(ctx, h1.ID)
	if lifted.Status != api.HoldLifted || lifted.LiftedBy != "operator" || lifted.LiftReason != "closed" || lifted.LiftedAt == nil {
		t.Errorf("lifted hold = %+v", lifted)
	}
	if err := a.Audit(ctx, lifted, AuditLifted); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "hold-unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an unknown hold: %v", err)
	}
	// The redriver may read HOLDS but not write it.
	if _, err := r.Place(ctx, api.HoldPlaceRequest{CaseID: "C", Reason: "r", Target: api.HoldTarget{PartyID: "x"}}, inspector, t0); err == nil {
		t.Error("the redriver placed a hold")
	}
}
