package drains

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
)

// Overlapping drains. Two drains whose selections share events would race
// for them (the redrive_requested CAS keeps each event replayed once, but
// the second drain's counts would say "skipped" for work the first did,
// and a person reading either could not tell which drain owns which
// events). The design chosen: a drain that would select any event an
// unfinished drain (selecting, running or paused) selects is refused with
// DRAIN_OVERLAP, naming that drain and the overlap count, and a dry run's
// plan lists the overlaps. Refusing rather than skipping keeps one owner
// per event and one meaning per count: the operator cancels or finishes
// the other drain, or narrows the filter. An unfinished drain's selection
// is known here by its stored filter and start time (a drain selects only
// events first seen before it started), applied to the new selection's
// events; its limit is not (the overlap may be counted high for a drain
// with a limit), nor what it already did (a replayed event is resolved
// and selected by neither). Events under a legal hold are never replayed
// by either and are not counted.

// overlapScan counts, during a selection, the events each unfinished
// drain's filter selects.
type overlapScan struct {
	drains   []storedDrain
	matchers []selection.Matcher
	// hits maps a tentatively selected item to the drains (indexes) that
	// select it too.
	hits   map[int32][]int
	counts []int
}

// unfinishedDrains returns the scan of the drains stored in DRAINS that
// are selecting, running or paused, but exclude.
func (pl *planner) unfinishedDrains(ctx context.Context, exclude string) (*overlapScan, error) {
	drains, err := listDrains(ctx, pl.js)
	if err != nil {
		return nil, err
	}
	ov := &overlapScan{hits: map[int32][]int{}}
	for _, d := range drains {
		if d.err != nil || d.key == exclude {
			continue
		}
		if st := d.state.Status; st != api.DrainSelecting && st != api.DrainRunning && st != api.DrainPaused {
			continue
		}
		ov.drains = append(ov.drains, d)
		ov.matchers = append(ov.matchers, selection.NewMatcher(d.state.Request.Filter, d.state.StartedAt, true, true, nil))
	}
	ov.counts = make([]int, len(ov.drains))
	return ov, nil
}

// visit notes which unfinished drains select l, the latest record of item
// idx's chain.
func (ov *overlapScan) visit(l chain.Head, idx int32) {
	if len(ov.matchers) == 0 {
		return
	}
	var hit []int
	for i, m := range ov.matchers {
		if reason, _ := m.DecideFilter(l); reason == "" {
			hit = append(hit, i)
		}
	}
	if hit == nil {
		delete(ov.hits, idx)
		return
	}
	ov.hits[idx] = hit
}

// count sums the items still selected when the scan ended.
func (ov *overlapScan) count(sel *selection.Selection) {
	for idx, hit := range ov.hits {
		if !sel.Live(idx) {
			continue
		}
		for _, i := range hit {
			ov.counts[i]++
		}
	}
}

// overlaps lists the drains that share events, most shared first.
func (ov *overlapScan) overlaps() []api.DrainOverlap {
	var out []api.DrainOverlap
	for i, n := range ov.counts {
		if n == 0 {
			continue
		}
		st := ov.drains[i].state
		out = append(out, api.DrainOverlap{DrainID: st.DrainID, Status: st.Status, StartedBy: st.StartedBy, Records: n})
	}
	slices.SortFunc(out, func(a, b api.DrainOverlap) int {
		if c := cmp.Compare(b.Records, a.Records); c != 0 {
			return c
		}
		return cmp.Compare(a.DrainID, b.DrainID)
	})
	return out
}

// refuseOverlap refuses drain req, to be stored as drainID, with
// DRAIN_OVERLAP when an unfinished drain selects some of its events. It
// costs one multi-last get of DRAINS when no other drain is unfinished,
// else a selection (without duplicate checks).
func (pl *planner) refuseOverlap(ctx context.Context, req api.DrainStartRequest, drainID string) error {
	ov, err := pl.unfinishedDrains(ctx, drainID)
	if err != nil {
		return api.Wrap(api.ErrUnavailable, err, "the drains could not be listed: "+err.Error())
	}
	if len(ov.drains) == 0 {
		return nil
	}
	p, err := pl.planFor(ctx, req, false, drainID)
	if err != nil {
		return api.Wrap(api.ErrUnavailable, err, err.Error())
	}
	if len(p.Overlaps) == 0 {
		return nil
	}
	names := make([]string, 0, len(p.Overlaps))
	for _, o := range p.Overlaps {
		names = append(names, fmt.Sprintf("%s (%s) selects %d of them", o.DrainID, o.Status, o.Records))
	}
	e := api.Errorf(api.ErrDrainOverlap, "another drain already selects records of this drain: %s; cancel or finish it, or narrow the filter",
		strings.Join(names, "; "))
	e.Overlaps = p.Overlaps
	return e
}
