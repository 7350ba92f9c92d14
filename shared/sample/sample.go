// Package sample builds realistic events for demos and benchmarks from the
// example files in schemas/testdata: valid events of every domain, each given
// a distinct identity (so each commits under its own idempotency key), and
// the invalid examples, each with the exact error code its file name states.
package sample

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Event is one publishable event.
type Event struct {
	Subject string
	Data    []byte
	// Code is the error code an invalid example yields ("" when valid).
	Code codes.Code
}

// Set holds the example files of every domain, parsed once.
type Set struct {
	g       *gate.Gate
	valid   []Event
	invalid []Event
}

// Load reads every example file of the built-in domains.
func Load() (*Set, error) {
	g, err := gate.New(0)
	if err != nil {
		return nil, err
	}
	s := &Set{g: g}
	for _, c := range registry.Checkers() {
		examples, err := schemas.Examples(c.Domain())
		if err != nil {
			return nil, err
		}
		for _, ex := range examples {
			e := Event{Data: ex.Data, Subject: subjects.Event(c.Domain(), "unknown")}
			if doc, err := gate.Decode(ex.Data); err == nil {
				if typ, err := c.EventType(doc); err == nil {
					e.Subject = subjects.Event(c.Domain(), typ)
				}
			}
			if ex.Valid {
				s.valid = append(s.valid, e)
				continue
			}
			e.Code = codes.Code(ex.Code)
			// Keep only the examples that fail with their code on the
			// subject derived here (some need a hand-picked subject).
			if _, err := g.Check(e.Subject, e.Data); codes.Of(err) == e.Code {
				s.invalid = append(s.invalid, e)
			}
		}
	}
	if len(s.valid) == 0 || len(s.invalid) == 0 {
		return nil, fmt.Errorf("sample: no example files")
	}
	return s, nil
}

// Valid returns the i-th valid event: the examples in turn, across domains,
// each given the identity number i so that distinct i commit separately.
func (s *Set) Valid(i int) (Event, error) { return s.unique(s.valid[i%len(s.valid)], i) }

// unique returns example t given the identity number i.
func (s *Set) unique(t Event, i int) (Event, error) {
	doc, err := gate.Decode(t.Data)
	if err != nil {
		return Event{}, err
	}
	Unique(doc, t.Subject, i)
	b, err := json.Marshal(doc)
	if err != nil {
		return Event{}, err
	}
	if _, err := s.g.Check(t.Subject, b); err != nil {
		return Event{}, fmt.Errorf("sample: valid event %d (%s): %w", i, t.Subject, err)
	}
	return Event{Subject: t.Subject, Data: b}, nil
}

// ValidFor returns a valid event of one domain with the identity number i
// (the domain's examples in turn), so that distinct i are distinct events.
func (s *Set) ValidFor(domain string, i int) (Event, error) {
	prefix := "events." + domain + "."
	var own []Event
	for _, t := range s.valid {
		if strings.HasPrefix(t.Subject, prefix) {
			own = append(own, t)
		}
	}
	if len(own) > 0 {
		return s.unique(own[i%len(own)], i)
	}
	return Event{}, fmt.Errorf("sample: no valid %s example", domain)
}

// Invalid returns the i-th invalid example (cycling), with its code. Each
// round after the first appends one more space to the bytes (white space
// after a JSON value changes no code), so distinct i are distinct events:
// a failed event's chain is named by its bytes.
func (s *Set) Invalid(i int) Event {
	e := s.invalid[i%len(s.invalid)]
	if round := i / len(s.invalid); round > 0 {
		e.Data = append(bytes.Clone(e.Data), bytes.Repeat([]byte(" "), round)...)
	}
	return e
}

// Invalids is the number of distinct invalid examples.
func (s *Set) Invalids() int { return len(s.invalid) }

// Unique gives a decoded event of the subject's domain the identity number
// i (its domain's domain.Spec.Unique: its idempotency key and its ordering
// key, e.g. the pharmacy transaction id and lot), so that distinct i are
// distinct business objects: none holds another's replay (per-key order),
// however many copies of an example are published. An event of no
// registered domain is left as it is.
func Unique(doc map[string]any, subject string, i int) {
	if spec, ok := registry.Lookup(registry.DomainOf(subject)); ok && spec.Unique != nil {
		spec.Unique(doc, i)
	}
}
