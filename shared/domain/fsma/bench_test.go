package fsma_test

import "testing"

// BenchmarkGateFsma measures a typical event (a shipment by GLN) through
// the whole gate: decode, schema, FSMA rules, envelope.
func BenchmarkGateFsma(b *testing.B) {
	g := newGate(b)
	data := readTestdata(b, "valid/shipping-gln.json")
	const subject = "events.fsma.shipping"
	if _, err := g.Check(subject, data); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := g.Check(subject, data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckerFsma measures the FSMA rules alone on a decoded event.
func BenchmarkCheckerFsma(b *testing.B) {
	doc := decodeMap(b, readTestdata(b, "valid/transformation-three-inputs.json"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := checker.Check("transformation", doc); err != nil {
			b.Fatal(err)
		}
	}
}
