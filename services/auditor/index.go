package auditor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"hash"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/merkle"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// entry is the auditor's live summary of one unresolved quarantine chain:
// the fields lists, groups, gauges and reconciliation need, never a
// payload.
type entry struct {
	dlqID, domain, class, code, party, key string
	okey                                   string // ordering key: the identifiers a search matches
	pokey                                  string // the ordering key the payload names (okey's fallback)
	publisher                              string // of the original event
	status                                 record.Status
	redrives, records                      int
	firstSeen, quarantinedAt, lastChange   time.Time
	lastHash                               string
	seq                                    uint64 // QUARANTINE sequence of record 0
	sourceStream                           string
	sourceSeq                              uint64 // of record 0: the original event
	// eventType is the event's type (eventTypeOf, interned: the index
	// holds millions of entries and few types); ids the first record's
	// listed identifiers but event_type (listedPairs), nil on older
	// records.
	eventType string
	ids       []string
	// doc is the EPCIS document the event was read from (nil for most:
	// shared by the document's events).
	doc *docInfo
}

// docInfo is an EPCIS document some quarantined events were read from, as
// their first records name it, with counts of those events: the index
// keeps one per document (bounded by the documents, not the events).
type docInfo struct {
	doc    api.GroupDocument
	domain string
	// total counts the document's quarantined chains; resolved those
	// resolved, by their latest error code.
	total    int
	resolved map[string]int
	// firstSeen and lastSeen bound the events' first_seen.
	firstSeen, lastSeen time.Time
	// stream and seq locate the document's (first) message in EVENTS;
	// sample and sampleIndex are its first quarantined event and that
	// event's position (what names the document's message among those a
	// reconciliation reads: a document sent in parts is reconciled under
	// its manifest).
	stream      string
	seq         uint64
	sample      string
	sampleIndex int
}

// docOf returns the document of a chain whose first record is r (nil
// when it was not read from one), counting the chain.
func (x *index) docOf(r chain.Head, firstSeen time.Time) *docInfo {
	d := r.Document
	if d == nil || d.SHA256 == "" {
		return nil
	}
	di := x.docs[d.SHA256]
	if di == nil {
		di = &docInfo{doc: api.GroupDocument{ID: d.ID, SHA256: d.SHA256, Format: d.Format, Events: d.Count, Sender: d.Sender,
			Receiver: d.Receiver, Created: d.Created}, domain: r.Domain, resolved: map[string]int{}, stream: d.Stream, seq: d.Seq,
			sample: r.DLQID, sampleIndex: d.Index}
		x.docs[d.SHA256] = di
	}
	di.total++
	if di.firstSeen.IsZero() || firstSeen.Before(di.firstSeen) {
		di.firstSeen = firstSeen
	}
	if firstSeen.After(di.lastSeen) {
		di.lastSeen = firstSeen
	}
	return di
}

// maxInterned bounds the strings the index interns (event types and
// identifier names): past it, a new string is kept as it is.
const maxInterned = 4096

// intern returns the index's copy of s (under x.mu).
func (x *index) intern(s string) string {
	if v, ok := x.interned[s]; ok {
		return v
	}
	if len(x.interned) < maxInterned {
		x.interned[s] = s
	}
	return s
}

// eventTypeOf is the event type of a chain whose first record is h: the
// type its identifiers name (a DSCSA business step: an event of a
// document arrives on the document's subject), else the last token of
// its source subject (subjects.ParseEvent); "" when neither tells.
func eventTypeOf(h chain.Head) string {
	if t := h.Identifiers["event_type"]; t != "" {
		return t
	}
	if _, t, ok := subjects.ParseEvent(h.SourceSubject); ok {
		return t
	}
	return ""
}

// listedPairs returns the first record's identifiers but event_type as
// name, value pairs sorted by name, the names interned (nil for none):
// a slice costs less than a map per entry.
func (x *index) listedPairs(ids map[string]string) []string {
	out := pairsOf(ids)
	for i := 0; i < len(out); i += 2 {
		out[i] = x.intern(out[i])
	}
	return out
}

// unresolved reports whether the chain still needs attention.
func (e *entry) unresolved() bool { return e.status != record.StatusResolved }

// open reports whether the chain is open or redriving (not poison).
func (e *entry) open() bool {
	return e.status == record.StatusOpen || e.status == record.StatusRedriving
}

// groupKey names a second-level triage group: fingerprint and party.
type groupKey struct{ domain, code, class, party string }

// maxResolvedSamples is how many resolved dlq ids a group keeps as
// samples (the newest): a group's samples list its unresolved events
// first, then at most this many resolved ones.
const maxResolvedSamples = 10

// sample is a resolved event kept as a group sample.
type sample struct {
	dlqID         string
	quarantinedAt time.Time
}

// resolvedGroup aggregates the resolved events of one triage group,
// O(1) memory per group: the events themselves are not kept.
type resolvedGroup struct {
	total               int
	firstSeen, lastSeen time.Time // bounds of the events' first_seen
	samples             []sample  // newest first, at most maxResolvedSamples
}

// add counts the resolved chain e.
func (g *resolvedGroup) add(e *entry) {
	g.total++
	if g.firstSeen.IsZero() || e.firstSeen.Before(g.firstSeen) {
		g.firstSeen = e.firstSeen
	}
	if e.firstSeen.After(g.lastSeen) {
		g.lastSeen = e.firstSeen
	}
	s := sample{e.dlqID, e.quarantinedAt}
	i, _ := slices.BinarySearchFunc(g.samples, s, newerSample)
	if i < maxResolvedSamples {
		g.samples = slices.Insert(g.samples, i, s)
		if len(g.samples) > maxResolvedSamples {
			g.samples = g.samples[:maxResolvedSamples]
		}
	}
}

// newerSample orders samples newest first (by quarantine time, then dlq id).
func newerSample(a, b sample) int {
	if c := b.quarantinedAt.Compare(a.quarantinedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.dlqID, b.dlqID)
}

// index is the auditor's live view of QUARANTINE, fed in stream order by
// the follower (batched direct gets): an entry per UNRESOLVED chain, aggregates of the
// resolved ones per triage group (counts, first and last seen, a few
// samples), the domains seen and the running checkpoint digest (the
// audit-log line of each record is the quarantiner's, written as it
// stores it). Its memory grows with the unresolved chains and the groups,
// not with the records or the resolved chains. It does not verify seals
// (verify does); it follows the lifecycle as the records state it.
type index struct {
	log     *slog.Logger
	metrics *metrics

	mu       sync.RWMutex
	chains   map[string]*entry // unresolved chains
	resolved map[groupKey]*resolvedGroup
	domains  map[string]bool
	lastSeq  uint64               // last QUARANTINE sequence applied
	count    uint64               // records applied
	digest   hash.Hash            // running SHA-256 (api.CheckpointAlgorithm)
	tree     *merkle.BlockBuilder // Merkle tree of the records (api.MerkleAlgorithm)
	line     []byte
	wake     chan struct{} // asks the follower to read now
	// held are the chains a legal hold holds (resolved ones too), by dlq
	// id: the holds their records placed and did not lift.
	held map[string]*heldChain
	// onRecord, when set, is told of every record applied (under the
	// lock: it must not block), with the chain as a hold matches it after
	// the record and the chain's holds when it is held.
	onRecord func(h chain.Head, sub hold.Subject, hc *heldChain)
	// alert, when set, publishes a notification (notify.Publisher.Publish:
	// it never blocks): a new failure group and a poison record stored
	// after the view started following QUARANTINE (past liveFrom, its last
	// sequence then; or, when that could not be read, once the first read
	// of QUARANTINE is done): a restart does not notify the groups and
	// poison records it reads again.
	alert     func(notify.Event)
	live      bool
	liveFrom  uint64
	liveKnown bool
	// fingerprints are the failure groups seen (domain:code:class).
	fingerprints map[string]bool
	// interned are the strings entries share (intern).
	interned map[string]string
	// docs are the EPCIS documents quarantined events were read from, by
	// the documents' SHA-256.
	docs map[string]*docInfo
}

// heldChain is a chain a legal hold holds.
type heldChain struct {
	domain  string
	holds   map[string]bool // hold ids placed and not lifted
	records int             // records applied
}

func newIndex(log *slog.Logger, m *metrics, anchorBlocks int) *index {
	return &index{log: log, metrics: m, chains: map[string]*entry{}, resolved: map[groupKey]*resolvedGroup{},
		domains: map[string]bool{}, digest: sha256.New(), tree: merkle.NewBlockBuilder(anchorBlocks),
		wake: make(chan struct{}, 1), held: map[string]*heldChain{}, fingerprints: map[string]bool{},
		interned: map[string]string{}, docs: map[string]*docInfo{}}
}

// viewState is what a checkpoint covers: the records applied up to
// lastSeq, their running digest and their Merkle tree.
type viewState struct {
	lastSeq, count uint64
	digest         string
	root           merkle.Hash
	height         int           // of the blocks
	blocks         []merkle.Hash // block hashes of the tree
}

// snapshot returns the running digest and Merkle state.
func (x *index) snapshot() viewState {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return viewState{lastSeq: x.lastSeq, count: x.count, digest: hexSum(x.digest), root: x.tree.Root(),
		height: x.tree.Height(), blocks: x.tree.Blocks()}
}

// applied returns the last sequence applied.
func (x *index) applied() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.lastSeq
}

// apply folds the stored record raw, read at seq, into the view. A chain
// that resolves leaves the view for its group's aggregates. A record of a
// chain that is not in the view starts an entry from that record: a new
// chain, or (which the quarantiner refuses; only a break-glass admin could
// write one) a record appended to a chain already resolved, which is then
// counted again.
func (x *index) apply(seq uint64, raw []byte) {
	r, err := chain.DecodeHead(raw)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.line = digestLine(x.line[:0], seq, r.AuditHash)
	x.digest.Write(x.line)
	x.tree.Add(leafOf(seq, r.AuditHash))
	x.lastSeq, x.count = seq, x.count+1
	if err != nil {
		x.log.Error("AUDIT_VERIFY_FAILED", "seq", seq, "problem", "unreadable quarantine record")
		return
	}
	x.metrics.stored.WithLabelValues(string(r.Kind)).Inc()
	hc := x.applyHold(r)
	defer func() {
		if hc != nil && len(hc.holds) == 0 {
			delete(x.held, r.DLQID) // every hold lifted
		}
	}()
	e := x.chains[r.DLQID]
	if e == nil && r.Hold != nil && r.Hold.Status == record.StatusResolved {
		x.tell(r, hold.FromHead(r), hc)
		return // a hold's record on a resolved chain: it stays resolved
	}
	if e == nil {
		e = &entry{dlqID: r.DLQID, domain: r.Domain, firstSeen: r.FirstSeen.UTC(), quarantinedAt: r.QuarantinedAt.UTC(),
			key: r.IdempotencyKey, sourceStream: r.SourceStream, sourceSeq: r.SourceSeq, status: record.StatusOpen, seq: seq,
			publisher: r.Publisher, eventType: x.intern(eventTypeOf(r)), ids: x.listedPairs(r.Identifiers)}
		if r.Index == 0 {
			// What the verbatim payload names, whatever the event failed
			// on (a search finds it by them; hold.PayloadIdentifiers).
			e.pokey, e.ids = withPayload(r.Domain, raw, "", e.ids)
			for i := 0; i < len(e.ids); i += 2 {
				e.ids[i] = x.intern(e.ids[i])
			}
		}
		e.doc = x.docOf(r, e.firstSeen)
		x.chains[r.DLQID] = e
		x.domains[r.Domain] = true
	}
	e.records++
	e.class, e.code, e.redrives = string(r.Class), string(r.ErrorCode), r.RedriveCount
	if r.PartyID != "" {
		e.party = r.PartyID
	}
	if r.OrderingKey != "" {
		e.okey = r.OrderingKey
	}
	if r.IdempotencyKey != "" {
		e.key = r.IdempotencyKey
	}
	e.lastChange, e.lastHash = r.QuarantinedAt.UTC(), r.AuditHash
	e.status = record.StatusAfter(e.status, r.Kind)
	if r.Hold != nil && r.Hold.Status != "" {
		e.status = r.Hold.Status // the status a hold's record keeps
	}
	x.tell(r, e.subject(), hc)
	x.notice(seq, r, e)
	if !e.unresolved() {
		k := groupKey{e.domain, e.code, e.class, e.party}
		g := x.resolved[k]
		if g == nil {
			g = &resolvedGroup{}
			x.resolved[k] = g
		}
		g.add(e)
		if e.doc != nil {
			e.doc.resolved[e.code]++
		}
		delete(x.chains, r.DLQID)
	}
}

// tell tells onRecord of record r of the chain sub summarizes (under
// x.mu), with the chain's holds when it is held.
func (x *index) tell(r chain.Head, sub hold.Subject, hc *heldChain) {
	if x.onRecord != nil {
		x.onRecord(r, sub, hc)
	}
}

// subject is the chain as a hold's target matches it: its party, latest
// code, first seen and identifiers (the payload's among them).
func (e *entry) subject() hold.Subject {
	return hold.Subject{DLQID: e.dlqID, Domain: e.domain, PartyID: e.party, ErrorCode: codes.Code(e.code), FirstSeen: e.firstSeen,
		Chain: domain.Chain{OrderingKey: e.orderingKey(), PartyID: e.party, IdempotencyKey: e.key, DLQID: e.dlqID, Listed: e.ids}}
}

// orderingKey is the chain's ordering key: its records', else the one its
// payload names.
func (e *entry) orderingKey() string {
	if e.okey != "" {
		return e.okey
	}
	return e.pokey
}

// notice notes the failure group of e (just updated by r, read at seq)
// and publishes a new group's first event and a poison record, once the
// view is live.
func (x *index) notice(seq uint64, r chain.Head, e *entry) {
	fp := e.domain + ":" + e.code + ":" + e.class
	newGroup := e.code != "" && !x.fingerprints[fp]
	if newGroup {
		x.fingerprints[fp] = true
	}
	if x.alert == nil || !(x.live || x.liveKnown && seq > x.liveFrom) {
		return
	}
	if newGroup {
		x.alert(notify.Event{ID: "failure_group." + fp, Kind: notify.KindFailureGroup, Fingerprint: fp, Domain: e.domain,
			Code: e.code, Class: e.class, DLQID: e.dlqID, Counts: map[string]int{"quarantine_seq": int(seq)}})
	}
	if r.Kind == record.KindPoisoned {
		x.alert(notify.Event{ID: "poison." + e.dlqID + "." + strconv.Itoa(r.Index), Kind: notify.KindPoison, Domain: e.domain,
			DLQID: e.dlqID, Code: e.code, Fingerprint: fp, Counts: map[string]int{"redrive_count": r.RedriveCount, "quarantine_seq": int(seq)}})
	}
}

// setLive marks the view live: it has read QUARANTINE to its end once.
func (x *index) setLive() {
	x.mu.Lock()
	x.live = true
	x.mu.Unlock()
}

// applyHold updates the held chains for r (a hold's record places or
// lifts one) and returns r's chain's, nil when it is not held.
func (x *index) applyHold(r chain.Head) *heldChain {
	hc := x.held[r.DLQID]
	if r.Hold != nil && r.Hold.HoldID != "" {
		switch r.Kind {
		case record.KindHoldPlaced:
			if hc == nil {
				hc = &heldChain{domain: r.Domain, holds: map[string]bool{}}
				x.held[r.DLQID] = hc
			}
			hc.holds[r.Hold.HoldID] = true
		case record.KindHoldLifted:
			if hc != nil {
				delete(hc.holds, r.Hold.HoldID)
			}
		}
	}
	if hc != nil {
		hc.records = r.Index + 1
	}
	return hc
}

// carries reports whether the chain dlqID carries hold holdID (as far as
// the records applied tell).
func (x *index) carries(dlqID, holdID string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	hc := x.held[dlqID]
	return hc != nil && hc.holds[holdID]
}

// holdsOf returns the holds chain dlqID carries, sorted (nil: none).
func (x *index) holdsOf(dlqID string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	hc := x.held[dlqID]
	if hc == nil || len(hc.holds) == 0 {
		return nil
	}
	out := make([]string, 0, len(hc.holds))
	for h := range hc.holds {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// heldRef names a held chain.
type heldRef struct {
	dlqID, domain string
	records       int
	holds         []string
}

// heldChains returns the held chains (holdID "": all of them; else those
// that carry holdID), sorted by dlq id.
func (x *index) heldChains(holdID string) []heldRef {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []heldRef
	for id, hc := range x.held {
		if holdID != "" && !hc.holds[holdID] {
			continue
		}
		ref := heldRef{dlqID: id, domain: hc.domain, records: hc.records}
		for h := range hc.holds {
			ref.holds = append(ref.holds, h)
		}
		out = append(out, ref)
	}
	slices.SortFunc(out, func(a, b heldRef) int { return cmp.Compare(a.dlqID, b.dlqID) })
	return out
}

// entryOf returns a copy of the unresolved chain dlqID's entry.
func (x *index) entryOf(dlqID string) (entry, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e, ok := x.chains[dlqID]
	if !ok {
		return entry{}, false
	}
	return *e, true
}

// digestLine appends the checkpoint digest line of one record:
// "<seq> <audit_hash>\n", with "-" for a missing audit_hash.
func digestLine(dst []byte, seq uint64, auditHash string) []byte {
	if auditHash == "" {
		auditHash = "-"
	}
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, ' ')
	dst = append(dst, auditHash...)
	return append(dst, '\n')
}

// hexSum returns the hex digest of h's state without resetting it.
func hexSum(h hash.Hash) string {
	var b [sha256.Size]byte
	return hexString(h.Sum(b[:0]))
}

// followPoll is how long the live view waits, once it has read every
// record, before it asks QUARANTINE for new ones (waitFor asks at once).
const followPoll = 100 * time.Millisecond

// follower is the goroutine feeding the index; Stop ends it.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Stop ends the follower and waits for it.
func (f *follower) Stop() {
	f.cancel()
	<-f.done
}

// follow feeds the index from stream, from the record after the last one
// applied, until ctx is done or Stop: it reads batches with direct gets
// (no consumer) until the server says nothing is pending, then waits
// followPoll, or less when waitFor asks for a sequence not applied yet,
// and reads again.
func (x *index) follow(ctx context.Context, js jetstream.JetStream, stream string) (*follower, error) {
	// The records stored from now on are news (notice).
	ictx, icancel := context.WithTimeout(ctx, 5*time.Second)
	if st, err := js.Stream(ictx, stream); err == nil {
		if info, err := st.Info(ictx); err == nil {
			x.mu.Lock()
			x.liveFrom, x.liveKnown = info.State.LastSeq, true
			x.mu.Unlock()
		}
	}
	icancel()
	ctx, cancel := context.WithCancel(ctx)
	f := &follower{cancel: cancel, done: make(chan struct{})}
	next := x.applied() + 1
	go func() {
		defer close(f.done)
		t := time.NewTimer(0)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-x.wake:
			}
			n, _, err := scan(ctx, js, stream, "", next, 0, func(m *jetstream.RawStreamMsg) bool {
				x.apply(m.Sequence, m.Data)
				return true
			})
			next = n
			if err == nil {
				x.setLive()
			}
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				x.log.Error("live view: reading QUARANTINE failed; retrying", "next_seq", next, "err", err)
				failing = true
			case err == nil && failing:
				x.log.Info("live view: reading QUARANTINE again", "next_seq", next)
				failing = false
			}
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			t.Reset(followPoll)
		}
	}()
	return f, nil
}

// waitFor waits until the index has applied seq (or ctx is done).
func (x *index) waitFor(ctx context.Context, seq uint64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for x.applied() < seq {
		select {
		case x.wake <- struct{}{}: // read QUARANTINE now
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
