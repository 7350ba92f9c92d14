package redriver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/record"
)

// alertMarker is a payload value: no notification may carry it.
const alertMarker = "MARKER Müller & Söhne <Großhandel>"

// TestRedriverNotifications: a drain its canary pauses and an action held
// for a second person are published on deadletter.notify.<kind> with ids,
// codes and counts, never a value of the events' payloads.
func TestRedriverNotifications(t *testing.T) {
	e := newTestEnvWith(t, func(cfg *Config) {
		cfg.AllowAnonymous = true
		cfg.OutcomeTimeout = 300 * time.Millisecond // no validator here: every replay is pending
	})
	newFakeAppends(t, e.nc) // appends answered, nothing written: replays stay pending
	sub, err := e.nc.SubscribeSync("deadletter.notify.>")
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"supplier":"` + strings.ReplaceAll(alertMarker, `"`, `\"`) + `","lot":"` + alertMarker + `"}`
	for i := range 3 {
		e.write(t, spec{n: i, domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable, party: alertMarker,
			okey: fmt.Sprint("K", i), payload: payload})
	}
	poison := e.write(t, spec{n: 9, domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable, party: alertMarker,
		okey: "P", payload: payload, kinds: []record.Kind{record.KindPoisoned}})
	var drainID string
	for _, tc := range []struct {
		name  string
		act   func(t *testing.T)
		kind  notify.Kind
		check func(t *testing.T, ev notify.Event)
	}{
		{"a drain paused by its canary", func(t *testing.T) {
			rep, ae := e.startJSON(t, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "fsma"}, Reason: alertMarker})
			if ae != nil {
				t.Fatal(ae)
			}
			drainID = rep.DrainID
		}, notify.KindDrainPaused, func(t *testing.T, ev notify.Event) {
			if ev.DrainID != drainID || ev.Reason != api.PauseCanary || ev.Codes["PENDING"] != 3 || ev.Counts["selected"] != 3 || ev.Counts["failures"] != 3 {
				t.Errorf("event %+v", ev)
			}
		}},
		{"a release held for a second person", func(t *testing.T) {
			data, code := e.request(t, api.Release, signed(t, e.js, api.ReleaseRequest{DLQID: poison, Actor: "qa", Reason: alertMarker}, "qa", access.RoleOperator))
			if code != api.ErrApprovalRequired {
				t.Fatalf("release: %s %s", code, data)
			}
		}, notify.KindApprovalPending, func(t *testing.T, ev notify.Event) {
			if ev.ApprovalID == "" || ev.Reason != api.ActionRelease || ev.DLQID != poison || ev.Domain != "fsma" || ev.ID != "approval_pending."+ev.ApprovalID {
				t.Errorf("event %+v", ev)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.act(t)
			t.Cleanup(func() {
				if t.Failed() && drainID != "" {
					t.Logf("drain %+v", e.statusJSON(t, drainID))
				}
			})
			var ev notify.Event
			natstest.CheckFor(t, 30*time.Second, time.Millisecond, func() error {
				m, err := sub.NextMsg(100 * time.Millisecond)
				if err != nil {
					return err
				}
				if strings.Contains(string(m.Data), "MARKER") || strings.Contains(string(m.Data), "Müller") {
					t.Errorf("a payload value in a notification: %s", m.Data)
				}
				if err := json.Unmarshal(m.Data, &ev); err != nil {
					return err
				}
				if m.Subject != notify.Subject(tc.kind) || ev.Kind != tc.kind {
					return fmt.Errorf("got %s %s", m.Subject, ev.Kind)
				}
				return nil
			})
			if ev.Source != "redriver" || ev.At.IsZero() {
				t.Errorf("event %+v", ev)
			}
			tc.check(t, ev)
		})
	}
}
