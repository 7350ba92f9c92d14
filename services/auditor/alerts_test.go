package auditor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestAuditorNotifications: once its live view has read QUARANTINE, the
// auditor publishes a new failure group's first event, a poison record
// and a failed verify on deadletter.notify.<kind>, with ids, codes and
// counts and never a payload value or a party; what it reads again at
// its start (an old group) is not notified, nor a group seen before.
func TestAuditorNotifications(t *testing.T) {
	const party = "Müller & Söhne <Großhandel>"
	f := func(n int, class record.Class, code codes.Code) fixture {
		return fixture{id: id(n), domain: "pharmacy", class: class, code: code, party: party, firstSeen: t0, quarantined: t0.Add(time.Second)}
	}
	e := newEnv(t)
	e.chainOf(t, f(1, record.ClassValidation, pharmacy.InvalidNDC), record.KindRedriveRequested) // before the start: read again, never notified
	sub, err := e.nc.SubscribeSync(subjects.NotifyAll)
	if err != nil {
		t.Fatal(err)
	}
	e.startAuditor(t, testConfig(), nil)
	var seen []notify.Event
	// await reads notifications until one of kind matches.
	await := func(t *testing.T, kind notify.Kind, match func(notify.Event) bool) notify.Event {
		t.Helper()
		var got notify.Event
		natstest.CheckFor(t, 30*time.Second, time.Millisecond, func() error {
			m, err := sub.NextMsg(100 * time.Millisecond)
			if err != nil {
				return err
			}
			for _, bad := range []string{"TX-SECRET-PHI", "Müller", "Söhne"} {
				if strings.Contains(string(m.Data), bad) {
					t.Errorf("a payload value or party in a notification: %s", m.Data)
				}
			}
			var ev notify.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				return err
			}
			seen = append(seen, ev)
			if m.Subject != notify.Subject(ev.Kind) {
				t.Errorf("%s on %s", ev.Kind, m.Subject)
			}
			if ev.Kind != kind || !match(ev) {
				return fmt.Errorf("got %s %s", ev.Kind, ev.ID)
			}
			got = ev
			return nil
		})
		if got.Source != "auditor" || got.At.IsZero() {
			t.Errorf("event %+v", got)
		}
		return got
	}
	for _, tc := range []struct {
		name string
		act  func(t *testing.T)
		kind notify.Kind
		want func(notify.Event) bool
	}{
		{"a new failure group", func(t *testing.T) {
			e.chainOf(t, f(1001, record.ClassValidation, pharmacy.InvalidNDC)) // the group read at the start: no event
			e.chainOf(t, f(2, record.ClassExhausted, codes.DownstreamUnavailable))
		}, notify.KindFailureGroup, func(ev notify.Event) bool {
			return ev.Fingerprint == "pharmacy:DOWNSTREAM_UNAVAILABLE:exhausted" && ev.DLQID == id(2) && ev.Code == "DOWNSTREAM_UNAVAILABLE" &&
				ev.Class == "exhausted" && ev.ID == "failure_group.pharmacy:DOWNSTREAM_UNAVAILABLE:exhausted"
		}},
		{"a poison record", func(t *testing.T) {
			e.chainOf(t, f(3, record.ClassExhausted, codes.DownstreamUnavailable), record.KindRedriveRequested, record.KindPoisoned)
		}, notify.KindPoison, func(ev notify.Event) bool {
			return ev.DLQID == id(3) && ev.ID == "poison."+id(3)+".2" && ev.Code == "DOWNSTREAM_UNAVAILABLE" && ev.Counts["redrive_count"] == 1
		}},
		{"a failed verify", func(t *testing.T) {
			e.publishRaw(t, subjects.Quarantine("pharmacy", id(4)), []byte(`{"transaction_id":"TX-SECRET-PHI"`))
			var rep api.VerifyReply
			request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &rep)
			if rep.OK {
				t.Fatal("verify found nothing")
			}
		}, notify.KindVerifyFailed, func(ev notify.Event) bool {
			return ev.Codes[record.ProblemUnparseable] == 1 && ev.Counts["problems"] >= 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.act(t)
			await(t, tc.kind, tc.want)
		})
	}
	for _, ev := range seen {
		if ev.Kind == notify.KindFailureGroup && ev.Fingerprint == "pharmacy:INVALID_NDC:validation" {
			t.Errorf("a group read at the start notified: %+v", ev)
		}
	}
}
