package registry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
)

// The registry is the one list of domains: every other list (the gate's
// checkers, request validation, dlqctl's flags, retention) derives from
// it. A subject names its domain after "events." (and after the
// publisher's token the server writes into a stored subject).
func Example() {
	fmt.Println(registry.Names()[:3]) // and any domain added since
	fmt.Println(registry.DomainOf("events.fsma.shipping"))
	fmt.Println(registry.DomainOf("events.publisher-sup-00417.fsma.shipping"))
	fmt.Println(registry.DomainOf("events.recall.initiated"), registry.Known("recall"))
	err := registry.Check("recall", false) // "unknown domain: must be one of pharmacy, dscsa, fsma"
	fmt.Println(errors.Is(err, registry.ErrUnknownDomain))
	// Output:
	// [pharmacy dscsa fsma]
	// fsma
	// fsma
	// unknown false
	// true
}

// Lookup returns a domain's Spec: its rules (Checker), keys, party and
// retention. The validator decodes an event with json.Number for numbers,
// checks its JSON Schema, then calls the domain's Checker as here.
func ExampleLookup() {
	spec, ok := registry.Lookup("fsma")
	fmt.Println(spec.Title, ok)
	fmt.Println(spec.Retention == 2*domain.Year, spec.RetentionRule)

	raw, err := os.ReadFile("../../../schemas/testdata/fsma/valid/cooling-gln.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc domain.Doc
	if err := dec.Decode(&doc); err != nil {
		fmt.Println(err)
		return
	}
	eventType, err := spec.Checker.EventType(doc)
	if err != nil {
		fmt.Println(err)
		return
	}
	env, err := spec.Checker.Check(eventType, doc)
	fmt.Println(eventType, env.PartyID, env.EventTime.Format("2006-01-02T15:04:05Z07:00"), err)
	fmt.Println(env.IdempotencyKey == spec.Checker.Identify(doc).IdempotencyKey)
	// Output:
	// FSMA 204 (food traceability) true
	// true 21 CFR 1.1455(c)
	// cooling SUP-00417 2025-03-12T17:20:00Z <nil>
	// true
}
