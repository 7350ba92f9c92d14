package verify

import (
	"fmt"
	"testing"

	"github.com/deadletter/deadletter/shared/record"
)

// TestTailCacheEvicts: the cache holds at most its capacity and evicts the
// chain used least recently.
func TestTailCacheEvicts(t *testing.T) {
	c := newTailCache(2)
	c.Add("a", record.TailUnlinked(1))
	c.Add("b", record.TailUnlinked(2))
	c.Add("c", record.TailUnlinked(3)) // a was used least recently
	if _, ok := c.Get("a"); ok || c.Len() != 2 {
		t.Fatalf("a still cached (%d held)", c.Len())
	}
	if _, ok := c.Get("c"); !ok {
		t.Fatal("c not cached")
	}
	c.Add("d", record.TailUnlinked(4)) // c was used since: b goes
	if _, ok := c.Get("b"); ok {
		t.Fatal("b still cached")
	}
	if tl, ok := c.Get("c"); !ok || tl.Records() != 3 {
		t.Fatalf("c: %v %v", tl, ok)
	}
}

// TestSeenFilter: an id added is always maybe-seen; ids never added are
// almost never.
func TestSeenFilter(t *testing.T) {
	f := newSeenFilter(SeenFilterBits)
	for i := range 10000 {
		if f.TestOrAddString(fmt.Sprintf("pharmacy_%032d", i)) {
			t.Fatalf("id %d seen before it was added", i)
		}
	}
	for i := range 10000 {
		if !f.TestOrAddString(fmt.Sprintf("pharmacy_%032d", i)) {
			t.Fatalf("id %d not seen", i)
		}
	}
}
