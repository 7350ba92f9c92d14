package verify

import (
	"github.com/bits-and-blooms/bloom/v3"
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/deadletter/deadletter/shared/record"
)

// tailCache holds the verification Tails of at most a fixed number of
// chains, least recently used out first (about 250 bytes per chain).
type tailCache = simplelru.LRU[string, record.Tail]

// newTailCache returns a cache of capacity (>= 1) chains.
func newTailCache(capacity int) *tailCache {
	c, err := simplelru.NewLRU[string, record.Tail](max(1, capacity), nil)
	if err != nil {
		panic(err) // only for a capacity below 1
	}
	return c
}

// SeenFilterBits is the size of the filter of dlq ids seen by one
// verification: 2^24 bits (2 MiB), whatever the number of chains. With 4
// hash functions it answers "maybe seen" for an id never seen with a
// probability of about 0.0006 % after 100,000 chains, 0.24 % after 1
// million and 30 % after 10 million; each such answer costs a direct get
// of the first record on the chain's subject, never a wrong result.
const SeenFilterBits = 1 << 24

// newSeenFilter returns a Bloom filter of dlq ids of n bits and 4 hash
// functions; TestOrAddString adds an id and reports whether it may have
// been added before (false: certainly not).
func newSeenFilter(n uint32) *bloom.BloomFilter {
	return bloom.New(uint(n), 4)
}
