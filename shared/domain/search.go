package domain

// Search is how the records list finds a domain's quarantined events by
// the identifiers a person holds (a recall starts from an NDC and a lot, a
// suspect-product investigation from a GTIN and a serial): the search
// fields the domain answers, how it reads their values and what of a
// chain they match. A search reads no payload: it matches the identifiers
// an event's ordering key and party name and those its first record
// lists (Spec.Listed).
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

// SearchError is a search value a domain refuses: the field and the rule
// it breaks (never the value, which a person pasted).
type SearchError struct {
	Field, Rule string
}

func (e *SearchError) Error() string { return e.Field + ": " + e.Rule }
