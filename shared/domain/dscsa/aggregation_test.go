package dscsa_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
)

// TestAggregationEnvelope checks the envelope of each example
// AggregationEvent: ordered by its container, identified by parent and
// first child, grouped by the owning party.
func TestAggregationEnvelope(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name, file, eventType, keySource, ordering, party string
		identifiers                                       map[string]string
	}{
		{
			name: "cases packed onto an SSCC pallet", file: "valid/packing-cases-into-sscc-pallet.json",
			eventType: "packing", keySource: "eventID", ordering: "006141411234567890", party: "0614141007776",
			identifiers: map[string]string{
				"parent_id": "006141411234567890", "parent_type": "sscc", "child_count": "3",
				"gtin": "50614141123457", "serial": "CASE-0001",
				"read_point": "0614141007776", "biz_location": "0614141007776",
			},
		},
		{
			name: "items packed into an SGTIN case", file: "valid/packing-items-into-sgtin-case.json",
			eventType: "packing", ordering: "50614141123457.CASE-0001",
			identifiers: map[string]string{
				"parent_id": "50614141123457.CASE-0001", "parent_type": "sgtin", "child_count": "3",
				"gtin": "00614141123452", "serial": "10016550749981", "read_point": "0614141007776",
			},
		},
		{
			name: "pallet shipped, Digital Link SSCC, owning parties", file: "valid/shipping-sscc-pallet-observe.json",
			eventType: "shipping", ordering: "006141411234567890", party: "0614141000005",
			identifiers: map[string]string{
				"parent_id": "006141411234567890", "parent_type": "sscc", "child_count": "3",
				"gtin": "50614141123457", "serial": "CASE-0001", "read_point": "0614141007776",
			},
		},
		{
			name: "pallet received at +01:00", file: "valid/receiving-sscc-pallet.json",
			eventType: "receiving", keySource: "eventID", ordering: "006141411234567890", party: "0614141000005",
			identifiers: map[string]string{
				"parent_id": "006141411234567890", "parent_type": "sscc", "child_count": "3",
				"gtin": "50614141123457", "serial": "CASE-0001",
				"read_point": "0860001234565", "biz_location": "0860001234565",
			},
		},
		{
			name: "pallet unpacked, all children", file: "valid/unpacking-sscc-pallet-all-children.json",
			eventType: "unpacking", ordering: "006141411234567890",
			identifiers: map[string]string{
				"parent_id": "006141411234567890", "parent_type": "sscc", "child_count": "0",
				"read_point": "0860001234565",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := fileData(t, tt.file)
			env, err := g.Check(subjectFor(data), data)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			checkEnvelope(t, env)
			if env.EventType != tt.eventType || env.OrderingKey != tt.ordering || env.PartyID != tt.party {
				t.Errorf("event type, ordering, party = %q, %q, %q; want %q, %q, %q",
					env.EventType, env.OrderingKey, env.PartyID, tt.eventType, tt.ordering, tt.party)
			}
			if tt.keySource != "" && env.KeySource != tt.keySource {
				t.Errorf("KeySource = %q, want %q", env.KeySource, tt.keySource)
			}
			if !maps.Equal(env.Identifiers, tt.identifiers) {
				t.Errorf("Identifiers = %v, want %v", env.Identifiers, tt.identifiers)
			}
		})
	}
}

// TestAggregationLifeOrdered: the packing, shipping, receiving and unpacking
// of one pallet share an ordering key, so a redrive replays them in event
// time order (never an unpack before its pack).
func TestAggregationLifeOrdered(t *testing.T) {
	g := newGate(t)
	var keys []string
	var last time.Time
	for _, f := range []string{"packing-cases-into-sscc-pallet.json", "shipping-sscc-pallet-observe.json",
		"receiving-sscc-pallet.json", "unpacking-sscc-pallet-all-children.json"} {
		data := fileData(t, "valid/"+f)
		env, err := g.Check(subjectFor(data), data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		keys = append(keys, env.OrderingKey)
		if !env.EventTime.After(last) {
			t.Errorf("%s: event time %v not after %v", f, env.EventTime, last)
		}
		last = env.EventTime
	}
	for _, k := range keys[1:] {
		if k != keys[0] {
			t.Fatalf("ordering keys %v differ", keys)
		}
	}
}

// TestUnsupportedEventType: every other EPCIS type is refused by name,
// before the schema (even a body the schema would refuse), and an unknown
// type is quoted as printable ASCII, cut short.
func TestUnsupportedEventType(t *testing.T) {
	g := newGate(t)
	tests := []struct {
		name, typ, wantInDetail string
	}{
		{"transformation", `"TransformationEvent"`, "TransformationEvent"},
		{"transaction", `"TransactionEvent"`, "TransactionEvent"},
		{"association", `"AssociationEvent"`, "AssociationEvent"},
		{"EPCIS 1.x quantity", `"QuantityEvent"`, "QuantityEvent"},
		{"document", `"EPCISDocument"`, "EPCISDocument"},
		{"unknown with markup and non-ASCII", `"Lieferschein <Müller & Söhne>"`, `"Lieferschein <M\u00fcller & S\u00f6hne>"`},
		{"unknown and long", `"` + strings.Repeat("X", 200) + `"`, `"` + strings.Repeat("X", 64) + `"`},
		{"empty", `""`, `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// action "observe" would violate the schema's enum.
			doc := `{"type": ` + tt.typ + `, "action": "observe", "bizStep": "shipping"}`
			_, err := g.Check("events.dscsa.shipping", []byte(doc))
			if codes.Of(err) != dscsa.UnsupportedEventType {
				t.Fatalf("code = %q (%v), want UNSUPPORTED_EVENT_TYPE", codes.Of(err), err)
			}
			d := codes.DetailOf(err)
			if !strings.Contains(d, tt.wantInDetail) {
				t.Errorf("detail %q does not name %s", d, tt.wantInDetail)
			}
			for _, r := range d {
				if r < 0x20 || r > 0x7e {
					t.Fatalf("detail %q is not printable ASCII", d)
				}
			}
			if len(d) > 200 {
				t.Errorf("detail is %d bytes", len(d))
			}
		})
	}
}

// TestAggregationKey: without an eventID, the key does not depend on the
// children's order or notation, and does on the parent and the children.
func TestAggregationKey(t *testing.T) {
	g := newGate(t)
	base := string(fileData(t, "valid/shipping-sscc-pallet-observe.json"))
	keyOf := func(doc string) string {
		t.Helper()
		env, err := g.Check(subjectFor([]byte(doc)), []byte(doc))
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return env.IdempotencyKey
	}
	want := keyOf(base)
	r := strings.NewReplacer
	tests := []struct {
		name string
		edit *strings.Replacer
		same bool
	}{
		{"children reordered", r(`"urn:epc:id:sgtin:0614141.512345.CASE-0001",`, ``,
			`"urn:epc:id:sgtin:0614141.512345.CASE-0003"`, `"urn:epc:id:sgtin:0614141.512345.CASE-0003", "urn:epc:id:sgtin:0614141.512345.CASE-0001"`), true},
		{"parent as SSCC URN", r(`"https://id.gs1.org/00/006141411234567890"`, `"urn:epc:id:sscc:0614141.0123456789"`), true},
		{"another pallet", r(`"https://id.gs1.org/00/006141411234567890"`, `"urn:epc:id:sscc:0614141.1123456780"`), false},
		{"one case fewer", r(`"urn:epc:id:sgtin:0614141.512345.CASE-0001",`, ``), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.edit.Replace(base)
			if doc == base {
				t.Fatal("edit changed nothing")
			}
			if got := keyOf(doc) == want; got != tt.same {
				t.Errorf("same key = %v, want %v", got, tt.same)
			}
		})
	}
}

// TestAggregationIdentify: a failed aggregation is still ordered by its
// valid container, and an ObjectEvent-only rule never applies to it.
func TestAggregationIdentify(t *testing.T) {
	g := newGate(t)
	for _, tt := range []struct {
		name, file, ordering string
	}{
		{"bad child, valid pallet", "invalid/GTIN_CHECK_DIGIT_FAILED--child-digital-link.json", "006141411234567890"},
		{"bad pallet", "invalid/INVALID_PARENT_ID--sscc-digital-link-check-digit.json", ""},
		{"no parent", "invalid/INVALID_PARENT_ID--add-without-parent.json", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := fileData(t, tt.file)
			id := g.Identify(subjectFor(data), data)
			if id.OrderingKey != tt.ordering || id.Domain != dscsa.Name || !id.Partial {
				t.Errorf("Identify = %+v, want ordering %q", id, tt.ordering)
			}
		})
	}
}

// TestParentKinds: a parentID is read by its first primary key, so an
// SGTIN case whose serial is "00" is not taken for an SSCC.
func TestParentKinds(t *testing.T) {
	g := newGate(t)
	base := string(fileData(t, "valid/packing-cases-into-sscc-pallet.json"))
	for _, tt := range []struct{ parent, ordering, kind string }{
		{"https://id.gs1.org/01/50614141123457/21/00", "50614141123457.00", "sgtin"},
		{"https://example.com/00/006141411234567890", "006141411234567890", "sscc"},
		{"https://example.com/shop/01/50614141123457/10/L1/21/C%2F1", "50614141123457.C/1", "sgtin"},
	} {
		doc := strings.Replace(base, `"urn:epc:id:sscc:0614141.0123456789"`, `"`+tt.parent+`"`, 1)
		env, err := g.Check("events.dscsa.packing", []byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", tt.parent, err)
		}
		if env.OrderingKey != tt.ordering || env.Identifiers["parent_type"] != tt.kind {
			t.Errorf("%s: ordering %q, kind %q", tt.parent, env.OrderingKey, env.Identifiers["parent_type"])
		}
	}
}
