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
