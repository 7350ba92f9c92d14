package access_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestPartiesAllows: exact ids, every party, GS1 company prefixes, every
// domain; an unknown party only under "*".
func TestPartiesAllows(t *testing.T) {
	p := access.Parties{
		"pharmacy": {"BW4829137"},
		"dscsa":    {"0614141*", "urn:x:Müller & Söhne <Großhandel>"},
	}
	tests := []struct {
		name          string
		parties       access.Parties
		domain, party string
		want          bool
	}{
		{"own registrant", p, "pharmacy", "BW4829137", true},
		{"another registrant", p, "pharmacy", "AB1234563", false},
		{"registrant of another domain", p, "fsma", "BW4829137", false},
		{"GLN of the company prefix", p, "dscsa", "0614141000005", true},
		{"GLN of another company", p, "dscsa", "0614142000004", false},
		{"a party as sent", p, "dscsa", "urn:x:Müller & Söhne <Großhandel>", true},
		{"unknown party", p, "dscsa", "", false},
		{"every party of a domain", access.Parties{"fsma": {"*"}}, "fsma", "", true},
		{"every domain", access.Parties{"*": {"*"}}, "pharmacy", "AB1234563", true},
		{"a party in every domain", access.Parties{"*": {"SUP-00417"}}, "fsma", "SUP-00417", true},
		{"none", nil, "pharmacy", "BW4829137", false},
		{"a lone star suffix is not a prefix", access.Parties{"fsma": {"SUP*"}}, "fsma", "SUQ-1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.parties.Allows(tc.domain, tc.party); got != tc.want {
				t.Errorf("Allows(%q, %q) = %v, want %v", tc.domain, tc.party, got, tc.want)
			}
		})
	}
}

// TestPublisherTableFile: the validator's table round-trips through its
// file and names every default publisher.
func TestPublisherTableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "publishers.json")
	if err := access.WritePublishers(path, access.DefaultPeople()); err != nil {
		t.Fatal(err)
	}
	got, err := access.LoadPublishers(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Allows("publisher", "fsma", "anyone") || !got.Allows("publisher-bw4829137", "pharmacy", "BW4829137") ||
		got.Allows("publisher-bw4829137", "pharmacy", "AB1234563") || got.Allows("viewer", "pharmacy", "BW4829137") {
		t.Errorf("publisher table %v", got)
	}
}

// TestPublisherNames: a publisher whose name cannot be one subject token
// is refused when the configuration is rendered.
func TestPublisherNames(t *testing.T) {
	for _, name := range []string{"a.b", "a*", "a>", "a b", "Müller", ""} {
		sec, err := access.NewSecrets([]access.Person{{Name: name, Role: access.RolePublisher}}, access.WithBcryptCost(access.MinBcryptCost))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := access.ServerConfig(sec); err == nil {
			t.Errorf("publisher %q accepted", name)
		}
	}
}

// TestPublisherSubject: whatever subject a publisher publishes on, the
// server stores it under the publisher's own token; a publisher naming
// another in its subject only adds a token.
func TestPublisherSubject(t *testing.T) {
	e := startEnv(t, 0)
	st, err := e.admin.Stream(testCtx(t, 5*time.Second), subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, user, subject, stored string
	}{
		{"all-parties publisher", "publisher", subjects.Event("pharmacy", "dispense"), subjects.Published("publisher", "pharmacy", "dispense")},
		{"per-party publisher", "publisher-bw4829137", subjects.Event("pharmacy", "dispense"),
			subjects.Published("publisher-bw4829137", "pharmacy", "dispense")},
		{"posing as another publisher", "publisher-bw4829137", subjects.Published("publisher", "pharmacy", "dispense"),
			"events.publisher-bw4829137.publisher.pharmacy.dispense"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := e.js(t, e.conn(t, tc.user, nil))
			ack, err := js.Publish(testCtx(t, 5*time.Second), tc.subject, []byte(`{}`))
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			m, err := st.GetMsg(testCtx(t, 5*time.Second), ack.Sequence)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != tc.stored {
				t.Errorf("stored under %q, want %q", m.Subject, tc.stored)
			}
		})
	}
}

// TestOldCredentialsGetParties: a credentials file written before
// publishers named their parties gives the default publisher its default
// parties on load (and keeps another publisher without any).
func TestOldCredentialsGetParties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials.json")
	old := []access.Person{{Name: "publisher", Role: access.RolePublisher}, {Name: "pharmacie-st-etienne", Role: access.RolePublisher}}
	if _, err := access.LoadOrCreate(path, old, access.WithBcryptCost(access.MinBcryptCost)); err != nil {
		t.Fatal(err)
	}
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		t.Fatal(err)
	}
	table := access.PublisherTable(sec.People)
	if !table.Allows("publisher", "pharmacy", "AB1234563") || table.Allows("pharmacie-st-etienne", "pharmacy", "AB1234563") {
		t.Errorf("publisher table after load: %v", table)
	}
	again, err := access.LoadOrCreate(path, access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
	if err != nil || !access.PublisherTable(again.People).Allows("publisher", "fsma", "SUP-00417") {
		t.Errorf("the parties were not saved: %v", err)
	}
}
