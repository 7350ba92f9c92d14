package dscsa_test

import (
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/gate"
)

// TestSheetColumns: the dscsa sheet's row of a pallet shipment, a packing
// aggregation and an event the rules refused holds its keys (SSCC, GTIN
// and serial), its parent ID, child count and children, and its business
// transactions with their types as bare CBV words, every cell in a column.
func TestSheetColumns(t *testing.T) {
	const withBTs = `{"type":"ObjectEvent","action":"OBSERVE","bizStep":"urn:epcglobal:cbv:bizstep:shipping","eventTime":"2026-11-03T06:12:40-05:00",
		"epcList":["urn:epc:id:sscc:0304094.0000001234","https://id.gs1.org/01/00304094888200/21/SN%26%3C1%3E"],
		"bizTransactionList":[{"type":"urn:epcglobal:cbv:btt:po","bizTransaction":"urn:epcglobal:cbv:bt:0860001234565:PO-2026 & <Müller>"},
			{"type":"https://ref.gs1.org/cbv/BTT-desadv","bizTransaction":"urn:epcglobal:cbv:bt:0304094000019:ASN-7"},
			{"bizTransaction":"INV-\"陈伟\"-1"}]}`
	tests := []struct {
		name  string
		event string
		want  map[string]any
		empty []string
	}{
		{"pallet shipment with business transactions", withBTs, map[string]any{
			"sscc": "003040940000012346", "gtin": "00304094888200", "serial": "SN&<1>", "epc_count": int64(2),
			"business_step": "shipping", "event_time": time.Date(2026, 11, 3, 11, 12, 40, 0, time.UTC),
			"business_transactions": "po: urn:epcglobal:cbv:bt:0860001234565:PO-2026 & <Müller>\ndesadv: urn:epcglobal:cbv:bt:0304094000019:ASN-7\nINV-\"陈伟\"-1",
		}, []string{"parent_id", "child_count", "child_epcs"}},
		{"packing cases onto a pallet", packing, map[string]any{
			"parent_id": "303040940000098716", "child_count": int64(2), "gtin": "50304094888205", "serial": "CASE/0002",
			"child_epcs": "urn:epc:id:sgtin:0304094.588820.CASE%2F0002\nurn:epc:id:sscc:0304094.1000001234",
		}, []string{"epc_count", "epc_list", "business_transactions"}},
		{"unpacking all of a pallet", `{"type":"AggregationEvent","action":"DELETE","bizStep":"unpacking","eventTime":"2026-11-04T08:00:00Z",
			"parentID":"urn:epc:id:sscc:0304094.1000001234"}`, map[string]any{"parent_id": "103040940000012343", "child_count": int64(0)}, []string{"child_epcs"}},
		{"refused: a GTIN with a bad check digit keeps its lot, parent as written", `{"type":"AggregationEvent","action":"ADD","bizStep":"packing",
			"eventTime":"2026-11-02T21:48:03Z","parentID":"https://id.gs1.org/00/303040940000098717",
			"childEPCs":["https://id.gs1.org/01/00304094888209/21/SN-42"]}`, map[string]any{
			"parent_id": "https://id.gs1.org/00/303040940000098717", "child_count": int64(1)}, []string{"gtin", "sscc"}},
		{"refused commissioning keeps its lot", badCheck, map[string]any{"lot": `L&24<B>017 "Ü"`, "epc_count": int64(2)}, []string{"gtin", "expiry"}},
	}
	spec := dscsa.Spec()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := gate.Decode([]byte(tt.event))
			if err != nil {
				t.Fatal(err)
			}
			sh := spec.Sheet()
			row := sh.Row(doc, "")
			cols := map[string]bool{}
			for _, c := range sh.Columns() {
				cols[c.Name] = true
			}
			for k := range row {
				if !cols[k] {
					t.Errorf("cell %s outside the columns", k)
				}
			}
			for k, v := range tt.want {
				if row[k] != v {
					t.Errorf("%s = %#v, want %#v", k, row[k], v)
				}
			}
			for _, k := range tt.empty {
				if v, ok := row[k]; ok {
					t.Errorf("%s = %#v, want empty", k, v)
				}
			}
		})
	}
}
