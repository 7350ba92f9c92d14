package dscsa_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
)

// Identifiers of one shipment, as a distributor's EPCIS names them: the
// pallets' SSCCs (URN and Digital Link), a case SGTIN and an item SGTIN of
// NDC 0409-4888-20.
const (
	palletURN    = "urn:epc:id:sscc:0304094.0000001234" // SSCC 003040940000012346
	pallet       = "003040940000012346"
	pallet2DL    = "https://id.gs1.org/00/303040940000098716?17=281231&x=<Müller>"
	pallet2      = "303040940000098716"
	caseURN      = "urn:epc:id:sgtin:0304094.588820.CASE%2F0001" // GTIN 50304094888205
	itemDL       = "https://id.gs1.org/01/00304094888200/21/SN%26%3C1%3E"
	itemGTIN     = "00304094888200"
	itemSerial   = "SN&<1>"
	itemBadCheck = "https://id.gs1.org/01/00304094888209/21/SN-42"
)

// keyEvent is an EPCIS event naming keys: an ObjectEvent with epcList, or
// an AggregationEvent with parentID and childEPCs.
func keyEvent(t *testing.T, typ, action, bizStep, parent string, list ...string) []byte {
	t.Helper()
	ev := map[string]any{
		"@context":  []any{"https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"},
		"type":      typ,
		"eventTime": "2026-11-03T06:12:40.500-05:00", "eventTimeZoneOffset": "-05:00",
		"action": action, "bizStep": bizStep,
		"readPoint":   map[string]any{"id": "urn:epc:id:sgln:0304094.00001.0"},
		"example:who": "Müller & Söhne <Großhandel> \"B\" 陈伟",
	}
	if typ == "AggregationEvent" {
		if parent != "" {
			ev["parentID"] = parent
		}
		ev["childEPCs"] = list
	} else {
		ev["epcList"] = list
	}
	if bizStep == "commissioning" {
		ev["ilmd"] = map[string]any{"cbvmda:lotNumber": "L&24<B>017", "cbvmda:itemExpirationDate": "2028-01-31"}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeysByBizStep: an EPC list may name SSCCs beside SGTINs (URN and
// Digital Link, check digit verified) in the business steps that move,
// hold or check goods, at any packing level; commissioning and the other
// steps of serialized items take SGTINs only (KEY_NOT_FOR_BIZSTEP); any
// other GS1 key is UNSUPPORTED_GS1_KEY naming it. A container event is
// ordered by its container.
func TestKeysByBizStep(t *testing.T) {
	g := newGate(t)
	const obj, agg = "ObjectEvent", "AggregationEvent"
	tests := []struct {
		name                         string
		typ, action, bizStep, parent string
		list                         []string
		want                         codes.Code
		ordering                     string            // valid events: the ordering key
		ids                          map[string]string // valid events: identifiers it must hold
		detailHas, detailLacks       string
	}{
		{name: "shipping pallets by URN", typ: obj, action: "OBSERVE", bizStep: "shipping", list: []string{palletURN},
			ordering: pallet, ids: map[string]string{"sscc": pallet, "epc_count": "1"}},
		{name: "shipping a pallet by Digital Link", typ: obj, action: "OBSERVE", bizStep: "shipping", list: []string{pallet2DL},
			ordering: pallet2, ids: map[string]string{"sscc": pallet2}},
		{name: "shipping a loose item before a pallet: ordered by the pallet", typ: obj, action: "OBSERVE", bizStep: "shipping",
			list: []string{itemDL, pallet2DL, palletURN}, ordering: pallet2,
			ids: map[string]string{"sscc": pallet2, "gtin": itemGTIN, "serial": itemSerial, "epc_count": "3"}},
		{name: "receiving pallets", typ: obj, action: "OBSERVE", bizStep: "urn:epcglobal:cbv:bizstep:receiving", list: []string{palletURN, pallet2DL}, ordering: pallet},
		{name: "departing", typ: obj, action: "OBSERVE", bizStep: "departing", list: []string{palletURN}, ordering: pallet},
		{name: "arriving", typ: obj, action: "OBSERVE", bizStep: "https://ref.gs1.org/cbv/BizStep-arriving", list: []string{palletURN}, ordering: pallet},
		{name: "storing", typ: obj, action: "OBSERVE", bizStep: "storing", list: []string{palletURN}, ordering: pallet},
		{name: "items only keep their first item as the ordering key", typ: obj, action: "OBSERVE", bizStep: "shipping",
			list: []string{itemDL, caseURN}, ordering: itemGTIN + "." + itemSerial},
		{name: "packing cases onto a pallet", typ: agg, action: "ADD", bizStep: "packing", parent: pallet2DL,
			list: []string{caseURN, palletURN}, ordering: pallet2, ids: map[string]string{"parent_id": pallet2, "parent_type": "sscc", "child_count": "2", "gtin": "50304094888205"}},
		{name: "unpacking a pallet of totes", typ: agg, action: "DELETE", bizStep: "unpacking", parent: palletURN,
			list: []string{pallet2DL}, ordering: pallet},
		{name: "shipping an aggregation of pallets without parent", typ: agg, action: "OBSERVE", bizStep: "shipping",
			list: []string{caseURN, pallet2DL}, ordering: pallet2},
		{name: "commissioning an SSCC", typ: obj, action: "ADD", bizStep: "commissioning", list: []string{palletURN},
			want: dscsa.KeyNotForBizStep, detailHas: "epcList[0]: an SSCC", detailLacks: "must be an SGTIN"},
		{name: "commissioning an SSCC by Digital Link after an item", typ: obj, action: "ADD", bizStep: "commissioning", list: []string{itemDL, pallet2DL},
			want: dscsa.KeyNotForBizStep, detailHas: "epcList[1]"},
		{name: "decommissioning a pallet", typ: obj, action: "DELETE", bizStep: "decommissioning", list: []string{palletURN}, want: dscsa.KeyNotForBizStep},
		{name: "dispensing a pallet", typ: obj, action: "OBSERVE", bizStep: "dispensing", list: []string{palletURN}, want: dscsa.KeyNotForBizStep},
		{name: "packing an SSCC in an ObjectEvent", typ: obj, action: "ADD", bizStep: "packing", list: []string{palletURN},
			want: dscsa.KeyNotForBizStep, detailHas: "AggregationEvent"},
		{name: "commissioning aggregation onto a pallet", typ: agg, action: "ADD", bizStep: "commissioning", parent: palletURN, list: []string{caseURN},
			want: dscsa.KeyNotForBizStep, detailHas: "parentID"},
		{name: "SSCC Digital Link with a bad check digit", typ: obj, action: "OBSERVE", bizStep: "shipping",
			list: []string{"https://id.gs1.org/00/303040940000098717"}, want: dscsa.InvalidEPC, detailHas: "check digit"},
		{name: "SSCC URN of 16 digits", typ: obj, action: "OBSERVE", bizStep: "shipping",
			list: []string{"urn:epc:id:sscc:0304094.000001234"}, want: dscsa.InvalidEPC, detailHas: "17 digits"},
		{name: "SSCC Digital Link of 17 digits", typ: agg, action: "ADD", bizStep: "packing", parent: palletURN,
			list: []string{"https://id.gs1.org/00/30304094000009871"}, want: dscsa.InvalidEPC, detailHas: "18 digits"},
		{name: "an SSCC child is its own parent", typ: agg, action: "ADD", bizStep: "packing", parent: "https://id.gs1.org/00/" + pallet,
			list: []string{caseURN, palletURN}, want: dscsa.InvalidAggregation},
		{name: "a GTIN with a bad check digit", typ: obj, action: "OBSERVE", bizStep: "shipping", list: []string{palletURN, itemBadCheck},
			want: dscsa.GTINCheckDigitFailed},
		{name: "a GRAI (a returnable tote)", typ: obj, action: "OBSERVE", bizStep: "shipping", list: []string{palletURN, "urn:epc:id:grai:0304094.00001.TOTE-7"},
			want: dscsa.UnsupportedGS1Key, detailHas: "a GRAI (a returnable asset)", detailLacks: "must be an SGTIN"},
		{name: "a GRAI by Digital Link", typ: obj, action: "OBSERVE", bizStep: "receiving", list: []string{"https://id.gs1.org/8003/03040940000127TOTE"},
			want: dscsa.UnsupportedGS1Key, detailHas: "GRAI"},
		{name: "a GIAI", typ: obj, action: "OBSERVE", bizStep: "receiving", list: []string{"urn:epc:id:giai:0304094.ASSET-1"},
			want: dscsa.UnsupportedGS1Key, detailHas: "GIAI"},
		{name: "an SGLN as an EPC", typ: obj, action: "OBSERVE", bizStep: "arriving", list: []string{"urn:epc:id:sgln:0304094.00001.0"},
			want: dscsa.UnsupportedGS1Key, detailHas: "readPoint or bizLocation"},
		{name: "an LGTIN class in epcList", typ: obj, action: "OBSERVE", bizStep: "shipping", list: []string{"urn:epc:class:lgtin:0304094.088820.L24"},
			want: dscsa.UnsupportedGS1Key, detailHas: "quantityList"},
		{name: "a GRAI child", typ: agg, action: "ADD", bizStep: "packing", parent: palletURN, list: []string{"urn:epc:id:grai:0304094.00001.TOTE-7"},
			want: dscsa.UnsupportedGS1Key, detailHas: "childEPCs[0]"},
		{name: "a GRAI parent", typ: agg, action: "ADD", bizStep: "packing", parent: "urn:epc:id:grai:0304094.00001.TOTE-7", list: []string{caseURN},
			want: dscsa.InvalidParentID, detailHas: "a GRAI (a returnable asset) is not a container"},
		{name: "an SGTIN tag URN", typ: obj, action: "OBSERVE", bizStep: "shipping", list: []string{"urn:epc:tag:sgtin-96:3.0304094.088820.42"},
			want: dscsa.InvalidEPC, detailHas: "pure identity"},
		{name: "an unknown EPC scheme", typ: obj, action: "OBSERVE", bizStep: "shipping", list: []string{"urn:epc:id:pallet:0304094.1"},
			want: dscsa.InvalidEPC, detailHas: "no EPC scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := keyEvent(t, tt.typ, tt.action, tt.bizStep, tt.parent, tt.list...)
			env, err := g.Check(subjectFor(data), data)
			if got := codes.Of(err); got != tt.want {
				t.Fatalf("code = %q (%v), want %q", got, err, tt.want)
			}
			if err != nil {
				detail := codes.DetailOf(err)
				if !strings.Contains(detail, tt.detailHas) || (tt.detailLacks != "" && strings.Contains(detail, tt.detailLacks)) {
					t.Errorf("detail %q: want it to say %q and not %q", detail, tt.detailHas, tt.detailLacks)
				}
				// A failed event is ordered as a valid one would be when
				// its keys parse.
				if id := g.Identify(subjectFor(data), data); tt.want == dscsa.KeyNotForBizStep && id.OrderingKey == "" {
					t.Errorf("Identify: no ordering key for an event whose keys parse")
				}
				return
			}
			checkEnvelope(t, env)
			if env.OrderingKey != tt.ordering {
				t.Errorf("ordering key %q, want %q", env.OrderingKey, tt.ordering)
			}
			if id := g.Identify(subjectFor(data), data); id.OrderingKey != tt.ordering || id.IdempotencyKey != env.IdempotencyKey {
				t.Errorf("Identify: keys %q, %q; Check's %q, %q", id.OrderingKey, id.IdempotencyKey, tt.ordering, env.IdempotencyKey)
			}
			for k, v := range tt.ids {
				if env.Identifiers[k] != v {
					t.Errorf("identifier %s = %q, want %q (all: %v)", k, env.Identifiers[k], v, env.Identifiers)
				}
			}
		})
	}
}

// TestKeysOfSGTINEventsUnchanged pins the idempotency and ordering keys of
// existing examples as they were derived before epcList took SSCCs: an
// event of serialized items, and an aggregation, keep their keys (the
// LEDGER dedupes a resend by them).
func TestKeysOfSGTINEventsUnchanged(t *testing.T) {
	g := newGate(t)
	for _, tt := range []struct{ file, key, ordering string }{
		{"valid/commissioning-sgtin.json", "dscsa_03e31974d429f944543a7e95a8440059", "00614141123452.10016550749981"},
		{"valid/shipping-percent-encoded-serial.json", "dscsa_8bbcc58cf968be80f269231fda0a40ea", "10614141073464.SN/0042?A"},
		{"valid/shipping-without-context-and-eventid.json", "dscsa_06b00feb4152ac593ab885aa32481f87", "00614141123452.10016550749981"},
		{"valid/packing-cases-into-sscc-pallet.json", "dscsa_01e2dfb767e885483343844f0590e4d2", "006141411234567890"},
		{"valid/receiving-sscc-pallet.json", "dscsa_de37b36a9c64ca235b7b999cb23aefc4", "006141411234567890"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			data := fileData(t, tt.file)
			env, err := g.Check(subjectFor(data), data)
			if err != nil {
				t.Fatal(err)
			}
			if env.IdempotencyKey != tt.key || env.OrderingKey != tt.ordering {
				t.Fatalf("keys %s, %s; want %s, %s", env.IdempotencyKey, env.OrderingKey, tt.key, tt.ordering)
			}
		})
	}
}
