package sample

import (
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

func TestSamples(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for i := range 200 {
		e, err := s.Valid(i)
		if err != nil {
			t.Fatal(err)
		}
		env, err := g.Check(e.Subject, e.Data)
		if err != nil {
			t.Fatalf("valid sample %d: %v", i, err)
		}
		if keys[env.IdempotencyKey] {
			t.Fatalf("sample %d repeats a key", i)
		}
		keys[env.IdempotencyKey] = true
	}
	if s.Invalids() < 50 {
		t.Errorf("only %d invalid samples", s.Invalids())
	}
	seen := map[string]bool{}
	for i := range 3 * s.Invalids() {
		e := s.Invalid(i)
		if _, err := g.Check(e.Subject, e.Data); codes.Of(err) != e.Code {
			t.Errorf("invalid sample %d: code %s, want %s", i, codes.Of(err), e.Code)
		}
		if id := e.Subject + "\x00" + string(e.Data); seen[id] {
			t.Errorf("invalid sample %d repeats an earlier one's bytes (one chain for both)", i)
		} else {
			seen[id] = true
		}
	}
}

// TestValidOrderingKeysDistinct: distinct identity numbers give distinct
// ordering keys, so no sample holds another's replay.
func TestValidOrderingKeysDistinct(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i := range 300 {
		e, err := s.Valid(i)
		if err != nil {
			t.Fatal(err)
		}
		env, err := g.Check(e.Subject, e.Data)
		if err != nil {
			t.Fatal(err)
		}
		k := env.Domain + " " + env.OrderingKey
		if j, ok := seen[k]; ok {
			t.Fatalf("samples %d and %d share the ordering key %s", j, i, k)
		}
		seen[k] = i
	}
}

// TestValidForDistinct: consecutive identity numbers of one domain are
// distinct events (distinct idempotency keys), in every domain.
func TestValidForDistinct(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range registry.Names() {
		t.Run(d, func(t *testing.T) {
			keys := map[string]int{}
			for i := range 50 {
				e, err := s.ValidFor(d, i)
				if err != nil {
					t.Fatal(err)
				}
				env, err := g.Check(e.Subject, e.Data)
				if err != nil || env.Domain != d {
					t.Fatalf("ValidFor(%s, %d): domain %q, %v", d, i, env.Domain, err)
				}
				if j, ok := keys[env.IdempotencyKey]; ok {
					t.Fatalf("ValidFor(%s, %d) is ValidFor(%s, %d) again", d, i, d, j)
				}
				keys[env.IdempotencyKey] = i
			}
		})
	}
}

// TestDocument: a sample document reads as n events, the valid ones pass
// the gate with distinct keys, the bad ones fail.
func TestDocument(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Document("SHIP-1", 100, 50, map[int]bool{7: true, 30: true})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := document.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Events) != 50 || doc.Sender != DocumentSender || doc.Receiver != DocumentReceiver || doc.ID != "SHIP-1" {
		t.Fatalf("%d events, info %+v", len(doc.Events), doc.Info)
	}
	keys := map[string]bool{}
	for i, ev := range doc.Events {
		m, err := gate.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		typ, _ := (dscsa.Checker{}).EventType(m)
		env, err := s.g.Check(subjects.Event(dscsa.Name, typ), ev)
		if bad := i == 7 || i == 30; bad != (err != nil) {
			t.Errorf("event %d: %v", i, err)
		}
		if err == nil {
			if keys[env.IdempotencyKey] {
				t.Errorf("event %d: key %s repeated", i, env.IdempotencyKey)
			}
			keys[env.IdempotencyKey] = true
		}
	}
}
