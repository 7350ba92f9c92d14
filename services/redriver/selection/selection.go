// Package selection is a drain's selection: it reads the chains of a
// filter from QUARANTINE (direct gets, no consumer), decides on each
// chain's last record (the filter, per-key order, legal holds), and
// orders the selected events into lanes, compactly (about 40 bytes an
// event). It also counts a resumed drain's outcomes found in the chains
// and picks the canary. The redriver's Service runs the replays; this
// package holds no service state, only a JetStream handle.
package selection

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Item is one event of a drain's selection, kept compact so that a
// selection of a million events costs about 40 MB: the dlq id packed to 16
// bytes (ids are "<domain>_<32 hex>"; any other id is kept in a side table),
// the ordering key as a 64-bit hash (a collision only makes two keys share
// one ordered lane), the event time in nanoseconds, and where the chain is
// stored (see ord).
type Item struct {
	id   [16]byte
	okey uint64
	t    int64
	// ord is the place of the chain's last record in QUARANTINE (the
	// selection reads the records in stream order); once sorted, the place
	// of its lane's first event.
	ord uint32
	dom uint8
	// flags: flagBlocker (an unresolved, unselected event that holds the
	// later events of its key), flagNoKey (no ordering key: its own lane),
	// flagOddID (id[0:4] indexes selection.odd), flagDead (superseded by a
	// resolving record; dropped when the scan ends), flagLegalHold (a
	// blocker under a legal hold: its reason names the hold, see
	// holdReason).
	flags uint8
	// reason indexes selection.reasons: why the chain is not selected (0:
	// it is), as decided on its last record read so far.
	reason uint8
	// code indexes selection.codes: the error code of the chain's latest
	// failure (for the canary's spread over codes).
	code uint8
}

// Blocker reports whether the item is an unresolved, unselected event
// that holds the later events of its key (never replayed).
func (it Item) Blocker() bool { return it.flags&flagBlocker != 0 }

// Keyed reports whether the item has an ordering key (else it is a lane
// of its own).
func (it Item) Keyed() bool { return it.flags&flagNoKey == 0 }

// KeyHash is the hash of the item's ordering key (HashKey).
func (it Item) KeyHash() uint64 { return it.okey }

const (
	flagBlocker = 1 << iota
	flagNoKey
	flagOddID
	flagDead
	flagLegalHold
)

// holdSep separates, in an interned reason, the reason of an event under
// a legal hold from the hold's id: "<reason>\x00<hold id>", the reason
// api.ReasonLegalHold when the filter selects the event (it is counted
// selected and held), else the filter's.
const holdSep = "\x00"

// holdReason returns the reason of an event excluded for reason (""
// when the filter selects it) that hold holdID holds.
func holdReason(reason, holdID string) string {
	if reason == "" {
		reason = api.ReasonLegalHold
	}
	return reason + holdSep + holdID
}

// splitReason returns an interned reason's own reason and, for an event
// under a legal hold, the hold's id.
func splitReason(r string) (reason, holdID string) {
	reason, holdID, _ = strings.Cut(r, holdSep)
	return reason, holdID
}

// DomainOf returns the domain prefix of a dlq id ("<domain>_<hex>", as
// record.DLQIDFor builds them); ok is false when the id is not a safe
// subject token of at most 200 bytes or has no domain.
func DomainOf(id string) (dom string, ok bool) {
	if id == "" || len(id) > 200 {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	dom, _, ok = domain.SplitID(id)
	if !ok {
		return "", false
	}
	return dom, true
}

// domainTable maps a domain to its item code; 0 is "other" (an odd id).
var domainTable = append([]string{""}, registry.NamesAndUnknown()...)

// Selection is a drain's sorted selection.
type Selection struct {
	// Items are the selected events and their blockers, in lanes (see
	// Lanes) once Run returned.
	Items []Item
	odd   []string
	// Selected counts the non-blocker items.
	Selected int
	// seen counts the records read so far (the ord of the next one).
	seen uint32
	// Excluded counts events not selected, by reason.
	Excluded map[string]int
	// ignoreOrder: unselected events hold nothing (the drain waived
	// per-key order), but for those under a legal hold.
	ignoreOrder bool
	// HeldByHold counts the events the filter selects that a legal hold
	// holds (counted in Selected, never replayed); UnderHold names the
	// first api.MaxHeldBy; holdCase maps the active holds to their cases.
	HeldByHold int
	UnderHold  []api.Blocker
	holdCase   map[string]string
	// byHold counts the events of heldByHold by hold id.
	byHold map[string]int
	// drain, when set, is a resumed drain's id: its outcomes recorded in
	// the chains are tallied (see tally), by dlq id during the scan.
	drain   string
	outcome map[string]uint8

	// During the scan: the item of each chain whose last record read so
	// far does not end it (standard ids by their packed form, odd ids by
	// the id), and the reasons items refer to.
	byID    map[chainKey]int32
	byOddID map[string]int32
	reasons []string
	// codes are the error codes items refer to (interned like reasons).
	codes []string
	// parties maps the dlq id of every blocker read with a party to that
	// party (blockerOf names it): kept for blockers alone, not in the
	// compact items.
	parties map[string]string
}

// chainKey is a standard dlq id, packed as in an item.
type chainKey struct {
	id  [16]byte
	dom uint8
}

// filterSubjects returns the QUARANTINE subjects a filter reads: the
// named chains' subjects when scanIDs is false, else (the named chains'
// earlier events of a key must be found, see matcher.ids) their domain's.
func filterSubjects(f api.DrainFilter, scanIDs bool) []string {
	if len(f.DLQIDs) > 0 && scanIDs && f.Domain == "" {
		dom, _ := DomainOf(f.DLQIDs[0])
		for _, id := range f.DLQIDs[1:] {
			if d, _ := DomainOf(id); d != dom {
				return []string{subjects.QuarantineAll}
			}
		}
		return []string{"quarantine." + dom + ".>"}
	}
	if len(f.DLQIDs) > 0 && !scanIDs {
		out := make([]string, 0, len(f.DLQIDs))
		for _, id := range f.DLQIDs {
			dom, _ := DomainOf(id)
			out = append(out, subjects.Quarantine(dom, id))
		}
		return out
	}
	if f.Domain != "" {
		return []string{"quarantine." + f.Domain + ".>"}
	}
	return []string{subjects.QuarantineAll}
}

// Matcher applies a drain's filter to last records.
type Matcher struct {
	f       api.DrainFilter
	classes map[record.Class]bool
	codes   map[string]bool
	until   time.Time // zero: none
	// ids, when set, are the dlq ids named by a filter whose chains are
	// scanned with their domain's (the others may hold them).
	ids map[string]bool
	// hold: an unselected unresolved event holds the later events of its
	// key (false when the drain ignores order).
	hold bool
	// holds are the active legal holds, as read before the selection: an
	// unresolved event one of them holds is never selected, and holds the
	// later events of its key whatever the drain (ignore_order included).
	holds []api.Hold
}

// reasonNotListed excludes a chain a dlq-id filter does not name: it is
// not counted among the exclusions (it was never asked for), only kept
// when it holds a named one.
const reasonNotListed = "dlq_id"

// NewMatcher returns the matcher of a drain's filter: events first seen
// from cutoff on (zero: none) are not selected; ignoreOrder waives
// per-key order; scanIDs: the named chains are read with their domain's;
// holds are the active legal holds.
func NewMatcher(f api.DrainFilter, cutoff time.Time, ignoreOrder, scanIDs bool, holds []api.Hold) Matcher {
	m := Matcher{f: f, classes: map[record.Class]bool{}, codes: map[string]bool{}, hold: !ignoreOrder, holds: holds}
	if len(f.DLQIDs) > 0 && scanIDs {
		m.ids = make(map[string]bool, len(f.DLQIDs))
		for _, id := range f.DLQIDs {
			m.ids[id] = true
		}
	}
	if len(f.Classes) == 0 {
		m.classes[record.ClassExhausted] = true
		if f.IncludeValidation {
			m.classes[record.ClassValidation] = true
		}
	}
	for _, c := range f.Classes {
		m.classes[record.Class(c)] = true
	}
	for _, c := range f.ErrorCodes {
		m.codes[c] = true
	}
	if f.Until != nil {
		m.until = *f.Until
	}
	if !cutoff.IsZero() && (m.until.IsZero() || cutoff.Before(m.until)) {
		m.until = cutoff
	}
	return m
}

// decide returns "" when l is selected, else the reason it is excluded, and
// whether an excluded event still holds the later events of its key:
// every unresolved one does, whatever excluded it (a filter member, its
// class, poison), unless the drain ignores order. A resolved chain holds
// nothing (see selection.visit). An unresolved event under an active
// legal hold is never selected and always holds (holdReason).
func (m Matcher) decide(l chain.Head) (reason string, blocker bool) {
	reason, blocker = m.DecideFilter(l)
	if len(m.holds) == 0 || l.Status() == record.StatusResolved {
		return reason, blocker
	}
	for _, h := range m.holds {
		if h.Status == api.HoldActive && hold.Matches(h.Target, hold.FromHead(l)) {
			return holdReason(reason, h.ID), true
		}
	}
	return reason, blocker
}

// DecideFilter is decide without the legal holds.
func (m Matcher) DecideFilter(l chain.Head) (reason string, blocker bool) {
	switch {
	case m.ids != nil && !m.ids[l.DLQID]:
		return reasonNotListed, m.hold
	case len(m.codes) > 0 && !m.codes[string(l.ErrorCode)]:
		return "error_code", m.hold
	case m.f.PartyID != "" && l.PartyID != m.f.PartyID:
		return "party_id", m.hold
	case m.f.Since != nil && l.FirstSeen.Before(*m.f.Since):
		return "first_seen", m.hold
	case !m.until.IsZero() && !l.FirstSeen.Before(m.until):
		return "first_seen", m.hold
	}
	switch l.Status() {
	case record.StatusResolved:
		return "resolved", false
	case record.StatusPoison:
		return "poison", m.hold
	}
	if !m.classes[l.Class] {
		return "class_" + string(l.Class), m.hold
	}
	// A validation event replays only corrected (found when its chain is
	// read: a chain of one record has no correction) or when asked.
	if l.Class == record.ClassValidation && !m.f.IncludeValidation && l.Index == 0 {
		return "validation_uncorrected", m.hold
	}
	return "", false
}

// static reports whether reason holds for every record of a chain (party,
// first_seen and dlq id are the same on all of them).
func static(reason string) bool {
	return reason == "party_id" || reason == "first_seen" || reason == reasonNotListed
}

// Selector reads a filter's chains and builds a selection.
type Selector struct {
	// JS reads QUARANTINE (direct gets).
	JS jetstream.JetStream
	// Seed hashes the ordering keys (HashKey).
	Seed maphash.Seed
	// IgnoreOrder: the drain waives per-key order (no unselected event
	// holds a selected one).
	IgnoreOrder bool
	// ResumeOf, when set, is the id of the resumed drain whose outcomes
	// the chains hold (Selection.tally).
	ResumeOf string
	// Holds are the active legal holds (Matcher.holds), read once before
	// the selection.
	Holds []api.Hold
	// OnItem, when set, is called with each record that tentatively selects
	// its chain, and the index of the chain's item (for dry runs: a later
	// record of the chain may still unselect it, see Selection.Live).
	OnItem func(l chain.Head, idx int32)
	// OnFinal, when set, is called once the scan ended and before the
	// selection is compacted: Selection.Live then tells the indexes OnItem
	// named that stayed selected.
	OnFinal func(sel *Selection)
}

// ErrSelection wraps a failure to read the selection.
var ErrSelection = errors.New("redriver: selection failed")

// Reads of the selection (and of DRAINS): direct-get batches of up to
// ScanBatch records and ScanMaxBytes bytes (a first record carries its
// payload, up to the gate's limit), so a scan costs one round trip per
// batch and the redriver's memory per batch stays bounded.
const (
	ScanBatch    = 1024
	ScanMaxBytes = 8 << 20
)

// Run reads the chains of a filter with batch direct gets (no consumer:
// the redriver has no right to create one) and builds the selection from
// the last record of each chain. A filter naming dlq ids reads exactly the
// last records, by multi-last gets of at most streams.MaxMultiLast
// subjects; any other filter reads its subjects' records in stream order,
// each record replacing the decision on its chain's earlier ones. A chain
// ends at a resolving record ("nothing follows a resolved event"): it is
// counted then and forgotten, so memory grows with the unresolved chains
// read, never with the stored records.
func (sl *Selector) Run(ctx context.Context, f api.DrainFilter, cutoff time.Time, limit int) (*Selection, error) {
	// Named chains are read alone (their last records) only when nothing
	// else matters: order is waived and no resumed drain's outcomes must
	// be found in the chains' earlier records.
	// A legal hold on an unnamed earlier event of a named one's key holds
	// it even when order is waived: with active holds the domain is read.
	scanIDs := !sl.IgnoreOrder || sl.ResumeOf != "" || len(sl.Holds) > 0
	m := NewMatcher(f, cutoff, sl.IgnoreOrder, scanIDs, sl.Holds)
	sel := &Selection{Excluded: map[string]int{}, byID: map[chainKey]int32{}, byOddID: map[string]int32{}, reasons: []string{""}, codes: []string{""},
		ignoreOrder: sl.IgnoreOrder, drain: sl.ResumeOf, holdCase: map[string]string{}}
	for _, h := range sl.Holds {
		sel.holdCase[h.ID] = h.CaseID
	}
	if sl.ResumeOf != "" {
		sel.outcome = map[string]uint8{}
	}
	visit := func(raw *jetstream.RawStreamMsg) error {
		sel.visit(m, raw, sl.Seed, sl.OnItem)
		return nil
	}
	var err error
	if len(f.DLQIDs) > 0 && !scanIDs {
		err = sl.readLast(ctx, filterSubjects(f, false), visit)
	} else {
		err = sl.scan(ctx, filterSubjects(f, scanIDs)[0], visit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSelection, err)
	}
	sel.finish(limit, sl.OnFinal)
	sel.sort()
	return sel, nil
}

// scan hands fn every record on subject (a wildcard) in stream order, until
// the server reports none pending. A reader fetches the next batch while
// fn works through the last one (at most scanAhead batches wait), so the
// server's reads overlap the decoding here as a consumer's deliveries
// would.
func (sl *Selector) scan(ctx context.Context, subject string, fn func(*jetstream.RawStreamMsg) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// QUARANTINE holds quarantine.> alone: the whole stream is asked for
	// without a filter, which the server counts and steps through far
	// faster than a wildcard (records on other subjects, were any added,
	// are skipped here).
	filter := subject
	if subject == subjects.QuarantineAll {
		filter = ""
	}
	batches := make(chan []*jetstream.RawStreamMsg, scanAhead)
	errc := make(chan error, 1)
	go func() {
		defer close(batches)
		for next := uint64(1); ; {
			b, n := make([]*jetstream.RawStreamMsg, 0, ScanBatch), 0
			pending, err := streams.DirectGet(ctx, sl.JS, subjects.QuarantineStream,
				streams.DirectRequest{Seq: next, NextFor: filter, Batch: ScanBatch, MaxBytes: ScanMaxBytes},
				func(raw *jetstream.RawStreamMsg) error {
					if filter != "" || strings.HasPrefix(raw.Subject, quarantinePrefix) {
						b = append(b, raw)
					}
					n++
					next = raw.Sequence + 1
					return nil
				})
			if err != nil {
				errc <- err
				return
			}
			if n == 0 {
				return
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				errc <- ctx.Err()
				return
			}
			if pending == 0 {
				return
			}
		}
	}()
	var ferr error
	for b := range batches {
		for _, raw := range b {
			if ferr != nil {
				break
			}
			if ferr = fn(raw); ferr != nil {
				cancel() // the reader stops; the loop drains what it sent
			}
		}
	}
	if ferr != nil {
		return ferr
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// quarantinePrefix starts every QUARANTINE subject.
const quarantinePrefix = "quarantine."

// scanAhead is how many fetched batches may wait for the scan's decoding.
const scanAhead = 2

// readLast hands fn the last record of each of subjects (no wildcards), by
// multi-last gets of at most streams.MaxMultiLast subjects; a reply cut
// short by max_bytes continues from the sequence after its last record.
func (sl *Selector) readLast(ctx context.Context, subs []string, fn func(*jetstream.RawStreamMsg) error) error {
	for chunk := range slices.Chunk(subs, streams.MaxMultiLast) {
		err := streams.DirectGetAll(ctx, sl.JS, subjects.QuarantineStream,
			streams.DirectRequest{MultiLast: chunk, Batch: len(chunk), MaxBytes: ScanMaxBytes}, fn)
		if err != nil {
			return err
		}
	}
	return nil
}

// visit decides on one record: it replaces what an earlier record of its
// chain decided.
func (sel *Selection) visit(m Matcher, raw *jetstream.RawStreamMsg, seed maphash.Seed, onItem func(chain.Head, int32)) {
	if sel.seen < math.MaxUint32 {
		sel.seen++
	}
	l, err := chain.DecodeHead(raw.Data)
	if err != nil {
		// The chain's id is the subject's last token.
		_, id, _ := strings.Cut(strings.TrimPrefix(raw.Subject, quarantinePrefix), ".")
		sel.upsert(chain.Head{DLQID: id}, "unreadable", false, seed)
		return
	}
	if sel.outcome != nil {
		sel.tally(l)
	}
	reason, blocker := m.decide(l)
	switch {
	case static(reason) && !blocker:
		// Every record of a chain has the same party, first_seen and id:
		// a chain that holds nothing is excluded whatever follows, counted
		// once, at its first record, and never kept.
		if l.Index == 0 && reason != reasonNotListed {
			sel.Excluded[reason]++
		}
		sel.forget(l.DLQID)
	case l.Status() == record.StatusResolved:
		// Nothing follows a resolved event: final.
		if reason != reasonNotListed {
			sel.Excluded[reason]++
		}
		sel.forget(l.DLQID)
	default:
		idx := sel.upsert(l, reason, blocker, seed)
		if reason == "" && onItem != nil {
			onItem(l, idx)
		}
	}
}

// upsert records the decision of a chain's latest record in its item,
// creating the item at the chain's first record read.
func (sel *Selection) upsert(l chain.Head, reason string, blocker bool, seed maphash.Seed) int32 {
	var flags uint8
	if blocker {
		flags = flagBlocker
	}
	if strings.Contains(reason, holdSep) {
		flags |= flagLegalHold
	}
	if blocker && l.PartyID != "" {
		if sel.parties == nil {
			sel.parties = map[string]string{}
		}
		sel.parties[l.DLQID] = l.PartyID
	}
	it := packFields(l, flags, seed)
	it.ord = sel.seen
	it.reason = sel.reasonCode(reason)
	it.code = intern(&sel.codes, string(l.ErrorCode))
	if it.flags&flagOddID == 0 {
		k := chainKey{it.id, it.dom}
		if idx, ok := sel.byID[k]; ok {
			sel.Items[idx] = it
			return idx
		}
		idx := int32(len(sel.Items))
		sel.byID[k] = idx
		sel.Items = append(sel.Items, it)
		return idx
	}
	if idx, ok := sel.byOddID[l.DLQID]; ok {
		it.id = sel.Items[idx].id // keep its odd-table entry
		sel.Items[idx] = it
		return idx
	}
	sel.addOdd(&it, l.DLQID)
	idx := int32(len(sel.Items))
	sel.byOddID[l.DLQID] = idx
	sel.Items = append(sel.Items, it)
	return idx
}

// forget drops the item of a chain that ended (or that no record of can
// select).
func (sel *Selection) forget(id string) {
	var it Item
	if k, ok := packID(id, &it); ok {
		if idx, found := sel.byID[k]; found {
			sel.Items[idx].flags |= flagDead
			delete(sel.byID, k)
		}
		return
	}
	if idx, found := sel.byOddID[id]; found {
		sel.Items[idx].flags |= flagDead
		delete(sel.byOddID, id)
	}
}

// reasonCode interns an exclusion reason ("" is 0); past 255 reasons the
// last one stands for the rest (reasons are a few fixed strings and the
// classes, so this does not happen).
func (sel *Selection) reasonCode(reason string) uint8 { return intern(&sel.reasons, reason) }

// intern returns the index of s in *table, appending it when new; past 255
// entries the last one stands for the rest.
func intern(table *[]string, s string) uint8 {
	if i := slices.Index(*table, s); i >= 0 {
		return uint8(i)
	}
	if len(*table) == math.MaxUint8+1 {
		return math.MaxUint8
	}
	*table = append(*table, s)
	return uint8(len(*table) - 1)
}

// CodeOfItem returns the error code of an item's latest failure.
func (sel *Selection) CodeOfItem(it Item) string { return sel.codeName(it.code) }

// codeName returns the error code interned as c.
func (sel *Selection) codeName(c uint8) string {
	if int(c) < len(sel.codes) {
		return sel.codes[c]
	}
	return ""
}

// Canary returns the indexes in sel.items of up to n events for a
// drain's canary: only heads of their lanes (the first event of a key in
// the selection, not held by an unselected earlier one), so that the
// canary never replays an event before an earlier one of its key; spread
// round-robin over the error codes (in code order), then over the keys
// (lanes in the drain's order).
func (sel *Selection) Canary(n int) []int {
	if n <= 0 {
		return nil
	}
	byCode := map[uint8][]int{}
	for lo := 0; lo < len(sel.Items); lo = sel.LaneEnd(lo) {
		it := sel.Items[lo]
		if it.flags&flagBlocker != 0 || len(byCode[it.code]) >= n {
			continue
		}
		byCode[it.code] = append(byCode[it.code], lo)
	}
	codes := make([]uint8, 0, len(byCode))
	for c := range byCode {
		codes = append(codes, c)
	}
	slices.SortFunc(codes, func(a, b uint8) int { return cmp.Compare(sel.codeName(a), sel.codeName(b)) })
	var out []int
	for round := 0; len(out) < n; round++ {
		added := false
		for _, c := range codes {
			if l := byCode[c]; round < len(l) && len(out) < n {
				out = append(out, l[round])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return out
}

// Live reports whether item idx (as onItem named it) is still selected once
// the scan ended; valid only in onFinal, before finish compacts the items.
func (sel *Selection) Live(idx int32) bool {
	it := sel.Items[idx]
	return it.flags&flagDead == 0 && it.reason == 0
}

// finish settles the decisions once every record was read: the chains
// selected are kept up to limit (in the stream order of their last
// records; 0: no limit), the excluded ones counted by reason, the blockers
// among them kept (they hold their keys' lanes), the rest dropped. onFinal,
// when set, sees the selection before it is compacted.
func (sel *Selection) finish(limit int, onFinal func(*Selection)) {
	sel.byID, sel.byOddID = nil, nil
	if limit > 0 {
		var ords []uint32
		for _, it := range sel.Items {
			if it.flags&flagDead == 0 && it.reason == 0 {
				ords = append(ords, it.ord)
			}
		}
		if len(ords) > limit {
			slices.Sort(ords)
			last := ords[limit-1]
			for i := range sel.Items {
				if it := &sel.Items[i]; it.flags&flagDead == 0 && it.reason == 0 && it.ord > last {
					// Beyond the limit: excluded, and holding the later
					// events of its key like any unselected one.
					it.reason = sel.reasonCode("limit")
					if !sel.ignoreOrder {
						it.flags |= flagBlocker
					}
				}
			}
		}
	}
	if onFinal != nil {
		onFinal(sel)
	}
	out := sel.Items[:0]
	for _, it := range sel.Items {
		switch {
		case it.flags&flagDead != 0:
			continue
		case it.reason != 0:
			r, _ := splitReason(sel.reasons[it.reason])
			switch {
			case r == api.ReasonLegalHold:
				// Selected, and held: counted so, never replayed.
				sel.Selected++
				sel.HeldByHold++
				if sel.byHold == nil {
					sel.byHold = map[string]int{}
				}
				_, holdID := splitReason(sel.reasons[it.reason])
				sel.byHold[holdID]++
				if len(sel.UnderHold) < api.MaxHeldBy {
					sel.UnderHold = append(sel.UnderHold, sel.BlockerOf(it))
				}
			case r != reasonNotListed:
				sel.Excluded[r]++
			}
			if it.flags&flagBlocker == 0 || it.flags&flagNoKey != 0 {
				continue
			}
		default:
			sel.Selected++
		}
		// A blocker keeps its reason (blockerOf names it).
		out = append(out, it)
	}
	clear(sel.Items[len(out):])
	sel.Items = slices.Clip(out)
}

// add appends a last record as a new item (tests build selections with it).
func (sel *Selection) add(l chain.Head, flags uint8, seed maphash.Seed) {
	it := sel.pack(l, flags, seed)
	it.ord = sel.seen
	sel.Items = append(sel.Items, it)
}

// pack builds the item of a last record, adding an odd id to the side
// table.
func (sel *Selection) pack(l chain.Head, flags uint8, seed maphash.Seed) Item {
	it := packFields(l, flags, seed)
	if it.flags&flagOddID != 0 {
		sel.addOdd(&it, l.DLQID)
	}
	return it
}

// addOdd stores an odd id in the side table and makes it refer to it.
func (sel *Selection) addOdd(it *Item, id string) {
	n := len(sel.odd)
	sel.odd = append(sel.odd, id)
	it.id[0], it.id[1], it.id[2], it.id[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}

// packFields builds the item of a last record; an odd id is only flagged.
func packFields(l chain.Head, flags uint8, seed maphash.Seed) Item {
	it := Item{flags: flags}
	if l.EventTime != nil {
		it.t = l.EventTime.UnixNano()
	}
	if l.OrderingKey == "" {
		it.flags |= flagNoKey
	} else {
		it.okey = HashKey(seed, l.Domain, l.OrderingKey)
	}
	if _, ok := packID(l.DLQID, &it); !ok {
		it.flags |= flagOddID
	}
	return it
}

// packID packs a standard dlq id ("<domain>_<32 hex>" of a known domain)
// into it; ok is false for any other id.
func packID(id string, it *Item) (chainKey, bool) {
	dom, rest, _ := domain.SplitID(id)
	if d := slices.Index(domainTable, dom); d > 0 && len(rest) == 32 {
		var k chainKey
		if _, err := hex.Decode(k.id[:], []byte(rest)); err == nil {
			k.dom = uint8(d)
			it.id, it.dom = k.id, k.dom
			return k, true
		}
	}
	return chainKey{}, false
}

// HashKey hashes a domain's ordering key.
func HashKey(seed maphash.Seed, domain, key string) uint64 {
	return maphash.String(seed, domain+"\x1f"+key)
}

// sort orders the items into lanes (by key, then event time, then id) and
// the lanes by where their first event's chain is stored. A drain thus
// reads QUARANTINE about in stream order, whatever the keys: the server
// serves its reads from the few blocks it has loaded instead of loading
// blocks all over a large stream (at a million records, random order made
// the first replays wait seconds each and kept every block in memory).
//
// Lanes of blockers alone hold nothing and are dropped.
func (sel *Selection) sort() {
	slices.SortFunc(sel.Items, cmpInLane)
	out := sel.Items[:0]
	for lo := 0; lo < len(sel.Items); {
		hi := sel.LaneEnd(lo)
		if !slices.ContainsFunc(sel.Items[lo:hi], func(it Item) bool { return it.flags&flagBlocker == 0 }) {
			lo = hi
			continue
		}
		ord := sel.Items[lo].ord
		for _, it := range sel.Items[lo:hi] {
			it.ord = ord
			out = append(out, it)
		}
		lo = hi
	}
	clear(sel.Items[len(out):])
	sel.Items = slices.Clip(out)
	slices.SortFunc(sel.Items, func(a, b Item) int {
		if c := cmp.Compare(a.ord, b.ord); c != 0 {
			return c
		}
		return cmpInLane(a, b)
	})
}

// cmpInLane orders items by key lane, then event time, then id.
func cmpInLane(a, b Item) int {
	if c := cmpKey(a, b); c != 0 {
		return c
	}
	if a.t != b.t {
		if a.t < b.t {
			return -1
		}
		return 1
	}
	// A blocker at the same time goes first: it holds.
	if a.flags&flagBlocker != b.flags&flagBlocker {
		if a.flags&flagBlocker != 0 {
			return -1
		}
		return 1
	}
	return slices.Compare(a.id[:], b.id[:])
}

// cmpKey orders lanes: keyed items by key hash, unkeyed ones after them.
func cmpKey(a, b Item) int {
	an, bn := a.flags&flagNoKey != 0, b.flags&flagNoKey != 0
	switch {
	case an != bn:
		if an {
			return 1
		}
		return -1
	case a.okey < b.okey:
		return -1
	case a.okey > b.okey:
		return 1
	}
	return 0
}

// sameLane reports whether b follows a in one ordered lane.
func sameLane(a, b Item) bool {
	return a.flags&flagNoKey == 0 && b.flags&flagNoKey == 0 && a.okey == b.okey
}

// IDOf unpacks an item's dlq id and domain.
func (sel *Selection) IDOf(it Item) (domain, id string) {
	if it.flags&flagOddID != 0 {
		n := int(it.id[0]) | int(it.id[1])<<8 | int(it.id[2])<<16 | int(it.id[3])<<24
		id = sel.odd[n]
		domain, _ = DomainOf(id)
		return domain, id
	}
	domain = domainTable[it.dom]
	return domain, domain + "_" + hex.EncodeToString(it.id[:])
}

// Lanes calls fn with each ordered lane of the selection (a run of items
// sharing an ordering key, or one unkeyed item), in order, until fn
// returns false.
func (sel *Selection) Lanes(fn func(lane []Item) bool) {
	for lo := 0; lo < len(sel.Items); {
		hi := sel.LaneEnd(lo)
		if !fn(sel.Items[lo:hi]) {
			return
		}
		lo = hi
	}
}

// LaneEnd returns the end of the lane starting at index lo.
func (sel *Selection) LaneEnd(lo int) int {
	hi := lo + 1
	for hi < len(sel.Items) && sameLane(sel.Items[lo], sel.Items[hi]) {
		hi++
	}
	return hi
}

// BlockerOf names a blocker item: its dlq id and why it is not selected
// (an event under a legal hold: api.ReasonLegalHold, its hold and case).
func (sel *Selection) BlockerOf(it Item) api.Blocker {
	_, id := sel.IDOf(it)
	reason := "unselected"
	if int(it.reason) < len(sel.reasons) && it.reason != 0 {
		reason = sel.reasons[it.reason]
	}
	b := api.Blocker{DLQID: id, Reason: reason, PartyID: sel.parties[id]}
	if _, holdID := splitReason(reason); holdID != "" {
		b.Reason, b.HoldID, b.CaseID = api.ReasonLegalHold, holdID, sel.holdCase[holdID]
	}
	return b
}

// Outcomes of a resumed drain found in the chains (selection.outcome):
// outcomeRequested is a bit (this drain appended the chain's
// redrive_requested), the rest the outcome that followed.
const (
	outcomeRequested uint8 = 1 << 3
	outcomeCommitted uint8 = 1
	outcomeDuplicate uint8 = 2
	outcomeFailed    uint8 = 3
	outcomePoisoned  uint8 = 4
)

// tally notes what record l says of the resumed drain's work on its chain
// (records are read in stream order, so a chain's outcome follows its
// request): a redrive_requested of the drain, then the replayed or
// skipped_duplicate it appended, or the replay_failed or poisoned the
// quarantiner appended after the drain's request.
func (sel *Selection) tally(l chain.Head) {
	cur, seen := sel.outcome[l.DLQID]
	mine := l.DrainID != "" && l.DrainID == sel.drain
	switch {
	case l.Kind == record.KindRedriveRequested && mine:
		sel.outcome[l.DLQID] = outcomeRequested
	case l.Kind == record.KindReplayed && mine:
		sel.outcome[l.DLQID] = cur&outcomeRequested | outcomeCommitted
	case l.Kind == record.KindSkippedDuplicate && mine:
		sel.outcome[l.DLQID] = cur&outcomeRequested | outcomeDuplicate
	case seen && cur == outcomeRequested && l.Kind == record.KindReplayFailed:
		sel.outcome[l.DLQID] = cur | outcomeFailed
	case seen && cur == outcomeRequested && l.Kind == record.KindPoisoned:
		sel.outcome[l.DLQID] = cur | outcomePoisoned
	}
}

// ResumeCounts are a resumed drain's outcomes found in the chains.
type ResumeCounts struct {
	// Replayed counts the chains whose replay this drain requested and
	// that have an outcome; the others count the outcomes.
	Replayed, Committed, SkippedDup, ReplayFailed, Poisoned int
}

// Done is how many selected events they settle.
func (c ResumeCounts) Done() int { return c.Committed + c.SkippedDup + c.ReplayFailed + c.Poisoned }

// Tallied sums the resumed drain's outcomes (a chain whose request has no
// outcome yet is replayed again, and counted then).
func (sel *Selection) Tallied() ResumeCounts {
	var c ResumeCounts
	for _, o := range sel.outcome {
		switch o &^ outcomeRequested {
		case outcomeCommitted:
			c.Committed++
		case outcomeDuplicate:
			c.SkippedDup++
		case outcomeFailed:
			c.ReplayFailed++
		case outcomePoisoned:
			c.Poisoned++
		default:
			continue
		}
		if o&outcomeRequested != 0 {
			c.Replayed++
		}
	}
	return c
}

// Truncate keeps the first n selected items (in lane order) selected, for a
// resumed drain's limit; the others are excluded by the limit and, unless
// order is ignored, hold the later events of their lanes.
func (sel *Selection) Truncate(n int) {
	out := sel.Items[:0]
	for _, it := range sel.Items {
		if it.flags&flagBlocker == 0 {
			if n > 0 {
				n--
				out = append(out, it)
				continue
			}
			sel.Selected--
			sel.Excluded["limit"]++
			if sel.ignoreOrder || it.flags&flagNoKey != 0 {
				continue
			}
			it.reason = sel.reasonCode("limit")
			it.flags |= flagBlocker
		}
		out = append(out, it)
	}
	clear(sel.Items[len(out):])
	sel.Items = out
}

// HoldCounts returns the selected events under a legal hold, counted by
// hold (most first, then by id), with the holds' cases.
func (sel *Selection) HoldCounts() []api.HoldCount {
	out := make([]api.HoldCount, 0, len(sel.byHold))
	for id, n := range sel.byHold {
		out = append(out, api.HoldCount{HoldID: id, CaseID: sel.holdCase[id], Records: n})
	}
	slices.SortFunc(out, func(a, b api.HoldCount) int {
		if c := cmp.Compare(b.Records, a.Records); c != 0 {
			return c
		}
		return cmp.Compare(a.HoldID, b.HoldID)
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
