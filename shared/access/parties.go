package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/subjects"
)

// AllParties, as a party of Parties, is every party of the domain; as a
// domain, every domain.
const AllParties = "*"

// Parties are the parties a publisher may publish events for: for each
// domain ("pharmacy", "dscsa", "fsma", or AllParties for every domain),
// the party ids its events may name (envelope.Envelope.PartyID: the DEA
// registrant, the DSCSA owning party's GLN, the FSMA supplier id). A party
// is an exact id, AllParties, or a prefix followed by '*' ("0614141*":
// every GLN of the GS1 company prefix 0614141; GS1 allocates company
// prefixes so that none is a prefix of another).
type Parties map[string][]string

// Allows reports whether p lets its publisher publish an event of domain
// for party. An event whose party is unknown ("") is allowed only by
// AllParties.
func (p Parties) Allows(domain, party string) bool {
	for _, d := range []string{domain, AllParties} {
		for _, allowed := range p[d] {
			switch {
			case allowed == AllParties:
				return true
			case party == "":
			case allowed == party:
				return true
			case len(allowed) > 1 && strings.HasSuffix(allowed, "*") && strings.HasPrefix(party, allowed[:len(allowed)-1]):
				return true
			}
		}
	}
	return false
}

// Publishers maps each publisher (a person of RolePublisher, by name) to
// the parties it may publish for: the table the validator checks every
// event against (PublisherTable, WritePublishers, LoadPublishers).
type Publishers map[string]Parties

// Allows reports whether publisher may publish an event of domain for
// party. An unknown publisher may publish for none.
func (t Publishers) Allows(publisher, domain, party string) bool {
	return t[publisher].Allows(domain, party)
}

// PublisherTable returns the publishers of people and their parties.
func PublisherTable(people []Person) Publishers {
	t := Publishers{}
	for _, p := range people {
		if p.Role == RolePublisher {
			t[p.Name] = p.Parties
		}
	}
	return t
}

// ErrPublisherName is returned for a publisher whose name cannot be the
// subject token its events are stored under.
var ErrPublisherName = errors.New("access: a publisher's name must be 1 to 64 ASCII letters, digits, '-' or '_'")

// ValidPublisherName reports whether name can name a publisher: its
// events are stored under subjects.Published(name, ...), and its account
// is PublisherAccount(name).
func ValidPublisherName(name string) bool {
	if name == "" || len(name) > 64 || !subjects.ValidToken(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// PublisherAccount returns the account of the publisher name: each
// publisher has an account of its own, whose import of events.> the
// server maps to events.<name>.> (subjects.Published) in the services'
// account, so the subject of every stored event names its publisher and
// no publisher can choose another's.
func PublisherAccount(name string) string { return RoleAccount(RolePublisher) + "_" + name }

// publisherAccountPrefix starts the name of every publisher's account.
var publisherAccountPrefix = RoleAccount(RolePublisher) + "_"

// WritePublishers writes the publisher table of people to path (JSON,
// mode 0600): the validator's DEADLETTER_PUBLISHERS_FILE.
func WritePublishers(path string, people []Person) error {
	b, err := json.MarshalIndent(PublisherTable(people), "", "  ")
	if err != nil {
		return fmt.Errorf("access: encode publishers: %w", err)
	}
	return WriteFile(path, append(b, '\n'))
}

// LoadPublishers reads a publisher table written by WritePublishers.
func LoadPublishers(path string) (Publishers, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("access: read publishers: %w", err)
	}
	t := Publishers{}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("access: publishers %s: %w", path, err)
	}
	return t, nil
}

// examplePublishers are the per-party publishers `make run` and the kit
// create beside the all-parties publisher: one per domain, for a party of
// the example events (schemas/testdata).
var examplePublishers = []Person{
	{Name: "publisher-bw4829137", Role: RolePublisher, Parties: Parties{pharmacy.Name: {"BW4829137"}}},
	{Name: "publisher-0614141", Role: RolePublisher, Parties: Parties{dscsa.Name: {"0614141*"}}},
	{Name: "publisher-sup-00417", Role: RolePublisher, Parties: Parties{fsma.Name: {"SUP-00417"}}},
}

// defaultParties returns the parties of the default person name (nil for
// another name).
func defaultParties(name string) Parties {
	for _, p := range DefaultPeople() {
		if p.Name == name {
			return p.Parties
		}
	}
	return nil
}

// checkPublishers refuses a publisher whose name cannot be a subject
// token.
func checkPublishers(people []Person) error {
	for _, p := range people {
		if p.Role == RolePublisher && !ValidPublisherName(p.Name) {
			return fmt.Errorf("%w: %q", ErrPublisherName, p.Name)
		}
	}
	return nil
}

// publishers returns the names of the publishers among people.
func publishers(people []Person) []string {
	var out []string
	for _, p := range people {
		if p.Role == RolePublisher && !slices.Contains(out, p.Name) {
			out = append(out, p.Name)
		}
	}
	return out
}
