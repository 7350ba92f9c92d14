package domain

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Search is how the records list finds a domain's quarantined events by
// the identifiers a person holds (a recall starts from an NDC and a lot, a
// suspect-product investigation from a GTIN and a serial): the search
// fields the domain answers, how it reads their values and what of a
// chain they match. A matcher matches the identifiers an event's ordering
// key and party name, those its first record lists (Spec.Listed) and,
// when the caller read them (Chain.PayloadIdentifiers), every identifier
// its verbatim payload holds (Identifiers): an event the gate could not
// read (a bad check digit, a schema fault) is found by the identifiers
// written in it.
type Search struct {
	// Fields are the search fields the domain answers, by their names in
	// a list request (api.ListRequest: its named fields' JSON names, or
	// a key of its Identifiers). A field more than one domain answers
	// ("lot") searches each of them; the others name their domain, and
	// fields of two domains in one request are refused.
	Fields []string
	// Parse reads the values given for the domain's fields (field →
	// value, white space trimmed; empty values left out) as the domain
	// normalizes them, and returns what matches them. A value it refuses
	// is a *SearchError naming the field and the rule, never the value.
	Parse func(values map[string]string) (Matcher, error)
	// KeyIdentifiers returns the identifiers an ordering key names, by
	// the envelope's names ("ndc11", "lot"); nil when there are none.
	// The party is the chain's party id (some keys begin with it).
	KeyIdentifiers func(orderingKey, party string) map[string]string
	// Identifiers returns every identifier a decoded payload holds (doc
	// is the verbatim payload's JSON object, valid or not: whatever it
	// failed on), by search field name, each value as Parse normalizes
	// a search value of that field (a DSCSA GTIN as 14 digits, a
	// pharmacy NDC as NDC-11), read as written where the domain's rules
	// would refuse it (a GTIN with a wrong check digit is still that
	// GTIN), without duplicates; a domain may add names its matcher
	// reads beside the fields (DSCSA "sgtin", an item's GTIN and serial
	// together). It reads only identifiers, never fails and never
	// panics; nil when there are none. Its result is what
	// Chain.PayloadIdentifiers holds.
	Identifiers func(doc Doc) map[string][]string
}

// Matcher reports whether a chain of the domain matches a search.
type Matcher func(c Chain) bool

// Chain is what a search sees of a quarantined event's chain: its keys,
// party and dlq id, and the identifiers its first record lists.
type Chain struct {
	OrderingKey, PartyID, IdempotencyKey, DLQID string
	// Listed are the first record's listed identifiers as name, value
	// pairs (record.Record.Identifiers); nil for a record written before
	// records kept them.
	Listed []string
	// PayloadIdentifiers are the identifiers the event's verbatim
	// payload holds (its domain's Search.Identifiers of the decoded
	// payload of the chain's first record); nil when the caller did not
	// read the payload, or it is not a JSON object.
	PayloadIdentifiers map[string][]string
}

// Identifier returns the value of the listed identifier name, "" when the
// first record does not list it.
func (c Chain) Identifier(name string) string {
	for i := 0; i+1 < len(c.Listed); i += 2 {
		if c.Listed[i] == name {
			return c.Listed[i+1]
		}
	}
	return ""
}

// PayloadIdentifiers returns the identifiers of an event's verbatim
// payload bytes (Search.Identifiers of their decoded JSON object, numbers
// as json.Number), for Chain.PayloadIdentifiers: nil when the domain has
// no Identifiers hook or the bytes are not one JSON object. It decodes
// tolerantly, unlike the gate (a member named twice keeps its last value,
// bytes after the object are ignored), since the payload may have been
// quarantined for exactly that, and a panic in the hook is nil: it never
// fails.
func (s Search) PayloadIdentifiers(payload []byte) (ids map[string][]string) {
	if s.Identifiers == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc Doc
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil
	}
	defer func() {
		if recover() != nil {
			ids = nil
		}
	}()
	return s.Identifiers(doc)
}

// Has reports whether the chain names value as its identifier name: in
// its payload's identifiers or among its listed ones (a name may be
// listed more than once: every item of a shipment).
func (c Chain) Has(name, value string) bool {
	if value == "" {
		return false
	}
	if slices.Contains(c.PayloadIdentifiers[name], value) {
		return true
	}
	for i := 0; i+1 < len(c.Listed); i += 2 {
		if c.Listed[i] == name && c.Listed[i+1] == value {
			return true
		}
	}
	return false
}

// IdentifierSet collects a payload's identifiers by name, each value once
// (Search.Identifiers builds its result with it). The zero value is ready
// to use.
type IdentifierSet struct {
	m    map[string][]string
	seen map[[2]string]bool
}

// Add adds value under name; an empty value is left out.
func (s *IdentifierSet) Add(name, value string) {
	if value == "" {
		return
	}
	k := [2]string{name, value}
	if s.seen[k] {
		return
	}
	if s.m == nil {
		s.m, s.seen = map[string][]string{}, map[[2]string]bool{}
	}
	s.seen[k] = true
	s.m[name] = append(s.m[name], value)
}

// Map returns the identifiers added, nil when none.
func (s *IdentifierSet) Map() map[string][]string { return s.m }

// SearchError is a search value a domain refuses: the field and the rule
// it breaks (never the value, which a person pasted).
type SearchError struct {
	Field, Rule string
}

func (e *SearchError) Error() string { return e.Field + ": " + e.Rule }
