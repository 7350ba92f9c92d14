package redriver

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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// item is one event of a drain's selection, kept compact so that a
// selection of a million events costs about 40 MB: the dlq id packed to 16
// bytes (ids are "<domain>_<32 hex>"; any other id is kept in a side table),
// the ordering key as a 64-bit hash (a collision only makes two keys share
// one ordered lane), the event time in nanoseconds, and where the chain is
// stored (see ord).
type item struct {
	id   [16]byte
	okey uint64
	t    int64
	// ord is the chain's place in QUARANTINE (the selection streams the
	// last records in stream order); once sorted, the place of its lane's
	// first event.
	ord uint32
	dom uint8
	// flags: flagBlocker (an unresolved, unselected event that holds the
	// later events of its key), flagNoKey (no ordering key: its own lane),
	// flagOddID (id[0:4] indexes selection.odd).
	flags uint8
}

const (
	flagBlocker = 1 << iota
	flagNoKey
	flagOddID
)

// domainTable maps a domain to its item code; 0 is "other" (an odd id).
var domainTable = []string{"", "pharmacy", "dscsa", "fsma", record.UnknownDomain}

// selection is a drain's sorted selection.
type selection struct {
	items []item
	odd   []string
	// selected counts the non-blocker items.
	selected int
	// seen counts the chains streamed so far (the ord of the next item).
	seen uint32
	// excluded counts events not selected, by reason.
	excluded map[string]int
}

// lastRecord is what selection reads from the last record of a chain.
type lastRecord struct {
	DLQID        string     `json:"dlq_id"`
	Index        int        `json:"index"`
	Kind         string     `json:"kind"`
	Domain       string     `json:"domain"`
	Class        string     `json:"class"`
	ErrorCode    string     `json:"error_code"`
	OrderingKey  string     `json:"ordering_key"`
	PartyID      string     `json:"party_id"`
	EventTime    *time.Time `json:"event_time"`
	FirstSeen    time.Time  `json:"first_seen"`
	RedriveCount int        `json:"redrive_count"`
	Idempotency  string     `json:"idempotency_key"`
}

// status returns the chain status implied by its last record.
func (l lastRecord) status() string {
	switch l.Kind {
	case record.KindReplayed, record.KindSkippedDuplicate, record.KindResolved:
		return record.StatusResolved
	case record.KindRedriveRequested:
		return record.StatusRedriving
	case record.KindPoisoned:
		return record.StatusPoison
	}
	if l.Class == record.ClassPoison {
		return record.StatusPoison
	}
	return record.StatusOpen
}

// filterSubjects returns the QUARANTINE subjects a filter reads.
func filterSubjects(f api.DrainFilter) []string {
	if len(f.DLQIDs) > 0 {
		out := make([]string, 0, len(f.DLQIDs))
		for _, id := range f.DLQIDs {
			dom, _ := domainOfID(id)
			out = append(out, subjects.Quarantine(dom, id))
		}
		return out
	}
	if f.Domain != "" {
		return []string{"quarantine." + f.Domain + ".>"}
	}
	return []string{subjects.QuarantineAll}
}

// matcher applies a drain's filter to last records.
type matcher struct {
	f       api.DrainFilter
	classes map[string]bool
	codes   map[string]bool
	until   time.Time // zero: none
}

func newMatcher(f api.DrainFilter, cutoff time.Time) matcher {
	m := matcher{f: f, classes: map[string]bool{}, codes: map[string]bool{}}
	if len(f.Classes) == 0 {
		m.classes[record.ClassExhausted] = true
		if f.IncludeValidation {
			m.classes[record.ClassValidation] = true
		}
	}
	for _, c := range f.Classes {
		m.classes[c] = true
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
// whether an excluded event still holds the later events of its key.
func (m matcher) decide(l lastRecord) (reason string, blocker bool) {
	switch {
	case len(m.codes) > 0 && !m.codes[l.ErrorCode]:
		return "error_code", false
	case m.f.PartyID != "" && l.PartyID != m.f.PartyID:
		return "party_id", false
	case m.f.Since != nil && l.FirstSeen.Before(*m.f.Since):
		return "first_seen", false
	case !m.until.IsZero() && !l.FirstSeen.Before(m.until):
		return "first_seen", false
	}
	switch l.status() {
	case record.StatusResolved:
		return "resolved", false
	case record.StatusPoison:
		return "poison", true
	}
	if !m.classes[l.Class] {
		return "class_" + l.Class, true
	}
	// A validation event replays only corrected (found when its chain is
	// read: a chain of one record has no correction) or when asked.
	if l.Class == record.ClassValidation && !m.f.IncludeValidation && l.Index == 0 {
		return "validation_uncorrected", true
	}
	return "", false
}

// selector streams a filter's chains (the last record of each) and builds
// a selection.
type selector struct {
	js     jetstream.JetStream
	seed   maphash.Seed
	onItem func(l lastRecord) // optional, for dry runs
}

// errSelection wraps a failure to stream the selection.
var errSelection = errors.New("redriver: selection failed")

// run streams QUARANTINE with an ordered consumer delivering the last record
// of every chain (one subject per chain), so memory grows with the selected
// items only, never with the stored records.
func (sl *selector) run(ctx context.Context, f api.DrainFilter, cutoff time.Time, limit int) (*selection, error) {
	m := newMatcher(f, cutoff)
	sel := &selection{excluded: map[string]int{}}
	cons, err := sl.js.OrderedConsumer(ctx, subjects.QuarantineStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: filterSubjects(f),
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSelection, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSelection, err)
	}
	if info.NumPending > 0 {
		it, err := cons.Messages(jetstream.PullMaxMessages(1024))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errSelection, err)
		}
		defer it.Stop()
		for {
			msg, err := nextMsg(ctx, it)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", errSelection, err)
			}
			if sel.seen < math.MaxUint32 {
				sel.seen++
			}
			var l lastRecord
			if err := jsonv2.Unmarshal(msg.Data(), &l); err != nil || l.DLQID == "" {
				sel.excluded["unreadable"]++
			} else if reason, blocker := m.decide(l); reason != "" {
				sel.excluded[reason]++
				if blocker && l.OrderingKey != "" {
					sel.add(l, flagBlocker, sl.seed)
				}
			} else if limit > 0 && sel.selected >= limit {
				sel.excluded["limit"]++
			} else {
				sel.add(l, 0, sl.seed)
				sel.selected++
				if sl.onItem != nil {
					sl.onItem(l)
				}
			}
			meta, err := msg.Metadata()
			if err != nil || meta.NumPending == 0 {
				break
			}
		}
	}
	sel.sort()
	return sel, nil
}

// nextMsg returns the next message, giving up when ctx is done.
func nextMsg(ctx context.Context, it jetstream.MessagesContext) (jetstream.Msg, error) {
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if errors.Is(err, jetstream.ErrNoHeartbeat) && ctx.Err() == nil {
			continue
		}
		return m, err
	}
}

// add packs a last record into an item.
func (sel *selection) add(l lastRecord, flags uint8, seed maphash.Seed) {
	it := sel.pack(l, flags, seed)
	it.ord = sel.seen
	sel.items = append(sel.items, it)
}

// pack builds the item of a last record.
func (sel *selection) pack(l lastRecord, flags uint8, seed maphash.Seed) item {
	it := item{flags: flags}
	if l.EventTime != nil {
		it.t = l.EventTime.UnixNano()
	}
	if l.OrderingKey == "" {
		it.flags |= flagNoKey
	} else {
		it.okey = hashKey(seed, l.Domain, l.OrderingKey)
	}
	dom, rest, _ := strings.Cut(l.DLQID, "_")
	if d := slices.Index(domainTable, dom); d > 0 && len(rest) == 32 {
		if _, err := hex.Decode(it.id[:], []byte(rest)); err == nil {
			it.dom = uint8(d)
			return it
		}
	}
	n := len(sel.odd)
	sel.odd = append(sel.odd, l.DLQID)
	it.id[0], it.id[1], it.id[2], it.id[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	it.flags |= flagOddID
	return it
}

// seedOf returns a fresh seed for ordering-key hashes.
func seedOf() maphash.Seed { return maphash.MakeSeed() }

// hashKey hashes a domain's ordering key.
func hashKey(seed maphash.Seed, domain, key string) uint64 {
	return maphash.String(seed, domain+"\x1f"+key)
}

// sort orders the items into lanes (by key, then event time, then id) and
// the lanes by where their first event's chain is stored. A drain thus
// reads QUARANTINE about in stream order, whatever the keys: the server
// serves its reads from the few blocks it has loaded instead of loading
// blocks all over a large stream (at a million records, random order made
// the first replays wait seconds each and kept every block in memory).
func (sel *selection) sort() {
	slices.SortFunc(sel.items, cmpInLane)
	for lo := 0; lo < len(sel.items); {
		hi := sel.laneEnd(lo)
		for i := lo + 1; i < hi; i++ {
			sel.items[i].ord = sel.items[lo].ord
		}
		lo = hi
	}
	slices.SortFunc(sel.items, func(a, b item) int {
		if c := cmp.Compare(a.ord, b.ord); c != 0 {
			return c
		}
		return cmpInLane(a, b)
	})
}

// cmpInLane orders items by key lane, then event time, then id.
func cmpInLane(a, b item) int {
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
func cmpKey(a, b item) int {
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
func sameLane(a, b item) bool {
	return a.flags&flagNoKey == 0 && b.flags&flagNoKey == 0 && a.okey == b.okey
}

// idOf unpacks an item's dlq id and domain.
func (sel *selection) idOf(it item) (domain, id string) {
	if it.flags&flagOddID != 0 {
		n := int(it.id[0]) | int(it.id[1])<<8 | int(it.id[2])<<16 | int(it.id[3])<<24
		id = sel.odd[n]
		domain, _ = domainOfID(id)
		return domain, id
	}
	domain = domainTable[it.dom]
	return domain, domain + "_" + hex.EncodeToString(it.id[:])
}

// lanes calls fn with each ordered lane of the selection (a run of items
// sharing an ordering key, or one unkeyed item), in order, until fn
// returns false.
func (sel *selection) lanes(fn func(lane []item) bool) {
	for lo := 0; lo < len(sel.items); {
		hi := sel.laneEnd(lo)
		if !fn(sel.items[lo:hi]) {
			return
		}
		lo = hi
	}
}

// laneEnd returns the end of the lane starting at index lo.
func (sel *selection) laneEnd(lo int) int {
	hi := lo + 1
	for hi < len(sel.items) && sameLane(sel.items[lo], sel.items[hi]) {
		hi++
	}
	return hi
}
