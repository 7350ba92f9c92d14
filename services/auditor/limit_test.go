package auditor

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/record"
)

// TestPersonLimiter: each person gets burst placements, then the rate;
// another person is not held by the first; no sequence of names grows the
// map past its bound.
func TestPersonLimiter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l := newPersonLimiter(60, 3, 8)
	l.now = func() time.Time { return now }
	for _, tc := range []struct {
		name    string
		user    string
		advance time.Duration
		want    bool
	}{
		{"first", "Müller & Söhne <Großhandel>", 0, true},
		{"second", "Müller & Söhne <Großhandel>", 0, true},
		{"third", "Müller & Söhne <Großhandel>", 0, true},
		{"past the burst", "Müller & Söhne <Großhandel>", 0, false},
		{"another person", "Pharmacie Saint-Étienne", 0, true},
		{"a second later: one more", "Müller & Söhne <Großhandel>", time.Second, true},
		{"and no more", "Müller & Söhne <Großhandel>", 0, false},
	} {
		now = now.Add(tc.advance)
		if got := l.allow(tc.user); got != tc.want {
			t.Errorf("%s: allow = %v, want %v", tc.name, got, tc.want)
		}
	}
	for i := range 10_000 {
		l.allow(fmt.Sprintf("user-%d-%s", i, string(make([]byte, 64))))
		if n := l.size(); n > 8 {
			t.Fatalf("%d people tracked, bound 8", n)
		}
	}
}

// TestHoldPlaceRateLimited: a person placing holds past the burst is
// refused HOLD_RATE_LIMITED, and no hold is stored for the refused one.
func TestHoldPlaceRateLimited(t *testing.T) {
	e := newEnv(t)
	rs := e.chainOf(t, fixture{id: id(1), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC, firstSeen: t0, quarantined: t0})
	cfg := testConfig()
	cfg.HoldPlacePerMinute, cfg.HoldPlaceBurst = 1, 2
	e.startAuditor(t, cfg, nil)
	var placed int
	for i, want := range []string{"", "", api.ErrHoldRateLimited, api.ErrHoldRateLimited} {
		b, _ := json.Marshal(api.HoldPlaceRequest{CaseID: fmt.Sprintf("CASE-%d", i), Reason: "subpoena of Pharmacie Saint-Étienne",
			Target: api.HoldTarget{DLQID: rs[0].DLQID}})
		m, err := e.nc.Request(api.HoldPlace, b, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != want {
			t.Fatalf("placement %d: code %q, want %q", i, code, want)
		}
		if want == "" {
			placed++
		}
	}
	var l api.HoldListReply
	request(t, e.nc, api.HoldList, api.HoldListRequest{IncludeLifted: true}, &l)
	if len(l.Holds) != placed {
		t.Errorf("%d holds stored, want %d", len(l.Holds), placed)
	}
}
