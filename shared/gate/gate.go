// Package gate is deadletter's validation gate: the one function every event
// and every redrive passes through before it may be committed. It checks, in
// order: size, subject, UTF-8, JSON object, the domain's pre-check (when it
// has one: domain.Prechecker), the domain's JSON Schema, then the
// domain's own rules, and returns either the event's normalized envelope or a
// *codes.Error whose code says exactly what is wrong.
package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

// DefaultMaxPayload is the default payload size limit (1 MiB).
const DefaultMaxPayload = 1 << 20

// Checker is one domain's rules beyond its JSON Schema (see
// domain.Checker; the registered ones are in package registry).
type Checker = domain.Checker

// Gate validates events. It is safe for concurrent use.
type Gate struct {
	maxPayload int
	domains    map[string]compiled
}

type compiled struct {
	checker Checker
	// pre is the checker's Precheck, when it has one.
	pre    domain.Prechecker
	schema *jsonschema.Schema
	// raw is the decoded schema document, to name the members an
	// additionalProperties violation refuses.
	raw any
}

// Checkers returns the registered domains' checkers (registry.Checkers).
func Checkers() []Checker { return registry.Checkers() }

// New compiles the schemas of the given checkers (the built-in ones when
// none are given) once. maxPayload <= 0 means DefaultMaxPayload.
func New(maxPayload int, checkers ...Checker) (*Gate, error) {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	if len(checkers) == 0 {
		checkers = Checkers()
	}
	g := &Gate{maxPayload: maxPayload, domains: make(map[string]compiled, len(checkers))}
	for _, c := range checkers {
		s, raw, err := compileSchema(c.Domain())
		if err != nil {
			return nil, err
		}
		pre, _ := c.(domain.Prechecker)
		g.domains[c.Domain()] = compiled{checker: c, pre: pre, schema: s, raw: raw}
	}
	return g, nil
}

func compileSchema(name string) (*jsonschema.Schema, any, error) {
	b, err := schemas.Read(name)
	if err != nil {
		return nil, nil, err
	}
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, nil, fmt.Errorf("gate: schema %s: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = false // formats are checked by domain rules, with codes
	if err := c.AddResource(schemas.ID(name), bytes.NewReader(b)); err != nil {
		return nil, nil, fmt.Errorf("gate: schema %s: %w", name, err)
	}
	s, err := c.Compile(schemas.ID(name))
	if err != nil {
		return nil, nil, fmt.Errorf("gate: schema %s: %w", name, err)
	}
	return s, raw, nil
}

// MaxPayload returns the payload size limit in bytes.
func (g *Gate) MaxPayload() int { return g.maxPayload }

// Domains returns the names of the domains the gate knows, sorted.
func (g *Gate) Domains() []string {
	out := make([]string, 0, len(g.domains))
	for d := range g.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Check validates one event published on subject (Read, then
// CheckEvent). It never panics on any input (fuzzed) and returns either a
// complete envelope or a *codes.Error.
func (g *Gate) Check(subject string, data []byte) (envelope.Envelope, error) {
	ev, err := g.Read(subject, data)
	if err != nil {
		return envelope.Envelope{}, err
	}
	return g.CheckEvent(ev)
}

// Read is the first half of Check: the payload's size, the subject's
// domain (one the gate knows) and event type, and the payload decoded
// once; the Event it returns is checked by CheckEvent, and its Doc
// serves whatever else reads the event (its content hash).
func (g *Gate) Read(subject string, data []byte) (Event, error) {
	if len(data) > g.maxPayload {
		return Event{}, g.tooLarge(data)
	}
	dom, eventType, ok := subjects.ParseEvent(subject)
	if !ok {
		return Event{}, codes.Errorf(codes.UnknownSubject, "subject must be events.<domain>.<event_type>")
	}
	if _, known := g.domains[dom]; !known {
		return Event{}, codes.Errorf(codes.UnknownSubject, "unknown domain %q", dom)
	}
	doc, err := Decode(data)
	if err != nil {
		return Event{}, err
	}
	return Event{Domain: dom, Type: eventType, Data: data, Doc: doc}, nil
}

// Event is one event as the gate checks it: its domain and event type
// (the subject's, or for an event of a document, the document's domain
// and the event's own type), its bytes, and its decoded form (Decode of
// Data), so that the gate decodes nothing again.
type Event struct {
	Domain string
	Type   string
	Data   []byte
	Doc    domain.Doc
	// XML: the event was read from an XML document (domain.XMLChecker).
	XML bool
}

// CheckEvent validates a decoded event (Check's work after the subject
// is parsed and the payload decoded). It never panics on any input and
// returns either a complete envelope or a *codes.Error.
func (g *Gate) CheckEvent(ev Event) (envelope.Envelope, error) {
	if len(ev.Data) > g.maxPayload {
		return envelope.Envelope{}, g.tooLarge(ev.Data)
	}
	c, ok := g.domains[ev.Domain]
	if !ok {
		return envelope.Envelope{}, codes.Errorf(codes.UnknownSubject, "unknown domain %q", ev.Domain)
	}
	doc := ev.Doc
	if doc == nil {
		var err error
		if doc, err = Decode(ev.Data); err != nil {
			return envelope.Envelope{}, err
		}
	}
	if c.pre != nil {
		if err := c.pre.Precheck(doc); err != nil {
			return envelope.Envelope{}, err
		}
	}
	if err := c.schema.Validate(doc); err != nil {
		return envelope.Envelope{}, schemaError(err, doc, c.raw)
	}
	var env envelope.Envelope
	var err error
	if x, ok := c.checker.(domain.XMLChecker); ok && ev.XML {
		env, err = x.CheckXML(ev.Type, doc)
	} else {
		env, err = c.checker.Check(ev.Type, doc)
	}
	if err != nil {
		if codes.Of(err) == codes.Internal {
			return envelope.Envelope{}, codes.Wrap(codes.Internal, err, "domain check failed without a code")
		}
		return envelope.Envelope{}, err
	}
	env.Domain = ev.Domain
	if env.EventType == "" {
		env.EventType = ev.Type
	}
	if env.IdempotencyKey == "" {
		return envelope.Envelope{}, codes.Errorf(codes.Internal, "domain %s produced no idempotency key", ev.Domain)
	}
	return env, nil
}

// tooLarge is the PAYLOAD_TOO_LARGE error of data.
func (g *Gate) tooLarge(data []byte) error {
	return codes.Errorf(codes.PayloadTooLarge, "payload is %d bytes, limit is %d", len(data), g.maxPayload)
}

// Identify derives what it can of the identity of an event that failed
// Check (see domain.Checker.Identify): its domain from the subject
// (registry.Unknown when none), and, when the payload is a JSON object of a
// known domain, the idempotency key, party id, ordering key and event time
// its domain's rules can derive. It never fails: a panic in a domain's
// rules leaves the domain and event type only.
func (g *Gate) Identify(subject string, data []byte) envelope.Envelope {
	dom, eventType, _ := subjects.ParseEvent(subject)
	return g.IdentifyEvent(Event{Domain: dom, Type: eventType, Data: data})
}

// IdentifyEvent is Identify of an event whose domain and type are known
// (and its decoded form, when Doc is set).
func (g *Gate) IdentifyEvent(ev Event) (out envelope.Envelope) {
	c, ok := g.domains[ev.Domain]
	if !ok {
		return envelope.Envelope{Domain: registry.Unknown, Partial: true}
	}
	env := envelope.Envelope{Domain: ev.Domain, EventType: ev.Type, Partial: true}
	defer func() {
		if r := recover(); r != nil {
			out = env
		}
	}()
	if len(ev.Data) > g.maxPayload {
		return env
	}
	doc := ev.Doc
	if doc == nil {
		var err error
		if doc, err = Decode(ev.Data); err != nil {
			return env
		}
	}
	id := c.checker.Identify(doc)
	id.Domain, id.Partial = ev.Domain, true
	if id.EventType == "" {
		id.EventType = ev.Type
	}
	return id
}

// schemaError turns a schema validation error into a SCHEMA_VALIDATION_ERROR
// whose detail names the failing instance locations (JSON pointers) and
// keywords, never the offending values (jsonschema's messages can quote
// them). An additionalProperties violation names each refused member by its
// pointer ("/patient_name: violates additionalProperties"), found from doc
// and the schema document raw, not from the library's message.
func schemaError(err error, doc domain.Doc, raw any) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return codes.Wrap(codes.SchemaValidation, err, "schema validation failed")
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			kw := keyword(e.KeywordLocation)
			if kw == "additionalProperties" {
				if extra := refusedMembers(e, doc, raw); len(extra) > 0 {
					for _, name := range extra {
						leaves = append(leaves, fmt.Sprintf("%s/%s: violates %s", e.InstanceLocation, pointerToken(name), kw))
					}
					return
				}
			}
			leaf := fmt.Sprintf("%s: violates %s", orRoot(e.InstanceLocation), kw)
			if kw == "required" {
				// Lists the schema's missing property names, never the
				// payload's (additionalProperties would echo them).
				leaf += " (" + e.Message + ")"
			}
			leaves = append(leaves, leaf)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(leaves)
	if len(leaves) > 5 {
		leaves = append(leaves[:5], fmt.Sprintf("and %d more", len(leaves)-5))
	}
	return codes.Errorf(codes.SchemaValidation, "%s", strings.Join(leaves, "; "))
}

// refusedMembers returns the sorted names of the members of the object at
// e's instance location that its schema (the object holding the failing
// additionalProperties: false) neither lists in properties nor matches by
// patternProperties; nil when either cannot be resolved.
func refusedMembers(e *jsonschema.ValidationError, doc domain.Doc, raw any) []string {
	inst, ok := resolve(doc, e.InstanceLocation).(map[string]any)
	if !ok {
		return nil
	}
	_, frag, _ := strings.Cut(e.AbsoluteKeywordLocation, "#")
	parent, _ := strings.CutSuffix(frag, "/additionalProperties")
	sch, ok := resolve(raw, parent).(map[string]any)
	if !ok {
		return nil
	}
	props, _ := sch["properties"].(map[string]any)
	patterns, _ := sch["patternProperties"].(map[string]any)
	var out []string
	for name := range inst {
		if _, ok := props[name]; ok || matchesAny(patterns, name) {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func matchesAny(patterns map[string]any, name string) bool {
	for p := range patterns {
		if re, err := regexp.Compile(p); err == nil && re.MatchString(name) {
			return true
		}
	}
	return false
}

// resolve returns the value at a JSON pointer ("" is the whole document).
func resolve(v any, pointer string) any {
	if pointer == "" {
		return v
	}
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// maxNameInDetail bounds how much of a refused member name a detail shows.
const maxNameInDetail = 64

// pointerToken escapes a member name as a JSON pointer token (RFC 6901),
// quoted with Go escapes when it holds anything but printable ASCII and cut
// to maxNameInDetail bytes, so a detail stays one short printable line.
func pointerToken(name string) string {
	cut := len(name) > maxNameInDetail
	if cut {
		name = name[:maxNameInDetail]
	}
	name = strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
	for _, r := range name {
		if r < 0x20 || r > 0x7e {
			name = strconv.QuoteToASCII(name)
			break
		}
	}
	if cut {
		name += "..."
	}
	return name
}

func orRoot(loc string) string {
	if loc == "" {
		return "/"
	}
	return loc
}

// keyword returns the last segment of a keyword location ("required",
// "pattern", "type", ...), which names the rule without quoting values.
func keyword(loc string) string {
	if i := strings.LastIndexByte(loc, '/'); i >= 0 {
		return loc[i+1:]
	}
	return loc
}
