package selection

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"
	"unsafe"

	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/record"
)

// TestLaneOrder: lanes come in the order their first events are stored in
// QUARANTINE (so a drain reads the stream about in order), events within a
// lane in event-time order, and an item stays 40 bytes.
func TestLaneOrder(t *testing.T) {
	if n := unsafe.Sizeof(Item{}); n != 40 {
		t.Errorf("an item is %d bytes, want 40 (a million selected events ≈ 40 MB)", n)
	}
	at := func(h int) *time.Time { t := time.Date(2025, 1, 1, h, 0, 0, 0, time.UTC); return &t }
	sel := &Selection{}
	seed := maphash.MakeSeed()
	for _, r := range []chain.Head{ // in stream order
		{DLQID: "a-late", OrderingKey: "A", EventTime: at(9)},
		{DLQID: "b", OrderingKey: "B", EventTime: at(5)},
		{DLQID: "a-early", OrderingKey: "A", EventTime: at(1)},
		{DLQID: "unkeyed", EventTime: at(0)},
		{DLQID: "c", OrderingKey: "C", EventTime: at(2)},
	} {
		sel.seen++
		sel.add(r, 0, seed)
	}
	sel.sort()
	var got [][]string
	sel.Lanes(func(lane []Item) bool {
		var ids []string
		for _, it := range lane {
			_, id := sel.IDOf(it)
			ids = append(ids, id)
		}
		got = append(got, ids)
		return true
	})
	// Lane A starts with a-early, stored third: after B, before the rest.
	want := [][]string{{"b"}, {"a-early", "a-late"}, {"unkeyed"}, {"c"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lanes %v, want %v", got, want)
	}
}

func TestPackUnpackIDs(t *testing.T) {
	sel := &Selection{}
	seed := maphash.MakeSeed()
	for _, tc := range []struct{ name, id string }{
		{"pharmacy", domain.Key("pharmacy", "a")},
		{"unknown domain", domain.Key(record.UnknownDomain, "b")},
		{"odd", "custom_ID-42"},
		{"short hex", "dscsa_abcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := sel.pack(chain.Head{DLQID: tc.id, Domain: "x", OrderingKey: "k"}, 0, seed)
			if _, got := sel.IDOf(it); got != tc.id {
				t.Errorf("round trip %q → %q", tc.id, got)
			}
		})
	}
}
