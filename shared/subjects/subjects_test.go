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
		{"events.fsma.shipping.x", "shipping", "x", true}, // publisher "fsma"
		{Published("müller-söhne", "fsma", "shipping"), "fsma", "shipping", true},
		{"events..fsma.shipping", "", "", false},
		{"ledger.fsma.shipping", "", "", false},
		{"events..shipping", "", "", false},
		{"replay.pharmacy.dispense", "pharmacy", "dispense", true},
		{"replay.pharmacy.dispense.x", "", "", false},
		{"redriven.pharmacy.dispense.pharmacy_ab12.3", "pharmacy", "dispense", true},
		{Redriven("fsma", "shipping", "fsma_00ff", 1), "fsma", "shipping", true},
		{"redriven.pharmacy.dispense", "", "", false},
		{"redriven.pharmacy.dispense.id", "", "", false},
		{"redriven.pharmacy.dispense.id.0", "", "", false},
		{"redriven.pharmacy.dispense.id.01", "", "", false},
		{"redriven.pharmacy.dispense.id.x", "", "", false},
		{"redriven.pharmacy.dispense..1", "", "", false},
		{"redriven..dispense.id.1", "", "", false},
		{"redriven.pharmacy.dispense.id.1.x", "", "", false},
		{"events.pharmacy.dispense.id.1", "", "", false},
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
	if got := DomainOf("events.fsma.x", []string{"fsma"}); got != "fsma" {
		t.Errorf("DomainOf fsma = %q", got)
	}
	if got := DomainOf(Published("fsma", "pharmacy", "x"), []string{"fsma", "pharmacy"}); got != "pharmacy" {
		t.Errorf("DomainOf published = %q", got)
	}
	if got := AsPublished(Published("p", "pharmacy", "dispense")); got != Event("pharmacy", "dispense") {
		t.Errorf("AsPublished = %q", got)
	}
	if got := AsPublished(Redriven("fsma", "x", "fsma_1", 2)); got != Redriven("fsma", "x", "fsma_1", 2) {
		t.Errorf("AsPublished of a replay = %q", got)
	}
	for subject, want := range map[string]string{
		Published("publisher-bw4829137", "pharmacy", "dispense"): "publisher-bw4829137",
		Event("pharmacy", "dispense"):                            "",
		"events.a.b.c.d":                                         "",
		Redriven("fsma", "x", "fsma_1", 2):                       "",
	} {
		if got := PublisherOf(subject); got != want {
			t.Errorf("PublisherOf(%q) = %q, want %q", subject, got, want)
		}
	}
	if got := DomainOf(Redriven("fsma", "x", "fsma_1", 2), []string{"fsma"}); got != "fsma" {
		t.Errorf("DomainOf redriven = %q", got)
	}
}

// TestReplaySubjects: both replay prefixes, and only they, are replay
// subjects; Redriven builds the 5-token form.
func TestReplaySubjects(t *testing.T) {
	for _, tc := range []struct {
		name, subject string
		replay        bool
	}{
		{"replay", Replay("pharmacy", "dispense"), true},
		{"redriven", Redriven("pharmacy", "dispense", "pharmacy_ab", 1), true},
		{"event", Event("pharmacy", "dispense"), false},
		{"lookalike", "redrivenx.pharmacy.dispense.a.1", false},
		{"ledger", "ledger.pharmacy.k", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsReplay(tc.subject); got != tc.replay {
				t.Errorf("IsReplay(%q) = %v", tc.subject, got)
			}
		})
	}
	if got, want := Redriven("pharmacy", "dispense", "pharmacy_ab", 12), "redriven.pharmacy.dispense.pharmacy_ab.12"; got != want {
		t.Errorf("Redriven = %q, want %q", got, want)
	}
}

func TestValidToken(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"pharmacy_0a1b", true}, {"a-b", true}, {"", false}, {"a.b", false}, {"*", false}, {">", false},
		{"a*", false}, {"a b", false}, {"a\tb", false}, {"a\x00", false},
	} {
		if got := ValidToken(tc.s); got != tc.ok {
			t.Errorf("ValidToken(%q) = %v", tc.s, got)
		}
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
