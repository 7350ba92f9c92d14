package validator

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestPartyBinding: the validator reads the publisher from the subject
// (the token the server's import mapping writes; here published directly,
// as the mapping would store it) and quarantines an event for a party its
// publisher may not publish for as PARTY_NOT_AUTHORIZED, naming the
// publisher; an allowed event commits with the publisher on its LEDGER
// entry.
func TestPartyBinding(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	cfg := testConfig()
	cfg.Publishers = access.Publishers{
		"apotheke-mueller":     {"pharmacy": {"BW4829137"}},
		"pharmacie-st-etienne": {"pharmacy": {"AB1234563"}, "fsma": {"*"}},
		"everyone":             {access.AllParties: {access.AllParties}},
	}
	startValidator(t, srv, cfg, nil)
	_, data := example(t, "pharmacy", "valid", "dispense-schedule-ii.json")

	tests := []struct {
		name, subject, publisher string
		want                     codes.Code // "" commits
	}{
		{"publisher of the registrant", subjects.Published("apotheke-mueller", "pharmacy", "dispense"), "apotheke-mueller", ""},
		{"publisher of another registrant", subjects.Published("pharmacie-st-etienne", "pharmacy", "dispense"), "pharmacie-st-etienne", codes.PartyNotAuthorized},
		{"all-parties publisher", subjects.Published("everyone", "pharmacy", "dispense"), "everyone", ""},
		{"publisher not in the table", subjects.Published("mallory", "pharmacy", "dispense"), "mallory", codes.PartyNotAuthorized},
		{"no publisher token (services' account)", subjects.Event("pharmacy", "dispense"), "", ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx := fmt.Sprintf("INV-<Müller & Söhne>-%d", i)
			body := bytes.Replace(data, []byte(`"INV-2025-0181"`), []byte(`"`+tx+`"`), 1)
			key := keyOf(t, subjects.Event("pharmacy", "dispense"), body)
			publish(t, js, tc.subject, body, "")
			natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
				if tc.want == "" {
					if ledgerCount(t, js, "pharmacy", key) != 1 {
						return fmt.Errorf("not committed")
					}
					return nil
				}
				for _, f := range failures(t, js) {
					if f.Subject == tc.subject && bytes.Equal(f.Payload, body) {
						return nil
					}
				}
				return fmt.Errorf("no failure")
			})
			if tc.want == "" {
				st, err := js.Stream(context.Background(), subjects.LedgerStream)
				if err != nil {
					t.Fatal(err)
				}
				m, err := st.GetLastMsgForSubject(context.Background(), subjects.Ledger("pharmacy", key))
				if err != nil {
					t.Fatal(err)
				}
				if got := m.Header.Get(envelope.Publisher); got != tc.publisher {
					t.Errorf("LEDGER entry's publisher %q, want %q", got, tc.publisher)
				}
				return
			}
			for _, f := range failures(t, js) {
				if f.Subject != tc.subject || !bytes.Equal(f.Payload, body) {
					continue
				}
				if f.Code != tc.want || f.Class != record.ClassValidation || f.Envelope == nil || f.Envelope.Publisher != tc.publisher {
					t.Errorf("failure %s %s, envelope %+v", f.Code, f.Class, f.Envelope)
				}
				r := record.FromFailure(f, time.Now())
				if r.Publisher != tc.publisher || r.DLQID == key {
					t.Errorf("record publisher %q, dlq id %s (the key of the party's event %s)", r.Publisher, r.DLQID, key)
				}
			}
			if ledgerCount(t, js, "pharmacy", key) != 0 {
				t.Errorf("an unauthorized event reached LEDGER")
			}
		})
	}
}
