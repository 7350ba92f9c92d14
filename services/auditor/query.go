package auditor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// List page sizes.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
	defaultSamples  = 5
)

// Get reads the chain of one dlq id from QUARANTINE: every record with its
// sequence, the chain's integrity problems, and its folded state. Payloads
// are left out unless req.IncludePayload.
func (s *Service) Get(ctx context.Context, req api.GetRequest) (api.GetReply, error) {
	if req.DLQID == "" || strings.ContainsAny(req.DLQID, ".*> ") {
		return api.GetReply{}, badRequest("dlq_id is required and must be a single subject token")
	}
	var who reader
	if req.IncludePayload {
		var err error
		if req.ApprovalID != "" {
			who, err = s.approvalReader(ctx, req.ApprovalID, req.DLQID)
			req.Reason = "approval " + req.ApprovalID + ": " + req.Reason
		} else {
			who, err = s.payloadReader(ctx, api.AccessGet)
		}
		if err != nil {
			return api.GetReply{}, err
		}
	}
	dom := req.Domain
	if dom == "" {
		if e, ok := s.index.entryOf(req.DLQID); ok {
			dom = e.domain
		} else {
			// Not unresolved in the index (resolved, or not applied yet):
			// find the chain's subject on the server.
			err := s.eachLastRecord(ctx, []string{req.DLQID}, 0, func(_ string, m directMsg) { dom = domainOfSubject(m.subject) })
			if err != nil {
				return api.GetReply{}, fmt.Errorf("auditor: find the chain: %w", err)
			}
		}
	}
	if dom == "" && s.holds.Legal() {
		dom = domain.DomainOfID(req.DLQID) // expired from QUARANTINE: its legal-hold copy, if any
	}
	if dom == "" || !validToken(dom) {
		return api.GetReply{}, api.Errorf(api.ErrNotFound, "no quarantine chain has this dlq id")
	}
	stored, err := s.chains.Stored(ctx, dom, req.DLQID)
	if err != nil && !errors.Is(err, chain.ErrNotFound) {
		return api.GetReply{}, fmt.Errorf("auditor: read chain: %w", err)
	}
	var rep api.GetReply
	if s.holds.Legal() {
		// The records QUARANTINE no longer holds, from their legal-hold
		// copies.
		copies, err := s.holds.Copies(ctx, dom, req.DLQID)
		if err != nil {
			return api.GetReply{}, err
		}
		from := len(copies)
		if len(stored) > 0 {
			if h, err := chain.DecodeHead(stored[0].Data); err == nil {
				from = min(from, h.Index)
			}
		}
		for _, m := range copies[:from] {
			rep.Records = append(rep.Records, api.ChainRecord{Seq: m.Seq, Record: m.Data, Stream: subjects.LegalHoldStream})
		}
	}
	for _, m := range stored {
		rep.Records = append(rep.Records, api.ChainRecord{Seq: m.Seq, Record: m.Data})
	}
	if len(rep.Records) == 0 {
		return api.GetReply{}, api.Errorf(api.ErrNotFound, "no quarantine chain has this dlq id")
	}
	raws := make([][]byte, len(rep.Records))
	for i, r := range rep.Records {
		raws[i] = r.Record
	}
	rep.Problems = record.VerifyChain(raws)
	for i := range rep.Problems {
		if p := &rep.Problems[i]; p.Index >= 0 && p.Index < len(rep.Records) {
			p.Seq = rep.Records[p.Index].Seq
		}
	}
	recs := make([]record.Record, 0, len(raws))
	for i, raw := range raws {
		var r record.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			break // reported by VerifyChain; fold what precedes it
		}
		recs = append(recs, r)
		if r.TraceID != "" {
			rep.Records[i].TraceID = r.TraceID
			rep.Records[i].TraceURL = telemetry.TraceURL(s.cfg.TraceURLBase, r.TraceID)
		}
	}
	rep.State, _ = record.Fold(recs) // an invalid chain folds to StatusInvalid
	if rep.State.TraceID != "" {
		rep.TraceURL = telemetry.TraceURL(s.cfg.TraceURLBase, rep.State.TraceID)
	}
	if req.IncludePayload {
		// Recorded, and acknowledged, before a payload byte leaves.
		if _, err := s.recordAccess(ctx, who, api.AccessGet, req.Reason, nil, []string{req.DLQID}); err != nil {
			return api.GetReply{}, err
		}
		if d := rep.State.Document; d != nil && d.SHA256 != "" && d.Length > 0 {
			b, err := documentBytes(ctx, s.js, *d)
			if err != nil {
				s.log.Warn("document bytes not read", "dlq_id", req.DLQID, "sha256", d.SHA256, "err", err)
			}
			rep.DocumentBytes = b
		}
	} else {
		rep.State.Payload, rep.State.OriginalPayload = nil, nil
		for i := range rep.Records {
			rep.Records[i].Record = withoutPayload(rep.Records[i].Record)
		}
	}
	return rep, nil
}

// withoutPayload returns the record raw without its top-level payload
// member (the other members keep their bytes, not their order).
func withoutPayload(raw []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	if _, ok := m["payload"]; !ok {
		return raw
	}
	delete(m, "payload")
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// listItem is one chain of a list: its summary and the QUARANTINE
// sequence of its first record, which orders lists (newest first) and
// names the position of a cursor.
type listItem struct {
	api.Summary
	seq uint64
	// okey and key are the chain's ordering and idempotency keys, which
	// an identifier filter matches (Summary.Identifiers is filled from
	// okey only for the items of a page).
	okey, key string
	// ids are the first record's listed identifiers (listedPairs).
	ids []string
	// doc is the SHA-256 of the EPCIS document the event was read from
	// ("" for most).
	doc string
}

func summary(e *entry) listItem {
	return listItem{api.Summary{DLQID: e.dlqID, Domain: e.domain, Class: e.class, Status: string(e.status), ErrorCode: e.code,
		PartyID: e.party, Publisher: e.publisher, RedriveCount: e.redrives, Records: e.records, FirstSeen: e.firstSeen,
		QuarantinedAt: e.quarantinedAt, LastChange: e.lastChange, LastHash: e.lastHash, EventType: e.eventType}, e.seq, e.orderingKey(), e.key, e.ids, e.docSHA()}
}

// docSHA is the SHA-256 of the chain's EPCIS document ("" for none).
func (e *entry) docSHA() string {
	if e.doc == nil {
		return ""
	}
	return e.doc.doc.SHA256
}

// docOfHead is the SHA-256 of the EPCIS document a first record names.
func docOfHead(h chain.Head) string {
	if h.Document == nil {
		return ""
	}
	return h.Document.SHA256
}

// serverSummary summarizes a chain not in the index from its first and
// last records, as read from QUARANTINE.
func serverSummary(seq uint64, first, last chain.Head) listItem {
	party := last.PartyID
	if party == "" {
		party = first.PartyID
	}
	return listItem{api.Summary{DLQID: first.DLQID, Domain: first.Domain, Class: string(last.Class), Status: string(last.Status()),
		ErrorCode: string(last.ErrorCode), PartyID: party, Publisher: first.Publisher, RedriveCount: last.RedriveCount, Records: last.Index + 1,
		FirstSeen: first.FirstSeen.UTC(), QuarantinedAt: first.QuarantinedAt.UTC(), LastChange: last.QuarantinedAt.UTC(),
		LastHash: last.AuditHash, EventType: eventTypeOf(first)}, seq, cmp.Or(last.OrderingKey, first.OrderingKey), cmp.Or(last.IdempotencyKey, first.IdempotencyKey),
		pairsOf(first.Identifiers), docOfHead(first)}
}

// pairsOf is ids but event_type as sorted name, value pairs (listedPairs
// without interning), for a chain read from the server.
func pairsOf(ids map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		if k != "event_type" && ids[k] != "" {
			out = append(out, k, ids[k])
		}
	}
	return out
}

// listScanWindow is how many QUARANTINE sequences a list reads at a time
// when it pages through the server.
const listScanWindow = 1024

// List returns one page of quarantined events matching req, newest first:
// by the QUARANTINE sequence of each chain's first record, which is the
// order of quarantine. The cursor names the first record of the last item
// of the previous page, so pages stay stable while new records arrive.
//
// A list of unresolved chains only (status open, redriving or poison)
// comes from the live index. A list that may hold resolved chains (no
// status, or resolved) pages through QUARANTINE from the newest record
// down, reading listScanWindow records at a time and the last record of
// the chains it finds, so its memory is bounded by the page and the
// window, and its time by the records read until the page is full. Its
// Total comes from the index and the groups' aggregates, or, with a time
// range (From, To) or identifier filters, from the same scan, which then
// reads the whole stream (of the identifiers' domain).
//
// Each event names the legal holds its chain carries (Summary.HoldIDs).
func (s *Service) List(ctx context.Context, req api.ListRequest) (api.ListReply, error) {
	rep, err := s.list(ctx, req)
	for i := range rep.Items {
		it := &rep.Items[i]
		it.HoldIDs = s.index.holdsOf(it.DLQID)
		// And the active holds that hold it whose record is not written
		// yet (a hold of thousands of events is appended for a while).
		sub := hold.Subject{DLQID: it.DLQID, Domain: it.Domain, PartyID: it.PartyID, ErrorCode: codes.Code(it.ErrorCode),
			FirstSeen: it.FirstSeen, Chain: domain.Chain{PartyID: it.PartyID, DLQID: it.DLQID, Listed: pairsOf(it.Identifiers)}}
		if i < len(rep.okeys) {
			sub.Chain.OrderingKey = rep.okeys[i]
		}
		for _, h := range s.holds.Matching(sub) {
			if !slices.Contains(it.HoldIDs, h) {
				it.HoldIDs = append(it.HoldIDs, h)
			}
		}
	}
	if err == nil && req.Document != "" && req.Cursor == "" {
		rep.Document, err = s.documentOutcomes(ctx, req.Document, req.Code)
	}
	return rep.ListReply, err
}

// documentSlack widens the time range of a document's reconciliation
// around its events' first_seen (the time EVENTS stored its message).
const documentSlack = 2 * time.Second

// maxDocumentRangeIDs bounds the events per outcome a document's
// reconciliation lists (its range's, other documents' included).
const maxDocumentRangeIDs = 4 * document.MaxEvents

// documentOutcomes returns every event of the EPCIS document sha with
// its outcome (nil when DOCUMENTS does not keep it or its message is not
// found: the live view knows a document by its quarantined events, and
// one without any is found from DOCUMENTS, keptDocument): the
// reconciliation of the document's EVENTS message (its stored time, a
// few seconds either side), its events by position; with code, only the
// quarantined events of that code.
func (s *Service) documentOutcomes(ctx context.Context, sha, code string) (*api.DocumentOutcomes, error) {
	s.index.mu.RLock()
	di := s.index.docs[sha]
	var (
		doc         api.GroupDocument
		dom, sample string
		seq         uint64
		sampleIndex int
		from, to    time.Time
	)
	if di != nil {
		doc, dom, seq, from, to = di.doc, di.domain, di.seq, di.firstSeen, di.lastSeen
		sample, sampleIndex = di.sample, di.sampleIndex
	}
	s.index.mu.RUnlock()
	if di == nil {
		// No quarantined event names it: every event committed (or was
		// a duplicate), or it is not a document kept here.
		kept, err := s.keptDocument(ctx, sha)
		if kept == nil || err != nil {
			return nil, err
		}
		doc, dom, seq, from, to = kept.doc, kept.domain, kept.seq, kept.firstSeen, kept.lastSeen
	}
	if seq == 0 {
		return nil, nil
	}
	// The range holds the events of every message stored in it: other
	// documents sent at the same time too. A category listed up to its
	// bound may have left some of this document's out: read again with a
	// higher bound.
	var rec api.ReconcileReply
	for maxIDs := max(doc.Events, api.MaxDocumentEvents); ; maxIDs = min(4*maxIDs, maxDocumentRangeIDs) {
		var err error
		rec, err = s.reconciler.Reconcile(ctx, api.ReconcileRequest{Domain: dom, From: from.Add(-documentSlack), To: to.Add(documentSlack),
			IDs: true, MaxIDs: maxIDs})
		if err != nil {
			return nil, fmt.Errorf("auditor: the outcomes of document %s: %w", sha, err)
		}
		full := false
		for _, evs := range rec.IDs {
			full = full || len(evs) >= maxIDs
		}
		if !full || maxIDs >= maxDocumentRangeIDs {
			break
		}
	}
	// The document's message: the one holding its first quarantined
	// event at its position (a manifest, for a document sent in parts).
	for _, evs := range rec.IDs {
		for _, ev := range evs {
			if ev.DLQID == sample && ev.DocumentIndex != nil && *ev.DocumentIndex == sampleIndex {
				seq = ev.Seq
			}
		}
	}
	out := &api.DocumentOutcomes{Document: doc, Counts: map[string]int{}, Events: []api.DocumentEvent{}}
	for outcome, evs := range rec.IDs {
		for _, ev := range evs {
			if ev.Seq != seq || ev.DocumentIndex == nil {
				continue
			}
			out.Counts[outcome]++
			de := api.DocumentEvent{Index: *ev.DocumentIndex, Outcome: outcome}
			if ev.DLQID != "" && outcome != api.ReconcileCommitted && outcome != api.ReconcileDuplicate {
				de.DLQID = ev.DLQID
				if e, ok := s.index.entryOf(ev.DLQID); ok {
					de.ErrorCode = e.code
				}
			}
			if code != "" && de.ErrorCode != code {
				continue
			}
			out.Events = append(out.Events, de)
		}
	}
	slices.SortFunc(out.Events, func(a, b api.DocumentEvent) int { return cmp.Compare(a.Index, b.Index) })
	if len(out.Events) > api.MaxDocumentEvents {
		out.Events, out.Truncated = out.Events[:api.MaxDocumentEvents], true
	}
	return out, nil
}

// listed is a list's answer and the ordering key of each item (what a
// hold's identifier filter matches).
type listed struct {
	api.ListReply
	okeys []string
}

// list is List without the holds.
func (s *Service) list(ctx context.Context, req api.ListRequest) (listed, error) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = defaultPageSize
	case limit < 0 || limit > maxPageSize:
		return listed{}, badRequest(fmt.Sprintf("limit must be 1..%d", maxPageSize))
	}
	if req.Records {
		rep, err := s.listRecords(ctx, req, limit)
		return listed{ListReply: rep}, err
	}
	before := uint64(math.MaxUint64)
	if req.Cursor != "" {
		n, err := strconv.ParseUint(req.Cursor, 10, 64)
		if err != nil || n == 0 {
			return listed{}, badRequest("cursor is not a cursor of this endpoint")
		}
		before = n
	}
	ids, err := parseIDFilter(req)
	if err != nil {
		return listed{}, err
	}
	match := func(it *listItem) bool {
		return (req.Domain == "" || it.Domain == req.Domain) && (req.Class == "" || it.Class == req.Class) &&
			(req.Code == "" || it.ErrorCode == req.Code) && (req.Supplier == "" || it.PartyID == req.Supplier) &&
			(req.Publisher == "" || it.Publisher == req.Publisher) && (req.Status == "" || it.Status == req.Status) &&
			(req.From.IsZero() || !it.QuarantinedAt.Before(req.From)) && (req.To.IsZero() || !it.QuarantinedAt.After(req.To)) &&
			(req.Document == "" || it.doc == req.Document) && ids.match(it)
	}
	rep := listed{ListReply: api.ListReply{Items: []api.Summary{}}}
	if !ids.domainOK(req.Domain) {
		return rep, nil // the identifiers are another domain's
	}
	var lastSeq uint64 // first-record sequence of the page's last item
	// add adds a matching item to the page; past a full page it sets the
	// cursor and stops.
	add := func(it listItem) bool {
		if len(rep.Items) == limit {
			rep.NextCursor = strconv.FormatUint(lastSeq, 10)
			return false
		}
		it.Identifiers = identifiersOf(it.Domain, it.okey, it.PartyID, it.ids)
		rep.Items = append(rep.Items, it.Summary)
		rep.okeys = append(rep.okeys, it.okey)
		lastSeq = it.seq
		return true
	}
	switch record.Status(req.Status) {
	case record.StatusOpen, record.StatusRedriving, record.StatusPoison:
		var items []listItem
		s.index.mu.RLock()
		for _, e := range s.index.chains {
			if it := summary(e); match(&it) {
				items = append(items, it)
			}
		}
		s.index.mu.RUnlock()
		slices.SortFunc(items, func(a, b listItem) int { return cmp.Compare(b.seq, a.seq) })
		rep.Total = len(items)
		for _, it := range items {
			if it.seq < before && !add(it) {
				break
			}
		}
		return rep, nil
	case "", record.StatusResolved:
	default:
		return rep, nil // no chain has another status
	}
	if !req.From.IsZero() || !req.To.IsZero() || ids.set() || req.Publisher != "" || req.Document != "" {
		// The total needs a scan of the whole stream: one scan counts
		// the matches and fills the page (those below the cursor).
		full := false
		err := s.scanChains(ctx, ids.scanDomain(req.Domain), math.MaxUint64, ids.set(), func(it listItem) bool {
			if match(&it) {
				rep.Total++
				if it.seq < before && !full {
					full = !add(it)
				}
			}
			return true
		})
		if err != nil {
			return listed{}, err
		}
		return rep, nil
	}
	rep.Total = s.listTotal(req, match)
	err = s.scanChains(ctx, ids.scanDomain(req.Domain), before-1, ids.set(), func(it listItem) bool {
		return !match(&it) || add(it)
	})
	if err != nil {
		return listed{}, err
	}
	return rep, nil
}

// listTotal counts the chains that match a list request that may include
// resolved chains, without a time range, identifier or publisher filters
// (whose totals List counts in its scan of the whole stream): the unresolved
// ones from the index and the resolved ones from the groups' aggregates.
func (s *Service) listTotal(req api.ListRequest, match func(*listItem) bool) int {
	total := 0
	s.index.mu.RLock()
	defer s.index.mu.RUnlock()
	if req.Status == "" {
		for _, e := range s.index.chains {
			if it := summary(e); match(&it) {
				total++
			}
		}
	}
	for k, g := range s.index.resolved {
		if (req.Domain == "" || k.domain == req.Domain) && (req.Class == "" || k.class == req.Class) &&
			(req.Code == "" || k.code == req.Code) && (req.Supplier == "" || k.party == req.Supplier) {
			total += g.total
		}
	}
	return total
}

// scanChains hands fn every chain of QUARANTINE (in domain, or all) whose
// first record is at or below sequence from, newest first, until fn
// returns false. It reads listScanWindow sequences at a time; a chain in
// the index is summarized from its entry, any other from its last record
// on the server.
//
// withIDs reads the identifiers a chain's verbatim payload names too
// (withPayload) for the chains not in the index: an identifier filter
// matches them (the index's entries have them already).
func (s *Service) scanChains(ctx context.Context, domain string, from uint64, withIDs bool, fn func(listItem) bool) error {
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	hi := min(from, info.State.LastSeq)
	filter := subjects.QuarantineAll
	if domain != "" {
		if !validToken(domain) {
			return nil
		}
		filter = "quarantine." + domain + ".>"
	}
	type first struct {
		seq  uint64
		r    chain.Head
		okey string   // the ordering key the payload names (withIDs)
		ids  []string // the listed identifiers and the payload's (withIDs)
	}
	var firsts []first
	for hi >= 1 {
		lo := hi - min(hi, listScanWindow) + 1
		firsts = firsts[:0]
		for next := lo; next <= hi; {
			last := uint64(0)
			pending, err := s.direct(ctx, subjects.QuarantineStream, directRequest{Seq: next, NextFor: filter,
				Batch: listScanWindow, MaxBytes: directMaxBytes}, func(m directMsg) {
				last = m.seq
				if m.seq > hi {
					return
				}
				if r, err := chain.DecodeHead(m.data); err == nil && r.Index == 0 {
					f := first{seq: m.seq, r: r}
					if withIDs {
						s.index.mu.RLock()
						_, indexed := s.index.chains[r.DLQID]
						s.index.mu.RUnlock()
						if !indexed {
							f.okey, f.ids = withPayload(r.Domain, m.data, "", pairsOf(r.Identifiers))
						}
					}
					firsts = append(firsts, f)
				}
			})
			if err != nil {
				return fmt.Errorf("auditor: read %s: %w", subjects.QuarantineStream, err)
			}
			if last == 0 || pending == 0 {
				break
			}
			next = last + 1
		}
		items := make([]listItem, len(firsts))
		var lookups []string
		s.index.mu.RLock()
		for i, f := range firsts {
			if e, ok := s.index.chains[f.r.DLQID]; ok {
				items[i] = summary(e)
				items[i].seq = f.seq
			} else {
				lookups = append(lookups, f.r.DLQID)
			}
		}
		s.index.mu.RUnlock()
		if len(lookups) > 0 {
			lasts := make(map[string]chain.Head, len(lookups))
			err := s.eachLastRecord(ctx, lookups, 0, func(id string, m directMsg) {
				if last, err := chain.DecodeHead(m.data); err == nil {
					lasts[id] = last
				}
			})
			if err != nil {
				return fmt.Errorf("auditor: read the last records of %d chains: %w", len(lookups), err)
			}
			for i, f := range firsts {
				if items[i].DLQID != "" {
					continue
				}
				last, ok := lasts[f.r.DLQID]
				if !ok {
					last = f.r
				}
				items[i] = serverSummary(f.seq, f.r, last)
				if withIDs {
					items[i].okey, items[i].ids = cmp.Or(items[i].okey, f.okey), f.ids
				}
			}
		}
		for i := len(items) - 1; i >= 0; i-- {
			if !fn(items[i]) {
				return nil
			}
		}
		hi = lo - 1
	}
	return nil
}

// Groups returns the triage groups: events by fingerprint (domain, error
// code, current class), each split by supplier/registrant. Open counts the
// unresolved events (open, redriving, poison); first and last seen bound
// the events' first_seen (when EVENTS stored the original); the oldest open
// age is measured from quarantine. Samples list the unresolved events
// first, then resolved ones (at most maxResolvedSamples of them), newest
// first. Groups are ordered by open count, then total, then fingerprint.
// Unresolved events come from their entries, resolved ones from the
// groups' aggregates.
//
// With By GroupByDocument, the groups are by document (DocumentGroups).
func (s *Service) Groups(req api.GroupsRequest) api.GroupsReply {
	if req.By == api.GroupByDocument {
		return s.DocumentGroups(req)
	}
	samples := req.Samples
	if samples <= 0 {
		samples = defaultSamples
	}
	now := s.now().UTC()
	type acc struct {
		g        api.Group
		oldest   time.Time
		members  []*entry
		resolved []sample
		parties  map[string]*acc
	}
	seen := func(a *acc, first time.Time) {
		if a.g.FirstSeen.IsZero() || first.Before(a.g.FirstSeen) {
			a.g.FirstSeen = first
		}
		if first.After(a.g.LastSeen) {
			a.g.LastSeen = first
		}
	}
	add := func(a *acc, e *entry) {
		a.g.Total++
		seen(a, e.firstSeen)
		a.g.Open++ // every entry is unresolved
		if a.oldest.IsZero() || e.quarantinedAt.Before(a.oldest) {
			a.oldest = e.quarantinedAt
		}
		a.members = append(a.members, e)
	}
	addResolved := func(a *acc, r *resolvedGroup) {
		a.g.Total += r.total
		seen(a, r.firstSeen)
		seen(a, r.lastSeen)
		a.resolved = append(a.resolved, r.samples...)
	}
	groups := map[string]*acc{}
	group := func(domain, code, class, party string) (*acc, *acc) {
		fp := domain + ":" + code + ":" + class
		a := groups[fp]
		if a == nil {
			a = &acc{g: api.Group{Fingerprint: fp, Domain: domain, Code: code, Class: class}, parties: map[string]*acc{}}
			groups[fp] = a
		}
		p := a.parties[party]
		if p == nil {
			p = &acc{g: api.Group{Fingerprint: fp + ":" + party, Domain: domain, Code: code, Class: class, Party: party}}
			a.parties[party] = p
		}
		return a, p
	}
	s.index.mu.RLock()
	for _, e := range s.index.chains {
		if req.Domain != "" && e.domain != req.Domain {
			continue
		}
		a, p := group(e.domain, e.code, e.class, e.party)
		add(a, e)
		add(p, e)
	}
	for k, r := range s.index.resolved {
		if req.Domain != "" && k.domain != req.Domain {
			continue
		}
		a, p := group(k.domain, k.code, k.class, k.party)
		addResolved(a, r)
		addResolved(p, r)
	}
	finish := func(a *acc) api.Group {
		g := a.g
		if !a.oldest.IsZero() {
			g.OldestOpenSeconds = max(0, now.Sub(a.oldest).Seconds())
		}
		slices.SortFunc(a.members, func(x, y *entry) int {
			return newerSample(sample{x.dlqID, x.quarantinedAt}, sample{y.dlqID, y.quarantinedAt})
		})
		g.Samples = []string{}
		for _, e := range a.members[:min(samples, len(a.members))] {
			g.Samples = append(g.Samples, e.dlqID)
		}
		if n := samples - len(g.Samples); n > 0 {
			slices.SortFunc(a.resolved, newerSample)
			for _, r := range a.resolved[:min(n, len(a.resolved), maxResolvedSamples)] {
				g.Samples = append(g.Samples, r.dlqID)
			}
		}
		return g
	}
	rep := api.GroupsReply{At: now, Groups: []api.Group{}}
	for _, a := range groups {
		if req.OpenOnly && a.g.Open == 0 {
			continue
		}
		g := finish(a)
		for _, p := range a.parties {
			if !req.OpenOnly || p.g.Open > 0 {
				g.Parties = append(g.Parties, finish(p))
			}
		}
		slices.SortFunc(g.Parties, byOpen)
		rep.Groups = append(rep.Groups, g)
	}
	s.index.mu.RUnlock()
	slices.SortFunc(rep.Groups, byOpen)
	return rep
}

// DocumentGroups returns the quarantined events read from EPCIS documents,
// one group per document (Fingerprint "document:<sha256>", its Document
// and domain): Total counts its quarantined events, Open the unresolved
// ones, ByCode all of them by their latest error code; FirstSeen and
// LastSeen bound their first_seen; Samples are unresolved events, newest
// first. Ordered as Groups (most open first).
func (s *Service) DocumentGroups(req api.GroupsRequest) api.GroupsReply {
	samples := req.Samples
	if samples <= 0 {
		samples = defaultSamples
	}
	now := s.now().UTC()
	type acc struct {
		g       api.Group
		oldest  time.Time
		members []*entry
	}
	s.index.mu.RLock()
	groups := make(map[*docInfo]*acc, len(s.index.docs))
	for _, di := range s.index.docs {
		if req.Domain != "" && di.domain != req.Domain {
			continue
		}
		doc := di.doc
		a := &acc{g: api.Group{Fingerprint: "document:" + doc.SHA256, Domain: di.domain, Document: &doc, Total: di.total,
			FirstSeen: di.firstSeen, LastSeen: di.lastSeen, ByCode: map[string]int{}}}
		for code, n := range di.resolved {
			a.g.ByCode[code] += n
		}
		groups[di] = a
	}
	for _, e := range s.index.chains {
		a := groups[e.doc]
		if e.doc == nil || a == nil {
			continue
		}
		a.g.Open++
		a.g.ByCode[e.code]++
		if a.oldest.IsZero() || e.quarantinedAt.Before(a.oldest) {
			a.oldest = e.quarantinedAt
		}
		a.members = append(a.members, e)
	}
	rep := api.GroupsReply{At: now, Groups: []api.Group{}}
	for _, a := range groups {
		if req.OpenOnly && a.g.Open == 0 {
			continue
		}
		g := a.g
		if !a.oldest.IsZero() {
			g.OldestOpenSeconds = max(0, now.Sub(a.oldest).Seconds())
		}
		slices.SortFunc(a.members, func(x, y *entry) int {
			return newerSample(sample{x.dlqID, x.quarantinedAt}, sample{y.dlqID, y.quarantinedAt})
		})
		g.Samples = []string{}
		for _, e := range a.members[:min(samples, len(a.members))] {
			g.Samples = append(g.Samples, e.dlqID)
		}
		rep.Groups = append(rep.Groups, g)
	}
	s.index.mu.RUnlock()
	slices.SortFunc(rep.Groups, byOpen)
	return rep
}

func byOpen(a, b api.Group) int {
	if c := cmp.Compare(b.Open, a.Open); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Total, a.Total); c != 0 {
		return c
	}
	return cmp.Compare(a.Fingerprint, b.Fingerprint)
}
