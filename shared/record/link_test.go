package record

import (
	"fmt"
	"testing"
)

// TestAddLinkEqualsAdd requires AddLink(ReadLink(raw)) to find exactly what
// Add(raw) finds, record by record, including forks, gaps and garbage.
func TestAddLinkEqualsAdd(t *testing.T) {
	recs, raws := fiveChain(t)
	_, other := otherChain(t, ClassValidation, plain(KindResolved)...)
	tests := []struct {
		name string
		raws [][]byte
	}{
		{"intact chains interleaved", [][]byte{raws[0], other[0], raws[1], other[1], raws[2], raws[3], raws[4]}},
		{"fork", [][]byte{raws[0], raws[1], forkOf(t, recs, 1), raws[2]}},
		{"gap", pick(raws, 0, 2, 3)},
		{"unparseable and altered", [][]byte{raws[0], []byte(`{"dlq_id":`), append([]byte(nil), raws[1][:len(raws[1])-3]...)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a, b ChainVerifier
			for i, raw := range tt.raws {
				want := a.Add(uint64(i+1), raw)
				got := b.AddLink(uint64(i+1), ReadLink(raw))
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("record %d: AddLink %v, Add %v", i, got, want)
				}
			}
		})
	}
}
