// Package merkle computes RFC 6962 (Certificate Transparency) Merkle tree
// hashes with SHA-256: a leaf hash is SHA-256(0x00 || leaf), an interior
// node SHA-256(0x01 || left || right), and the tree over n leaves splits
// at the largest power of two smaller than n (RFC 6962 section 2.1), so a
// tree of any size has one root and its prefixes are subtrees.
//
// Root hashes a list of leaf hashes at once; Builder does the same one
// leaf at a time in O(log n) memory (the roots of its complete
// subtrees); Blocks and RootFromBlocks hash and recombine the aligned
// blocks of 2^height leaves, which lets a verifier find which block of a
// tree differs from a trusted copy of the block hashes; Tree keeps every
// level of a tree to answer RFC 6962 inclusion proofs.
package merkle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
)

// Size is the size of a hash in bytes.
const Size = sha256.Size

// Hash is a SHA-256 leaf, node or root hash.
type Hash [Size]byte

// String returns the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ErrHash is a hash that is not 64 hex digits.
var ErrHash = errors.New("merkle: not a SHA-256 hash in hex")

// ErrBlocks is a list of block hashes that does not fit a tree size and
// block height.
var ErrBlocks = errors.New("merkle: blocks do not fit the tree size")

// ParseHash parses 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*Size {
		return h, fmt.Errorf("%w: %d characters", ErrHash, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%w: %w", ErrHash, err)
	}
	return h, nil
}

// EmptyRoot is the root of the empty tree: SHA-256 of the empty string.
func EmptyRoot() Hash { return sha256.Sum256(nil) }

// LeafHash returns SHA-256(0x00 || leaf).
func LeafHash(leaf []byte) Hash {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(leaf)
	var out Hash
	h.Sum(out[:0])
	return out
}

// NodeHash returns SHA-256(0x01 || left || right).
func NodeHash(left, right Hash) Hash {
	var b [1 + 2*Size]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[1+Size:], right[:])
	return sha256.Sum256(b[:])
}

// split is the RFC 6962 split of n > 1 leaves: the largest power of two
// smaller than n.
func split(n uint64) uint64 { return 1 << (bits.Len64(n-1) - 1) }

// Root returns the Merkle tree hash of the leaves, given their leaf hashes
// (EmptyRoot for none).
func Root(leaves []Hash) Hash {
	if len(leaves) == 0 {
		return EmptyRoot()
	}
	return combine(leaves)
}

// combine is the RFC 6962 tree over already-hashed nodes (no leaf prefix
// is added): leaves for Root, block hashes for RootFromBlocks.
func combine(nodes []Hash) Hash {
	if len(nodes) == 1 {
		return nodes[0]
	}
	k := split(uint64(len(nodes)))
	return NodeHash(combine(nodes[:k]), combine(nodes[k:]))
}

// Blocks returns the hashes of the consecutive blocks of 2^height leaves
// (the last one partial when the count is not a multiple): each is a
// subtree of the tree over all the leaves, and RootFromBlocks recombines
// them into its root.
func Blocks(leaves []Hash, height int) []Hash {
	size := 1 << height
	out := make([]Hash, 0, (len(leaves)+size-1)/size)
	for i := 0; i < len(leaves); i += size {
		out = append(out, Root(leaves[i:min(i+size, len(leaves))]))
	}
	return out
}

// RootFromBlocks returns the root of the tree of n leaves whose blocks of
// 2^height leaves hash to blocks (see Blocks). Because the RFC 6962 split
// of a tree larger than a block falls on a multiple of the block size,
// the tree above the blocks is the same tree over the block hashes.
func RootFromBlocks(blocks []Hash, height int, n uint64) (Hash, error) {
	if height < 0 || height > 62 {
		return Hash{}, fmt.Errorf("%w: height %d", ErrBlocks, height)
	}
	size := uint64(1) << height
	if want := (n + size - 1) / size; uint64(len(blocks)) != want {
		return Hash{}, fmt.Errorf("%w: %d blocks of height %d for %d leaves, want %d", ErrBlocks, len(blocks), height, n, want)
	}
	if n == 0 {
		return EmptyRoot(), nil
	}
	return combine(blocks), nil
}

// Builder computes the root of a tree one leaf at a time, in O(log n)
// memory: it keeps the roots of the complete subtrees of the leaves added
// so far (the binary decomposition of their count, largest first). The
// zero Builder is the empty tree.
type Builder struct {
	n     uint64
	stack []Hash // perfect subtrees, largest (leftmost) first
}

// Add appends a leaf, given its leaf hash.
func (b *Builder) Add(leaf Hash) {
	b.stack = append(b.stack, leaf)
	// Merge equal-sized subtrees: one merge per trailing one bit of n.
	for n := b.n; n&1 == 1; n >>= 1 {
		l, r := b.stack[len(b.stack)-2], b.stack[len(b.stack)-1]
		b.stack = append(b.stack[:len(b.stack)-2], NodeHash(l, r))
	}
	b.n++
}

// Size returns the number of leaves added.
func (b *Builder) Size() uint64 { return b.n }

// Root returns the root of the leaves added so far.
func (b *Builder) Root() Hash {
	if b.n == 0 {
		return EmptyRoot()
	}
	h := b.stack[len(b.stack)-1]
	for i := len(b.stack) - 2; i >= 0; i-- {
		h = NodeHash(b.stack[i], h)
	}
	return h
}

// Reset empties the builder.
func (b *Builder) Reset() { b.n, b.stack = 0, b.stack[:0] }

// BlockBuilder computes, one leaf at a time, the root of a tree and the
// hashes of its blocks of 2^Height leaves, keeping at most MaxBlocks
// complete blocks: when one more would not fit, neighbouring blocks are
// merged in pairs and the height grows by one. Its memory is bounded by
// MaxBlocks hashes, whatever the number of leaves.
type BlockBuilder struct {
	max    int
	height int
	blocks []Hash  // complete blocks of 2^height leaves
	tail   Builder // the leaves of the partial block
	n      uint64
}

// NewBlockBuilder returns an empty BlockBuilder keeping at most maxBlocks
// complete blocks (at least 2).
func NewBlockBuilder(maxBlocks int) *BlockBuilder {
	return &BlockBuilder{max: max(maxBlocks, 2)}
}

// Add appends a leaf, given its leaf hash.
func (b *BlockBuilder) Add(leaf Hash) {
	b.tail.Add(leaf)
	b.n++
	if b.tail.Size() < 1<<b.height {
		return
	}
	b.blocks = append(b.blocks, b.tail.Root())
	b.tail.Reset()
	if len(b.blocks) <= b.max {
		return
	}
	// Merge pairs: the blocks are complete, so their number is even here
	// only if max is odd; a last unpaired block becomes the tail again.
	merged := b.blocks[:0]
	var rest []Hash
	for i := 0; i+1 < len(b.blocks); i += 2 {
		merged = append(merged, NodeHash(b.blocks[i], b.blocks[i+1]))
	}
	if len(b.blocks)%2 == 1 {
		rest = []Hash{b.blocks[len(b.blocks)-1]}
	}
	b.blocks = merged
	b.height++
	// The unpaired block (2^(height-1) leaves) starts the new partial block.
	for _, h := range rest {
		b.tail.pushSubtree(h, b.height-1)
	}
}

// pushSubtree appends the root of a perfect subtree of 2^height leaves to
// an empty or block-aligned builder.
func (b *Builder) pushSubtree(h Hash, height int) {
	if b.n != 0 {
		panic("merkle: pushSubtree on a non-empty builder")
	}
	b.stack = append(b.stack, h)
	b.n = 1 << height
}

// Size returns the number of leaves added.
func (b *BlockBuilder) Size() uint64 { return b.n }

// Height returns the current block height (blocks of 2^Height leaves).
func (b *BlockBuilder) Height() int { return b.height }

// Blocks returns the block hashes: the complete blocks, then the partial
// one when there is one (what Blocks returns for the same leaves and
// Height).
func (b *BlockBuilder) Blocks() []Hash {
	out := append([]Hash(nil), b.blocks...)
	if b.tail.Size() > 0 {
		out = append(out, b.tail.Root())
	}
	return out
}

// Root returns the root of the leaves added so far.
func (b *BlockBuilder) Root() Hash {
	if b.n == 0 {
		return EmptyRoot()
	}
	h, _ := RootFromBlocks(b.Blocks(), b.height, b.n)
	return h
}

// ErrIndex is a leaf index outside a tree.
var ErrIndex = errors.New("merkle: leaf index outside the tree")

// Tree holds every level of the perfect subtrees over a list of leaf
// hashes (about twice the leaves in memory), so that any subtree hash,
// and so any RFC 6962 inclusion proof, takes O(log n) lookups. Verify
// proofs with github.com/transparency-dev/merkle/proof (its RFC 6962
// hasher computes the same hashes: see the differential test).
type Tree struct {
	levels [][]Hash // levels[0] the leaves; levels[k][i] the subtree of leaves [i<<k, (i+1)<<k)
}

// NewTree builds the tree over leaves (leaf hashes; the slice is kept).
func NewTree(leaves []Hash) *Tree {
	t := &Tree{levels: [][]Hash{leaves}}
	for lv := leaves; len(lv) > 1; {
		next := make([]Hash, len(lv)/2)
		for i := range next {
			next[i] = NodeHash(lv[2*i], lv[2*i+1])
		}
		t.levels = append(t.levels, next)
		lv = next
	}
	return t
}

// Size returns the number of leaves.
func (t *Tree) Size() uint64 { return uint64(len(t.levels[0])) }

// Root returns the Merkle tree hash of all the leaves.
func (t *Tree) Root() Hash {
	if t.Size() == 0 {
		return EmptyRoot()
	}
	return t.rangeHash(0, t.Size())
}

// rangeHash is the Merkle tree hash of leaves [lo, hi), a subtree of
// the RFC 6962 tree (lo is a multiple of the largest power of two not
// above hi-lo, as every range a proof needs is).
func (t *Tree) rangeHash(lo, hi uint64) Hash {
	n := hi - lo
	if n&(n-1) == 0 && lo%n == 0 {
		k := bits.TrailingZeros64(n)
		return t.levels[k][lo>>k]
	}
	k := split(n)
	return NodeHash(t.rangeHash(lo, lo+k), t.rangeHash(lo+k, hi))
}

// InclusionProof returns the RFC 6962 audit path (section 2.1.1) of the
// leaf at index in the tree of all the leaves, from the leaf up.
func (t *Tree) InclusionProof(index uint64) ([]Hash, error) {
	if index >= t.Size() {
		return nil, fmt.Errorf("%w: %d of %d", ErrIndex, index, t.Size())
	}
	var path []Hash
	var walk func(m, lo, hi uint64)
	walk = func(m, lo, hi uint64) {
		if hi-lo == 1 {
			return
		}
		k := split(hi - lo)
		if m < lo+k {
			walk(m, lo, lo+k)
			path = append(path, t.rangeHash(lo+k, hi))
		} else {
			walk(m, lo+k, hi)
			path = append(path, t.rangeHash(lo, lo+k))
		}
	}
	walk(index, 0, t.Size())
	return path, nil
}
