package domain

import (
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Checker is one domain's rules beyond its JSON Schema.
type Checker interface {
	// Domain names the domain; it is also the name of its schema in
	// package schemas.
	Domain() string
	// Check validates a schema-valid document published with the given
	// event type (the subject's last token) and returns its envelope, or a
	// *codes.Error.
	Check(eventType string, doc Doc) (envelope.Envelope, error)
	// EventType derives the subject's event-type token from a document, so
	// tools can publish a file to the right subject.
	EventType(doc Doc) (string, error)
	// Identify derives what it can of the identity of a document that
	// failed validation (schema or domain rules), by the same rules as
	// Check: the idempotency key only when every part of it is valid, the
	// party id and ordering key when their own fields are. Fields it
	// cannot derive stay empty. It never fails and never panics.
	Identify(doc Doc) envelope.Envelope
}

// XMLChecker is implemented by a domain whose envelope of an event sent
// in an XML document (mapped to JSON by the document reader) differs from
// the same event sent as JSON: DSCSA, whose shown event hash ID is the
// reference implementation's, which names ILMD master data by its XML
// namespace. Its key and content identity never differ by form.
type XMLChecker interface {
	// CheckXML is Check of an event read from an XML document.
	CheckXML(eventType string, doc Doc) (envelope.Envelope, error)
}

// Prechecker is implemented by a domain whose rules refuse some documents
// before schema validation, with a more precise code than the schema's
// (e.g. an event type the schema's enum would refuse without naming it).
type Prechecker interface {
	// Precheck returns a *codes.Error for a document the domain refuses
	// outright, or nil to go on with schema validation.
	Precheck(doc Doc) error
}

// ContentIdentity is a domain's own rule for when two events with one
// idempotency key are the same event (Spec.Content), where its standard
// defines one: e.g. DSCSA's CBV 2.0 event hash ID with the event's exact
// content, under which the same event as XML or JSON, with its lists
// reordered or other namespace prefixes, is one event. A domain without
// one compares the RFC 8785 canonical form of the payload (package
// idempotency, which derives and compares every content hash through
// this hook and knows no domain by name).
type ContentIdentity struct {
	// Name names the identity. It is recorded with each content hash (a
	// key state's, a LEDGER entry's), so that a later change of the rule
	// can tell old hashes apart: never "" nor "jcs" (the canonical JSON's,
	// package idempotency's default).
	Name string
	// Hash returns the lowercase hex content hash of a decoded event
	// (Decode). It never fails and never panics.
	Hash func(doc Doc) string
	// Checked returns Hash(doc) for an event the domain's Check accepted
	// into env, using what env already holds (e.g. an event hash ID the
	// rules derived) so that nothing is derived twice. nil: Hash.
	Checked func(env envelope.Envelope, doc Doc) string
	// Earlier are the identities the domain's hashes were recorded by
	// before Name, by name, each with the hash it derived, frozen: hashes
	// recorded so keep matching their events; nothing new is derived by
	// them.
	Earlier map[string]func(doc Doc) string
}

// Spec is everything deadletter knows about one event domain. Each domain
// package exports its Spec; package registry lists them, and every list of
// domains, every check of a domain name and every display derives from it.
type Spec struct {
	// Name is the domain's subject token ("events.<name>.<event_type>"),
	// schema name (schemas/<name>.schema.json) and key prefix.
	Name string
	// Title names the domain for people (e.g. "FSMA 204").
	Title string
	// EventTypes lists the subject event-type tokens Check accepts, in
	// the order they are documented.
	EventTypes []string
	// KeySource names the fields the idempotency key is derived from.
	KeySource string
	// OrderingKey names the fields of the ordering key (replays within a
	// key follow the event time).
	OrderingKey string
	// PartyID names the field failures are grouped by (the supplier,
	// registrant or trading partner).
	PartyID string
	// PartyLabel names the party id for people, where it is shown
	// ("registrant", "GLN or company prefix", "supplier").
	PartyLabel string
	// Retention is how long the domain's records must be kept by default
	// (a deployment may configure longer: streams.Options.Retention), and
	// RetentionRule the rule that says so.
	Retention     time.Duration
	RetentionRule string
	// Checker holds the domain's rules and identity derivations.
	Checker Checker
	// Content is the domain's content identity; nil: the canonical JSON
	// of the payload (see ContentIdentity).
	Content *ContentIdentity
	// SecondPerson is the domain's rule for which corrections of its
	// events need a second person when the approval policy asks for the
	// domains' own rules (package approval's "controlled" corrections),
	// beside any change of the event's identity, which always needs one:
	// e.g. the DEA's controlled substances for pharmacy. It gets the
	// payloads before and after, each decoded (nil when one does not
	// decode), and must not panic. nil: no correction needs a second
	// person by the domain's own rule (ReviewCorrection).
	SecondPerson func(original, corrected Doc) Review
	// Codes are the error codes of the domain's own rules, declared in its
	// package (the codes domains share are package codes'); package
	// registry registers them (codes.Register), so that codes.Known lists
	// them.
	Codes []codes.Info
	// Listed are the envelope's identifiers the first record of a
	// quarantined event keeps (record.Record.Identifiers), for the
	// records list and its search, beside those of the ordering key:
	// business identifiers only, never other payload values.
	// "event_type" is the envelope's EventType.
	Listed []string
	// Shown are the identifiers the records list shows for an event of
	// the domain, in order (the party has its own column).
	Shown []string
	// Unique gives a decoded valid example of the domain the identity
	// number i (package sample): its idempotency key and its ordering
	// key, so that distinct i are distinct business objects, none
	// holding another's replay (per-key order).
	Unique func(doc Doc, i int)
	// Search is how the records list finds the domain's events by their
	// identifiers (the auditor's audit.list, dlqctl find).
	Search Search
	// Sheet returns a new sheet of the domain's events for one
	// spreadsheet export (package exportsheet); nil when the domain has
	// no sheet of its own (its events are rows of the records sheet
	// only).
	Sheet func() Sheet
}

// Year is 365 days, the unit retention rules are stated in (a leap day
// more or less is within the margin a MaxAge above them keeps).
const Year = 365 * 24 * time.Hour
