// Package sample builds realistic events for demos and benchmarks from the
// example files in schemas/testdata: valid events of every domain, each given
// a distinct identity (so each commits under its own idempotency key), and
// the invalid examples, each with the exact error code its file name states.
package sample

import (
	"strconv"

	"bytes"
	"encoding/json"
	"fmt"
	"github.com/deadletter/deadletter/shared/gs1"
	"strings"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
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
func (s *Set) Valid(i int) (Event, error) {
	t := s.valid[i%len(s.valid)]
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

// ValidFor returns a valid event of one domain with the identity number i.
func (s *Set) ValidFor(domain string, i int) (Event, error) {
	prefix := "events." + domain + "."
	for j := range len(s.valid) {
		if strings.HasPrefix(s.valid[(i+j)%len(s.valid)].Subject, prefix) {
			return s.Valid(i + j)
		}
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
// i: its idempotency key (the pharmacy transaction id, the DSCSA eventID,
// the FSMA reference document number) and its ordering key (the pharmacy
// lot, the DSCSA serial numbers, the FSMA traceability lot code), so that
// distinct i are distinct business objects: none holds another's replay
// (per-key order), however many copies of an example are published.
func Unique(doc map[string]any, subject string, i int) {
	id := fmt.Sprintf("SAMPLE-%09d", i)
	switch registry.DomainOf(subject) {
	case pharmacy.Name:
		doc["transaction_id"] = id
		doc["lot"] = id
	case dscsa.Name:
		doc["eventID"] = fmt.Sprintf("urn:uuid:00000000-0000-4000-8000-%012d", i)
		for _, field := range []string{"epcList", "childEPCs"} {
			if list, ok := doc[field].([]any); ok {
				for k, v := range list {
					if epc, ok := v.(string); ok {
						list[k] = withSerial(epc, fmt.Sprintf("S%09dE%d", i, k))
					}
				}
			}
		}
		if parent, ok := doc["parentID"].(string); ok {
			doc["parentID"] = withContainer(withSerial(parent, fmt.Sprintf("P%09d", i)), i)
		}
	case fsma.Name:
		doc["traceability_lot_code"] = id
		if ref, ok := doc["reference_document"].(map[string]any); ok {
			ref["number"] = id
		}
	}
}

// withSerial replaces the serial number of an SGTIN URN (its last
// component) or of a GS1 Digital Link (the value of AI 21).
func withSerial(epc, serial string) string {
	if j := strings.Index(epc, "/21/"); j >= 0 {
		rest := epc[j+len("/21/"):]
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		return epc[:j+len("/21/")] + serial + rest[end:]
	}
	if strings.HasPrefix(strings.ToLower(epc), "urn:epc:id:sgtin:") {
		if j := strings.LastIndexByte(epc, '.'); j >= 0 {
			return epc[:j+1] + serial
		}
	}
	return epc
}

// withContainer gives an SSCC (URN or GS1 Digital Link) the serial
// reference i, in its own width, and a Digital Link its check digit again;
// any other identifier is returned as it is.
func withContainer(id string, i int) string {
	if j := strings.LastIndexByte(id, '.'); j >= 0 && strings.HasPrefix(strings.ToLower(id), "urn:epc:id:sscc:") {
		return id[:j+1] + lastDigits(id[j+1:], i)
	}
	if j := strings.Index(id, "/00/"); j >= 0 && len(id) >= j+4+18 {
		sscc := id[j+4 : j+4+18]
		body := sscc[:1] + lastDigits(sscc[1:17], i)
		return id[:j+4] + body + string(gs1.CheckDigit(body)) + id[j+4+18:]
	}
	return id
}

// lastDigits replaces the last digits of s by i (as many as i needs, at
// most len(s)), keeping the width of s.
func lastDigits(s string, i int) string {
	d := strconv.Itoa(i)
	if len(d) > len(s) {
		d = d[len(d)-len(s):]
	}
	return s[:len(s)-len(d)] + d
}
