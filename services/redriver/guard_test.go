package redriver

import (
	"context"
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
)

// TestCanaryPicksHeads: the canary takes only the first event of each key
// in the selection (never one that an earlier event of its key, selected
// or not, precedes), round-robin over the error codes, then keys.
func TestCanaryPicksHeads(t *testing.T) {
	e := newTestEnv(t)
	at := func(m int) string { return fmt.Sprintf("2025-03-14T10:%02d:00Z", m) }
	heads := map[string]bool{}
	code := map[string]codes.Code{}
	// Keys k0..k5, three events each; k0..k2 fail with 503, k3..k5 with a rejection.
	// Key k6's first event is poison (unselected): it holds k6.
	for k := range 6 {
		c := codes.DownstreamUnavailable
		if k >= 3 {
			c = codes.DownstreamRejected
		}
		for j := range 3 {
			id := e.write(t, spec{n: 10*k + j, domain: "pharmacy", class: record.ClassExhausted, code: c, okey: fmt.Sprintf("k%d", k), at: at(10 - j)})
			code[id] = c
			if j == 2 { // the earliest event of its key
				heads[id] = true
			}
		}
	}
	e.write(t, spec{n: 100, domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable, okey: "k6", at: at(1),
		kinds: []record.Kind{record.KindPoisoned}})
	e.write(t, spec{n: 101, domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable, okey: "k6", at: at(2)})

	sl := &selection.Selector{JS: e.js, Seed: maphash.MakeSeed()}
	sel, err := sl.Run(context.Background(), api.DrainFilter{}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		n    int
		want int
	}{
		{"fewer than the heads", 4, 4},
		{"all the heads", 6, 6},
		{"more than the heads", 50, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			picks := sel.Canary(tc.n)
			if len(picks) != tc.want {
				t.Fatalf("%d picks, want %d", len(picks), tc.want)
			}
			for i, lo := range picks {
				_, id := sel.IDOf(sel.Items[lo])
				if !heads[id] {
					t.Errorf("pick %d: %s is not the head of its key", i, id)
				}
				// Round-robin: the codes alternate (DOWNSTREAM_REJECTED
				// sorts before DOWNSTREAM_UNAVAILABLE).
				want := codes.DownstreamRejected
				if i%2 == 1 {
					want = codes.DownstreamUnavailable
				}
				if code[id] != want || sel.CodeOfItem(sel.Items[lo]) != string(want) {
					t.Errorf("pick %d: %s code %s, want %s", i, id, code[id], want)
				}
			}
		})
	}
}
