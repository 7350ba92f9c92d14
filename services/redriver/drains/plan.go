package drains

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/idempotency"
)

// planner counts what a selection would do: a dry run's plan, and the
// overlaps with unfinished drains.
type planner struct {
	js    jetstream.JetStream
	idem  jetstream.KeyValue
	holds *hold.Store
}

// planFor computes what a drain with filter f, to be stored as self (not
// counted among the drains it overlaps; "" for none), would do, writing
// nothing; unless ignoreOrder, unselected earlier events hold later ones
// (HeldByEarlier, HeldBy); canary events are picked as the drain's canary
// would (Canary); with dups, the idempotency keys of the first events are
// checked (WouldSkipDuplicate).
func (pl *planner) planFor(ctx context.Context, req api.DrainStartRequest, dups bool, self string) (*api.DrainPlan, error) {
	f, ignoreOrder := req.Filter, req.IgnoreOrder
	canary := req.WithDefaultGuard().Canary
	if req.NoGuard {
		canary = 0
	}
	guard := req.Guard()
	p := &api.DrainPlan{ByDomain: map[string]int{}, ByClass: map[string]int{}, ByCode: map[string]int{}, Guard: &guard}
	// The unfinished drains: the events their filters select among this
	// selection's are counted (overlap.go).
	ov, err := pl.unfinishedDrains(ctx, self)
	if err != nil {
		return nil, err
	}
	const maxNames, maxChecks = 100000, 10000
	names := map[uint64]string{}
	// What the plan counts of each tentatively selected chain (a later
	// record may unselect it): its (domain, class, code), interned, by
	// item index; its idempotency key for the first maxChecks.
	type dcc struct{ domain, class, code string }
	var triples []dcc
	tripleIdx := map[dcc]uint32{}
	var info []uint32 // by item index: 1 + the index in triples; 0: none
	idem := map[int32]string{}
	holds, err := pl.holds.Active(ctx)
	if err != nil {
		return nil, fmt.Errorf("redriver: read the legal holds: %w", err)
	}
	sl := &selection.Selector{JS: pl.js, Seed: maphash.MakeSeed(), IgnoreOrder: ignoreOrder, Holds: holds}
	sl.OnItem = func(l chain.Head, idx int32) {
		t := dcc{l.Domain, string(l.Class), string(l.ErrorCode)}
		ti, ok := tripleIdx[t]
		if !ok {
			ti = uint32(len(triples))
			triples = append(triples, t)
			tripleIdx[t] = ti
		}
		for int(idx) >= len(info) {
			info = append(info, 0)
		}
		info[idx] = ti + 1
		if l.OrderingKey != "" && len(names) < maxNames {
			names[selection.HashKey(sl.Seed, l.Domain, l.OrderingKey)] = l.OrderingKey
		}
		if _, ok := idem[idx]; (ok || len(idem) < maxChecks) && l.IdempotencyKey != "" && dups {
			idem[idx] = l.IdempotencyKey
		}
		ov.visit(l, idx)
	}
	var keys []string // idempotency keys to check, at most maxChecks
	sl.OnFinal = func(sel *selection.Selection) {
		for idx, ti := range info {
			if ti == 0 || !sel.Live(int32(idx)) {
				continue
			}
			t := triples[ti-1]
			p.ByDomain[t.domain]++
			p.ByClass[t.class]++
			p.ByCode[t.code]++
			if k, ok := idem[int32(idx)]; ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		ov.count(sel)
	}
	sel, err := sl.Run(ctx, f, time.Time{}, f.Limit)
	if err != nil {
		return nil, err
	}
	p.Selected, p.Excluded = sel.Selected, sel.Excluded
	p.HeldByHold, p.UnderHold, p.Holds = sel.HeldByHold, sel.UnderHold, sel.HoldCounts()
	p.Overlaps = ov.overlaps()
	type kc struct {
		h uint64
		n int
	}
	var top []kc
	sel.Lanes(func(lane []selection.Item) bool {
		held, n := false, 0
		var first selection.Item // the lane's first blocker
		named := -1              // its place in p.HeldBy, once it holds an event
		for _, it := range lane {
			switch {
			case it.Blocker():
				if !held {
					first = it
				}
				held = true
			case held:
				p.HeldByEarlier++
				if named < 0 && len(p.HeldBy) < api.MaxHeldBy {
					named = len(p.HeldBy)
					p.HeldBy = append(p.HeldBy, sel.BlockerOf(first))
				}
				if named >= 0 {
					p.HeldBy[named].Holds++
				}
				n++
			default:
				n++
			}
		}
		if n > 0 && lane[0].Keyed() {
			p.Keys++
			top = append(top, kc{lane[0].KeyHash(), n})
			if len(top) > 200 {
				slices.SortFunc(top, func(a, b kc) int { return b.n - a.n })
				top = top[:20]
			}
		}
		return true
	})
	slices.SortFunc(top, func(a, b kc) int { return b.n - a.n })
	for _, t := range top[:min(20, len(top))] {
		name, ok := names[t.h]
		if !ok {
			name = fmt.Sprintf("#%016x", t.h)
		}
		p.TopKeys = append(p.TopKeys, api.KeyCount{OrderingKey: name, Events: t.n})
	}
	for _, lo := range sel.Canary(canary) {
		_, id := sel.IDOf(sel.Items[lo])
		p.Canary = append(p.Canary, api.CanaryPick{DLQID: id, Code: sel.CodeOfItem(sel.Items[lo])})
	}
	for _, k := range keys {
		st, found, err := idempotency.Lookup(ctx, pl.idem, k)
		if err != nil {
			return nil, err
		}
		p.Checked++
		if found && st.Committed() {
			p.WouldSkipDuplicate++
		}
	}
	return p, nil
}
