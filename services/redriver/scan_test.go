package redriver

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestManyDLQIDs: a filter naming more chains than one multi-last get may
// return is read in chunks, and every chain is found.
func TestManyDLQIDs(t *testing.T) {
	e := newTestEnv(t)
	n := streams.MaxMultiLast + 76
	var ids []string
	for i := range n {
		kinds := []record.Kind(nil)
		if i%10 == 0 { // a few chains of two records: the last one counts
			kinds = []record.Kind{record.KindResolved}
		}
		ids = append(ids, e.write(t, spec{n: i, domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable, kinds: kinds}))
	}
	for _, tc := range []struct {
		name     string
		f        api.DrainFilter
		selected int
	}{
		{"by dlq id", api.DrainFilter{DLQIDs: ids}, n - (n+9)/10},
		{"by domain", api.DrainFilter{Domain: "pharmacy"}, n - (n+9)/10},
		{"all, limited", api.DrainFilter{Limit: 7}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := &selection.Selector{JS: e.js, Seed: maphash.MakeSeed()}
			sel, err := sl.Run(context.Background(), tc.f, time.Time{}, tc.f.Limit)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Selected != tc.selected || len(sel.Items) != tc.selected || sel.Excluded["resolved"] != (n+9)/10 {
				t.Errorf("selected %d (%d items), excluded %v; want %d selected, %d resolved", sel.Selected, len(sel.Items), sel.Excluded, tc.selected, (n+9)/10)
			}
		})
	}
}

// TestDrainListing: drain.list (and the take-over scan) reads DRAINS by
// direct gets, skipping deleted keys, also past the keys one multi-last get
// may return.
func TestDrainListing(t *testing.T) {
	e := newTestEnv(t)
	kv, err := e.js.KeyValue(context.Background(), subjects.DrainsBucket)
	if err != nil {
		t.Fatal(err)
	}
	put := 0
	for _, tc := range []struct {
		name          string
		keys, deleted int
	}{
		{"a few", 10, 2},
		{"more than one multi-last get", streams.MaxMultiLast + 20, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for ; put < tc.keys; put++ {
				id := fmt.Sprintf("drain-test-%05d", put)
				b, _ := json.Marshal(api.DrainState{DrainID: id, Status: api.DrainCompleted, StartedAt: time.Unix(int64(put), 0).UTC()})
				if _, err := kv.Put(context.Background(), id, b); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tc.deleted {
				if err := kv.Delete(context.Background(), fmt.Sprintf("drain-test-%05d", put-1-i)); err != nil {
					t.Fatal(err)
				}
			}
			data, code := e.request(t, api.DrainList, ``)
			var rep api.DrainListReply
			if err := json.Unmarshal(data, &rep); code != "" || err != nil {
				t.Fatalf("drain.list: %s %v", code, err)
			}
			if want := tc.keys - tc.deleted; len(rep.Drains) != want {
				t.Errorf("%d drains listed, want %d", len(rep.Drains), want)
			}
			for i, d := range rep.Drains {
				if i > 0 && d.StartedAt.Before(rep.Drains[i-1].StartedAt) {
					t.Fatalf("drains out of order at %d", i)
				}
			}
			// Put the deleted keys back for the next case.
			for i := range tc.deleted {
				id := fmt.Sprintf("drain-test-%05d", put-1-i)
				b, _ := json.Marshal(api.DrainState{DrainID: id, Status: api.DrainCompleted, StartedAt: time.Unix(int64(put-1-i), 0).UTC()})
				if _, err := kv.Put(context.Background(), id, b); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
