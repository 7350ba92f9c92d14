package exportsheet

import (
	"testing"
)

// BenchmarkEPCISConvert: one event of an EPCIS 1.2 XML shipment (CBV 1.2
// URNs, converted and re-encoded) and one already in EPCIS 2.0 form
// (checked, kept byte for byte) through the export's conversion.
func BenchmarkEPCISConvert(b *testing.B) {
	x, err := newEPCIS20()
	if err != nil {
		b.Fatal(err)
	}
	xmlEvents := readEvents(b, "testdata/returns-1.2.xml")
	jsonEvents := readEvents(b, "../domain/dscsa/document/testdata/shipment.json")
	for _, bc := range []struct {
		name string
		ev   []byte
	}{{"from 1.2 XML", xmlEvents[1]}, {"2.0 JSON", jsonEvents[0]}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := x.convert(bc.ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
