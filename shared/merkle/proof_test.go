package merkle

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// proofLeaves returns n leaf hashes.
func proofLeaves(n int) []Hash {
	out := make([]Hash, n)
	for i := range out {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		out[i] = LeafHash(b[:])
	}
	return out
}

// TestDifferentialTransparencyDev pins our hashes and proofs to those of
// github.com/transparency-dev/merkle: the same leaf hashes, node hashes
// and roots, and every inclusion proof of Tree verifies with its proof
// package against Root.
func TestDifferentialTransparencyDev(t *testing.T) {
	h := rfc6962.DefaultHasher
	for _, leaf := range [][]byte{nil, []byte("x"), make([]byte, 40)} {
		if got, want := LeafHash(leaf), h.HashLeaf(leaf); string(got[:]) != string(want) {
			t.Fatalf("leaf hash of %d bytes differs", len(leaf))
		}
	}
	if got, want := EmptyRoot(), h.EmptyRoot(); string(got[:]) != string(want) {
		t.Fatal("empty root differs")
	}
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	if got, want := NodeHash(a, b), h.HashChildren(a[:], b[:]); string(got[:]) != string(want) {
		t.Fatal("node hash differs")
	}
	for n := 1; n <= 70; n++ {
		leaves := proofLeaves(n)
		tree := NewTree(leaves)
		root := tree.Root()
		if root != Root(leaves) {
			t.Fatalf("n=%d: Tree.Root differs from Root", n)
		}
		for i := range n {
			p, err := tree.InclusionProof(uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			raw := make([][]byte, len(p))
			for j := range p {
				raw[j] = p[j][:]
			}
			if err := proof.VerifyInclusion(h, uint64(i), uint64(n), leaves[i][:], raw, root[:]); err != nil {
				t.Fatalf("n=%d i=%d: %v", n, i, err)
			}
			// The proof of leaf i does not prove another leaf.
			other := leaves[(i+1)%n]
			if n > 1 && proof.VerifyInclusion(h, uint64(i), uint64(n), other[:], raw, root[:]) == nil {
				t.Fatalf("n=%d i=%d: the proof verified another leaf", n, i)
			}
		}
	}
	if _, err := NewTree(proofLeaves(3)).InclusionProof(3); !errors.Is(err, ErrIndex) {
		t.Fatalf("index past the tree: %v", err)
	}
}
