package sample

import (
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/gate"
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
