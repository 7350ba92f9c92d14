package record

import (
	"bytes"
	"reflect"
	"testing"
)

// TestTailAfterContinuesAChain: a Tail seeded with TailAfter from the
// record before finds what a Tail kept since the chain's start finds, for
// the next record, whatever that record is.
func TestTailAfterContinuesAChain(t *testing.T) {
	recs, raws := fiveChain(t)
	tampered := bytes.Replace(raws[3], []byte(`"kind":"replay_failed"`), []byte(`"kind":"replayed"`), 1)
	tests := []struct {
		name string
		next []byte // the record read after raws[0..2]
		want []found
	}{
		{"intact", raws[3], nil},
		{"seal mismatch", tampered, []found{{3, ProblemSealMismatch}}},
		{"fork with the previous record", forkOf(t, recs, 2), []found{{3, ProblemFork}}},
		{"gap", raws[4], []found{{3, ProblemIndexGap}, {3, ProblemBrokenPrevHash}}},
		{"second first record", forkOf(t, recs, 0), []found{{3, ProblemIndexGap}, {3, ProblemBrokenPrevHash}}},
		{"unparseable", []byte(`{"dlq_id":`), []found{{-1, ProblemUnparseable}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kept Tail
			for i, raw := range raws[:3] {
				if ps := kept.Add(uint64(i+1), ReadLink(raw)); ps != nil {
					t.Fatalf("record %d: %v", i, ps)
				}
			}
			seeded := TailAfter(ReadLink(raws[2]))
			want := kept.Add(9, ReadLink(tt.next))
			got := seeded.Add(9, ReadLink(tt.next))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seeded %+v\n  kept %+v", got, want)
			}
			if !reflect.DeepEqual(reduce(got), tt.want) {
				t.Fatalf("problems %+v, want %+v", reduce(got), tt.want)
			}
			for _, p := range got {
				if p.Seq != 9 {
					t.Errorf("problem %+v without its sequence", p)
				}
			}
			if seeded.Records() != kept.Records() {
				t.Errorf("Records: seeded %d, kept %d", seeded.Records(), kept.Records())
			}
		})
	}
}

// TestTailUnlinked: after an unknown last record, the next record is
// checked for its seal only.
func TestTailUnlinked(t *testing.T) {
	_, raws := fiveChain(t)
	tl := TailUnlinked(1)
	if ps := tl.Add(1, ReadLink(raws[3])); ps != nil {
		t.Fatalf("problems %v", ps)
	}
	if ps := reduce(tl.Add(2, ReadLink(raws[2]))); !reflect.DeepEqual(ps, []found{{2, ProblemIndexGap}, {2, ProblemBrokenPrevHash}}) {
		t.Fatalf("after linking: %v", ps)
	}
}

// TestTailKeepsHashesAsStored: hashes are held compactly, and a hash that
// is not 64 lowercase hex digits is compared and reported as stored.
func TestTailKeepsHashesAsStored(t *testing.T) {
	for _, h := range []string{"", "ABCDEF", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"} {
		var v ChainVerifier
		v.AddLink(1, Link{DLQID: "x", AuditHash: h})
		if _, got, _, _ := v.Head("x"); got != h {
			t.Errorf("Head hash %q, stored %q", got, h)
		}
		// The next record names it exactly: linked; one letter off: broken.
		if ps := v.AddLink(2, Link{DLQID: "x", Index: 1, PrevHash: h, AuditHash: "b"}); ps != nil && h != "" {
			t.Errorf("prev_hash %q: %v", h, ps)
		}
	}
	tl := TailAfter(Link{DLQID: "x", AuditHash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
	ps := tl.Add(2, Link{DLQID: "x", Index: 1, PrevHash: "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"})
	if !reflect.DeepEqual(reduce(ps), []found{{1, ProblemBrokenPrevHash}}) {
		t.Errorf("upper-case prev_hash: %v", ps)
	}
}
