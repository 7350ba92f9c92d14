package record

import "testing"

// benchRecord is a typical first record: 1 KB JSON payload, headers, two
// attempts, envelope fields.
func benchRecord() Record {
	return FromFailure(testFailure(), t0)
}

func BenchmarkSeal(b *testing.B) {
	r := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		if err := Seal(&r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifySeal(b *testing.B) {
	r := benchRecord()
	if err := Seal(&r); err != nil {
		b.Fatal(err)
	}
	raw, err := Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if err := VerifySeal(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChainVerifierAdd(b *testing.B) {
	r := benchRecord()
	if err := Seal(&r); err != nil {
		b.Fatal(err)
	}
	raw, err := Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var v ChainVerifier
		v.Add(1, raw)
	}
}

func BenchmarkParse(b *testing.B) {
	r := benchRecord()
	raw, err := SealMarshal(&r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSealMarshal(b *testing.B) {
	r := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		c := r
		if _, err := SealMarshal(&c); err != nil {
			b.Fatal(err)
		}
	}
}
