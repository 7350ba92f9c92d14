package domain_test

import (
	"testing"

	"github.com/deadletter/deadletter/shared/domain"
)

// TestSplitID: a dlq id's domain is what precedes its first "_"; an id
// without both parts is none. A new shape is one row.
func TestSplitID(t *testing.T) {
	for _, tc := range []struct {
		name, id, dom, rest string
		ok                  bool
	}{
		{"a derived key", domain.Key("pharmacy", "Müller & Söhne <Großhandel>"), "pharmacy", domain.Key("pharmacy", "Müller & Söhne <Großhandel>")[len("pharmacy_"):], true},
		{"a caller's key with underscores", "dscsa_Pharmacie_Saint-Étienne_42", "dscsa", "Pharmacie_Saint-Étienne_42", true},
		{"short", "fsma_1", "fsma", "1", true},
		{"no separator", "pharmacy", "", "", false},
		{"no domain", "_abc", "", "", false},
		{"no rest", "pharmacy_", "", "", false},
		{"empty", "", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dom, rest, ok := domain.SplitID(tc.id)
			if dom != tc.dom || rest != tc.rest || ok != tc.ok {
				t.Errorf("SplitID(%q) = %q, %q, %v; want %q, %q, %v", tc.id, dom, rest, ok, tc.dom, tc.rest, tc.ok)
			}
			if got := domain.DomainOfID(tc.id); got != tc.dom {
				t.Errorf("DomainOfID(%q) = %q, want %q", tc.id, got, tc.dom)
			}
		})
	}
}
