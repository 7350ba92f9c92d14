package record

import (
	"bytes"
	"reflect"
	"testing"
)

// found is a problem reduced to what the tests compare.
type found struct {
	Index int
	Kind  string
}

func reduce(ps []Problem) []found {
	var fs []found
	for _, p := range ps {
		fs = append(fs, found{p.Index, p.Kind})
	}
	return fs
}

// fiveChain is an intact chain of five records.
func fiveChain(t *testing.T) ([]Record, [][]byte) {
	return chain(t, ClassValidation, plain(KindCorrected, KindRedriveRequested, KindReplayFailed, KindRedriveRequested)...)
}

// forkOf returns a sealed record that claims the same predecessor and
// index as recs[i] but differs from it.
func forkOf(t *testing.T, recs []Record, i int) []byte {
	r := recs[i]
	r.ErrorDetail = "another branch"
	_, raw := mustSeal(t, r)
	return raw
}

func pick(raws [][]byte, order ...int) [][]byte {
	out := make([][]byte, len(order))
	for i, o := range order {
		out[i] = raws[o]
	}
	return out
}

func TestVerifyChain(t *testing.T) {
	recs, raws := fiveChain(t)
	other, _ := otherChain(t, ClassExhausted, plain(KindRedriveRequested, KindReplayFailed)...)
	// foreign is record 2 of another dlq id, sealed with this chain's links.
	foreign := recs[2]
	foreign.DLQID = other[0].DLQID
	_, foreignRaw := mustSeal(t, foreign)
	tampered := bytes.Replace(raws[2], []byte(`"kind":"redrive_requested"`), []byte(`"kind":"replayed"`), 1)
	// shifted is the chain without record 0, re-indexed from 0 and resealed
	// with its old prev_hash: a forged start.
	shifted := recs[1]
	shifted.Index = 0
	_, shiftedRaw := sealOnly(t, shifted)

	tests := []struct {
		name string
		raws [][]byte
		want []found
	}{
		{"intact chain of 5", raws, nil},
		{"empty", nil, nil},
		{"middle record removed", pick(raws, 0, 1, 3, 4), []found{{2, ProblemIndexGap}, {2, ProblemBrokenPrevHash}}},
		{"last record removed", pick(raws, 0, 1, 2, 3), nil},
		{"first record removed", pick(raws, 1, 2, 3, 4), []found{{0, ProblemIndexGap}, {0, ProblemBrokenPrevHash}}},
		{"forged first record", [][]byte{shiftedRaw}, []found{{0, ProblemBrokenPrevHash}}},
		{"record duplicated", pick(raws, 0, 1, 2, 2, 3, 4), []found{{3, ProblemFork}}},
		{"two records with the same prev_hash, adjacent", [][]byte{raws[0], raws[1], raws[2], forkOf(t, recs, 2), raws[3], raws[4]},
			[]found{{3, ProblemFork}}},
		{"two records with the same prev_hash, apart", [][]byte{raws[0], raws[1], raws[2], raws[3], forkOf(t, recs, 2), raws[4]},
			[]found{{4, ProblemFork}}},
		{"second first record", [][]byte{raws[0], raws[1], forkOf(t, recs, 0)}, []found{{2, ProblemFork}}},
		{"records swapped", pick(raws, 0, 2, 1, 3, 4), []found{
			{1, ProblemIndexGap}, {1, ProblemBrokenPrevHash},
			{2, ProblemIndexGap}, {2, ProblemBrokenPrevHash},
			{3, ProblemIndexGap}, {3, ProblemBrokenPrevHash}}},
		{"record of another dlq id", [][]byte{raws[0], raws[1], foreignRaw, raws[3], raws[4]},
			[]found{{2, ProblemDLQIDMismatch}, {3, ProblemBrokenPrevHash}}},
		{"record edited in place", [][]byte{raws[0], raws[1], tampered, raws[3], raws[4]}, []found{{2, ProblemSealMismatch}}},
		{"unparseable record", [][]byte{raws[0], raws[1], []byte(`{"dlq_id":`), raws[3], raws[4]}, []found{{2, ProblemUnparseable}}},
		{"record without link members", [][]byte{raws[0], []byte(`{"audit_hash":"00"}`)}, []found{{1, ProblemUnparseable}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := VerifyChain(tt.raws)
			if got := reduce(ps); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("VerifyChain = %+v\nwant %+v\nproblems: %+v", got, tt.want, ps)
			}
			for _, p := range ps {
				if p.Seq != 0 || p.Detail == "" {
					t.Errorf("problem %+v: want Seq 0 and a detail", p)
				}
			}
		})
	}
}

// TestChainVerifier feeds the records of two chains interleaved, as an
// auditor reads them from the stream.
func TestChainVerifier(t *testing.T) {
	_, a := fiveChain(t)
	aRecs, _ := fiveChain(t)
	_, b := otherChain(t, ClassExhausted, plain(KindRedriveRequested, KindReplayFailed, KindRedriveRequested, KindReplayed)...)

	type in struct {
		seq uint64
		raw []byte
	}
	interleave := func(as, bs [][]byte) []in {
		var out []in
		for i := 0; i < max(len(as), len(bs)); i++ {
			if i < len(as) {
				out = append(out, in{uint64(len(out) + 1), as[i]})
			}
			if i < len(bs) {
				out = append(out, in{uint64(len(out) + 1), bs[i]})
			}
		}
		return out
	}
	type want struct {
		Seq   uint64
		Index int
		Kind  string
	}
	tests := []struct {
		name   string
		stream []in
		want   []want
	}{
		{"two intact chains", interleave(a, b), nil},
		// a[2] is missing: a[3] is then stream seq 6.
		{"middle record removed", interleave(pick(a, 0, 1, 3, 4), b), []want{{5, 2, ProblemIndexGap}, {5, 2, ProblemBrokenPrevHash}}},
		{"adjacent fork", interleave([][]byte{a[0], a[1], a[2], forkOf(t, aRecs, 2), a[3]}, b),
			[]want{{7, 3, ProblemFork}}},
		// Apart, the fork is not remembered: it shows as a gap and a broken link.
		{"fork apart", interleave([][]byte{a[0], a[1], a[2], a[3], forkOf(t, aRecs, 2)}, b),
			[]want{{9, 4, ProblemIndexGap}, {9, 4, ProblemBrokenPrevHash}}},
		{"swapped", interleave(pick(a, 0, 2, 1, 3, 4), b), []want{
			{3, 1, ProblemIndexGap}, {3, 1, ProblemBrokenPrevHash},
			{5, 2, ProblemIndexGap}, {5, 2, ProblemBrokenPrevHash},
			{7, 3, ProblemIndexGap}, {7, 3, ProblemBrokenPrevHash}}},
		{"unparseable", append(interleave(a, b), in{11, []byte("garbage")}), []want{{11, -1, ProblemUnparseable}}},
		{"seal broken", interleave(a, [][]byte{b[0], bytes.Replace(b[1], []byte(`"index":1`), []byte(`"index":2`), 1), b[2]}),
			// the tampered record now claims index 2, as does the next one
			[]want{{4, 1, ProblemSealMismatch}, {4, 1, ProblemIndexGap}, {6, 2, ProblemFork}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v ChainVerifier
			var got []want
			for _, r := range tt.stream {
				for _, p := range v.Add(r.seq, r.raw) {
					got = append(got, want{p.Seq, p.Index, p.Kind})
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %+v\nwant %+v", got, tt.want)
			}
			if v.Chains() != 2 {
				t.Errorf("Chains = %d, want 2", v.Chains())
			}
		})
	}
}

func TestChainVerifierHead(t *testing.T) {
	recs, raws := fiveChain(t)
	var v ChainVerifier
	if _, _, _, ok := v.Head(recs[0].DLQID); ok {
		t.Fatal("Head of an unseen chain is ok")
	}
	for i, raw := range raws {
		v.Add(uint64(i+1), raw)
	}
	index, hash, n, ok := v.Head(recs[0].DLQID)
	if !ok || index != 4 || hash != recs[4].AuditHash || n != 5 {
		t.Errorf("Head = %d, %s, %d, %v; want 4, %s, 5, true", index, hash, n, ok, recs[4].AuditHash)
	}
}

// TestVerifyChainAgreesWithChainVerifier: on one chain without forks apart
// or foreign records, batch and streaming report the same problems.
func TestVerifyChainAgreesWithChainVerifier(t *testing.T) {
	recs, raws := fiveChain(t)
	cases := map[string][][]byte{
		"intact":    raws,
		"removed":   pick(raws, 0, 2, 3, 4),
		"swapped":   pick(raws, 0, 1, 3, 2, 4),
		"duplicate": pick(raws, 0, 1, 1, 2),
		"fork":      {raws[0], raws[1], forkOf(t, recs, 1), raws[2]},
	}
	for name, rs := range cases {
		t.Run(name, func(t *testing.T) {
			var v ChainVerifier
			var stream []found
			for i, raw := range rs {
				stream = append(stream, reduce(v.Add(uint64(i), raw))...)
			}
			if batch := reduce(VerifyChain(rs)); !reflect.DeepEqual(batch, stream) {
				t.Errorf("VerifyChain %+v, ChainVerifier %+v", batch, stream)
			}
		})
	}
}
