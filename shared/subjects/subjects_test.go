package subjects

import "testing"

func TestParseEvent(t *testing.T) {
	tests := []struct {
		subject, domain, typ string
		ok                   bool
	}{
		{"events.pharmacy.dispense", "pharmacy", "dispense", true},
		{"events.dscsa.shipping", "dscsa", "shipping", true},
		{"events.fsma", "", "", false},
		{"events.fsma.shipping.x", "", "", false},
		{"ledger.fsma.shipping", "", "", false},
		{"events..shipping", "", "", false},
	}
	for _, tt := range tests {
		d, typ, ok := ParseEvent(tt.subject)
		if d != tt.domain || typ != tt.typ || ok != tt.ok {
			t.Errorf("ParseEvent(%q) = %q, %q, %v", tt.subject, d, typ, ok)
		}
	}
	if got := DomainOf("events.widgets.x", []string{"fsma"}); got != UnknownDomain {
		t.Errorf("DomainOf unknown = %q", got)
	}
	if got := DomainOf("events.fsma.x.y", []string{"fsma"}); got != "fsma" {
		t.Errorf("DomainOf fsma = %q", got)
	}
}

// TestAuditAccessOneToken: a user name becomes one subject token of
// audit.access.<user>, so a name with a dot, a space or a wildcard never
// adds a token, matches other users' subjects or fails the publish.
func TestAuditAccessOneToken(t *testing.T) {
	for _, tc := range []struct{ user, want string }{
		{"alice", "audit.access.alice"},
		{"alice.smith", "audit.access.alice_smith"},
		{"alice@example.com", "audit.access.alice_example_com"},
		{"*", "audit.access._"},
		{">", "audit.access._"},
		{"a b", "audit.access.a_b"},
		{"", "audit.access._"},
		{"é", "audit.access.__"},
		{"op-1_x", "audit.access.op-1_x"},
	} {
		if got := AuditAccess(tc.user); got != tc.want {
			t.Errorf("AuditAccess(%q) = %q, want %q", tc.user, got, tc.want)
		}
	}
}
