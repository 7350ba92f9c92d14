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
