package domain_test

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/deadletter/deadletter/shared/domain"
)

// TestDecodeDoesNotKeepMemberNames: member names a publisher invents are not
// kept after the document is dropped (issue 15, bug 7: every name ever
// published was interned in an unbounded global map). 1M distinct names in
// 1,000 documents leave the heap within 4 MiB of where it started.
func TestDecodeDoesNotKeepMemberNames(t *testing.T) {
	const docs, perDoc = 1000, 1000
	buf := make([]byte, 0, perDoc*24)
	doc := func(d int) []byte {
		buf = append(buf[:0], '{')
		for i := range perDoc {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `"m`...)
			buf = strconv.AppendInt(buf, int64(d*perDoc+i), 10)
			buf = append(buf, `_unexpected":1`...)
		}
		return append(buf, '}')
	}
	// Warm up the pool and the known-name table.
	if _, err := domain.Decode(doc(docs)); err != nil {
		t.Fatal(err)
	}
	before := heapInuse()
	for d := range docs {
		if _, err := domain.Decode(doc(d)); err != nil {
			t.Fatal(err)
		}
	}
	after := heapInuse()
	if grown := int64(after) - int64(before); grown >= 4<<20 {
		t.Fatalf("HeapInuse grew by %.1f MiB after decoding 1M distinct member names", float64(grown)/(1<<20))
	}
}

// TestDecodeKnownNames: a name the schemas declare decodes like any other.
func TestDecodeKnownNames(t *testing.T) {
	doc, err := domain.Decode([]byte(`{"supplier_id":"S","eventID":"e","x\u0079":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if doc["supplier_id"] != "S" || doc["eventID"] != "e" || doc["xy"] == nil {
		t.Fatalf("decoded %#v", doc)
	}
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
