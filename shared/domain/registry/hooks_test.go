package registry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
)

// validDocs decodes a domain's valid examples (numbers as json.Number,
// as the gate decodes them).
func validDocs(t *testing.T, name string) map[string]domain.Doc {
	t.Helper()
	examples, err := schemas.Examples(name)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]domain.Doc{}
	for _, ex := range examples {
		if !ex.Valid {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(ex.Data))
		dec.UseNumber()
		var doc domain.Doc
		if err := dec.Decode(&doc); err != nil {
			continue // an EPCIS document, not an event
		}
		if _, err := dec.Token(); err == nil {
			continue
		}
		docs[ex.Name] = doc
	}
	if len(docs) == 0 {
		t.Fatalf("domain %s has no valid example", name)
	}
	return docs
}

// clone deep-copies a decoded document (Unique edits it in place).
func clone(t *testing.T, doc domain.Doc) domain.Doc {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out domain.Doc
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSpecHooks checks the hooks every registered domain gives the generic
// code (sample, the records list's search, the export's sheet) on its own
// valid examples, so that a new domain's hooks are checked as soon as it
// has its registry line:
//
//   - Unique: distinct identity numbers give distinct idempotency and
//     ordering keys, and the event still passes its domain's rules;
//   - Search: each search field named like an identifier the chain shows
//     (its ordering key's, Search.KeyIdentifiers, and its listed ones)
//     finds the chain by that identifier's value, and another value does
//     not, and so does the chain of its payload's identifiers alone
//     (Search.Identifiers: an event the gate could not read);
//   - Content (when the domain has its own content identity): a
//     lowercase hex SHA-256, the same from the checked envelope
//     (Checked), the same for a copy and another for another event;
//   - Sheet: every cell of a row is in a column of the sheet.
func TestSpecHooks(t *testing.T) {
	for _, s := range registry.All() {
		for file, doc := range validDocs(t, s.Name) {
			t.Run(s.Name+"/"+file, func(t *testing.T) {
				var keys, okeys []string
				for i := range 2 {
					d := clone(t, doc)
					s.Unique(d, 7+i)
					typ, err := s.Checker.EventType(d)
					if err != nil {
						t.Fatal(err)
					}
					env, err := s.Checker.Check(typ, d)
					if err != nil {
						t.Fatalf("Unique(%d) made the example fail its rules: %v", 7+i, err)
					}
					keys, okeys = append(keys, env.IdempotencyKey), append(okeys, env.OrderingKey)
				}
				if keys[0] == keys[1] || okeys[0] == okeys[1] || okeys[0] == "" {
					t.Errorf("Unique: identity numbers 7 and 8 give keys %q and ordering keys %q", keys, okeys)
				}

				typ, _ := s.Checker.EventType(doc)
				env, err := s.Checker.Check(typ, doc)
				if err != nil {
					t.Fatal(err)
				}
				var listed []string
				for _, n := range s.Listed {
					if v := env.Identifiers[n]; v != "" && n != "event_type" {
						listed = append(listed, n, v)
					}
				}
				c := domain.Chain{OrderingKey: env.OrderingKey, PartyID: env.PartyID, IdempotencyKey: env.IdempotencyKey,
					DLQID: env.IdempotencyKey, Listed: listed}
				shown := s.Search.KeyIdentifiers(c.OrderingKey, c.PartyID)
				if len(shown) == 0 {
					t.Errorf("KeyIdentifiers(%q) names nothing", c.OrderingKey)
				}
				for i := 0; i < len(listed); i += 2 {
					shown[listed[i]] = listed[i+1]
				}
				searched := 0
				for _, f := range s.Search.Fields {
					v, ok := shown[f]
					if !ok {
						continue
					}
					searched++
					m, err := s.Search.Parse(map[string]string{f: v})
					if err != nil {
						t.Fatalf("Search.Parse(%s=%q): %v", f, v, err)
					}
					if !m(c) {
						t.Errorf("searching %s=%q does not find the event that shows it", f, v)
					}
					if m, err := s.Search.Parse(map[string]string{f: v + "0"}); err == nil && m(c) {
						t.Errorf("searching %s=%q finds the event that shows %q", f, v+"0", v)
					}
				}
				// The payload route alone (a chain of an event the gate
				// could not read: no ordering key, nothing listed) finds
				// the event by the same identifiers.
				if s.Search.Identifiers == nil && len(s.Search.Fields) > 0 {
					t.Error("Search.Identifiers is nil: a quarantined event is not found by the identifiers of its payload")
				} else if s.Search.Identifiers != nil {
					pc := domain.Chain{DLQID: "x", PayloadIdentifiers: s.Search.Identifiers(doc)}
					for _, f := range s.Search.Fields {
						if v, ok := shown[f]; ok {
							if m, err := s.Search.Parse(map[string]string{f: v}); err != nil || !m(pc) {
								t.Errorf("searching %s=%q does not find the event by its payload's identifiers (%v)", f, v, err)
							}
						}
					}
				}
				if len(s.Search.Fields) > 0 && searched == 0 {
					t.Errorf("no search field (%v) is an identifier the event shows (%v)", s.Search.Fields, slices.Sorted(maps.Keys(shown)))
				}

				if c := s.Content; c != nil {
					h := c.Hash(doc)
					if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
						t.Errorf("Content.Hash = %q, not a lowercase hex SHA-256", h)
					}
					if c.Checked != nil && c.Checked(env, doc) != h {
						t.Error("Content.Checked of the checked envelope is not Content.Hash")
					}
					if c.Hash(clone(t, doc)) != h {
						t.Error("Content.Hash of a copy differs")
					}
					other := clone(t, doc)
					s.Unique(other, 9)
					if c.Hash(other) == h {
						t.Error("Content.Hash does not tell another event (Unique) apart")
					}
				}

				if s.Sheet != nil {
					sh := s.Sheet()
					row := sh.Row(doc, env.EventType)
					cols := map[string]bool{}
					for _, col := range sh.Columns() {
						cols[col.Name] = true
					}
					for k, v := range row {
						if !cols[k] {
							t.Errorf("the sheet's row has a cell %s=%s outside its columns", k, fmt.Sprint(v))
						}
					}
					if len(row) == 0 {
						t.Error("the sheet's row is empty")
					}
				}
			})
		}
	}
}

// TestContentIdentityNames: a domain's own content identity has a name
// that is neither empty nor the canonical JSON's ("jcs", package
// idempotency's default, which a hash recorded without identity is), a
// hash, and earlier identities that are none of these and have their
// hash; two domains never share a name (a recorded identity names its
// rule). A domain without one keeps the canonical JSON.
func TestContentIdentityNames(t *testing.T) {
	seen := map[string]string{}
	for _, s := range registry.All() {
		t.Run(s.Name, func(t *testing.T) {
			c := s.Content
			if c == nil {
				return
			}
			names := []string{c.Name}
			for n := range c.Earlier {
				names = append(names, n)
			}
			for _, n := range names {
				if n == "" || n == "jcs" {
					t.Errorf("content identity named %q", n)
				}
				if other, ok := seen[n]; ok && other != s.Name {
					t.Errorf("content identity %q is also %s's", n, other)
				}
				seen[n] = s.Name
			}
			if c.Hash == nil {
				t.Error("Content.Hash is nil")
			}
			if _, ok := c.Earlier[c.Name]; ok {
				t.Errorf("the current identity %q is listed as an earlier one", c.Name)
			}
			for n, h := range c.Earlier {
				if h == nil {
					t.Errorf("earlier identity %q has no hash", n)
				}
			}
		})
	}
}

// TestSecondPersonHooks: every domain's second-person rule
// (domain.Spec.ReviewCorrection) takes payloads that did not decode (nil)
// without panicking, finds no change in a correction that changes
// nothing, and gives reasons whenever it lists changes; a domain without
// a rule of its own (the "none" default) needs no second person for any
// correction.
func TestSecondPersonHooks(t *testing.T) {
	for _, s := range registry.All() {
		t.Run(s.Name, func(t *testing.T) {
			if r := s.ReviewCorrection(nil, nil); len(r.Changes) > 0 {
				t.Errorf("two payloads that did not decode change %v", r.Changes)
			}
			for file, doc := range validDocs(t, s.Name) {
				same := s.ReviewCorrection(doc, clone(t, doc))
				if len(same.Changes) > 0 {
					t.Errorf("%s: a correction that changes nothing changes %v", file, same.Changes)
				}
				for _, r := range []domain.Review{same, s.ReviewCorrection(nil, doc), s.ReviewCorrection(doc, nil)} {
					if len(r.Changes) > 0 && !r.Needed() {
						t.Errorf("%s: changes %v listed without a reason", file, r.Changes)
					}
					if s.SecondPerson == nil && (r.Needed() || len(r.Changes) > 0) {
						t.Errorf("%s: a domain without a rule asks for a second person: %+v", file, r)
					}
				}
			}
		})
	}
	if r := (domain.Spec{}).ReviewCorrection(domain.Doc{"dea_schedule": "II"}, nil); r.Needed() || r.Changes != nil {
		t.Errorf("the none default = %+v", r)
	}
}
