package auditor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/deadletter/deadletter/shared/telemetry"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
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
	dom := req.Domain
	if dom == "" {
		s.index.mu.RLock()
		if e, ok := s.index.chains[req.DLQID]; ok {
			dom = e.domain
		}
		s.index.mu.RUnlock()
	}
	if dom == "" {
		return api.GetReply{}, requestError{api.ErrNotFound, "no quarantine chain has this dlq id"}
	}
	subj := subjects.Quarantine(dom, req.DLQID)
	var (
		raws [][]byte
		rep  api.GetReply
	)
	for next := uint64(1); ; {
		m, err := s.quarantine.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return api.GetReply{}, fmt.Errorf("auditor: read chain: %w", err)
		}
		raws = append(raws, m.Data)
		rep.Records = append(rep.Records, api.ChainRecord{Seq: m.Sequence, Record: m.Data})
		next = m.Sequence + 1
	}
	if len(raws) == 0 {
		return api.GetReply{}, requestError{api.ErrNotFound, "no quarantine chain has this dlq id"}
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
	if !req.IncludePayload {
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

// listed returns the summaries of the chains that match f, newest first
// (by quarantine time, then dlq id).
func (s *Service) listed(match func(*entry) bool) []api.Summary {
	s.index.mu.RLock()
	var out []api.Summary
	for _, e := range s.index.chains {
		if match(e) {
			out = append(out, summary(e))
		}
	}
	s.index.mu.RUnlock()
	slices.SortFunc(out, newestFirst)
	return out
}

func newestFirst(a, b api.Summary) int {
	if c := b.QuarantinedAt.Compare(a.QuarantinedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.DLQID, b.DLQID)
}

func summary(e *entry) api.Summary {
	return api.Summary{DLQID: e.dlqID, Domain: e.domain, Class: e.class, Status: e.status, ErrorCode: e.code,
		PartyID: e.party, RedriveCount: e.redrives, Records: e.records, FirstSeen: e.firstSeen,
		QuarantinedAt: e.quarantinedAt, LastChange: e.lastChange, LastHash: e.lastHash}
}

// List returns one page of quarantined events matching req, newest first.
// The cursor names the last item of the previous page, so pages stay
// stable while new records arrive.
func (s *Service) List(req api.ListRequest) (api.ListReply, error) {
	limit := req.Limit
	switch {
	case limit == 0:
		limit = defaultPageSize
	case limit < 0 || limit > maxPageSize:
		return api.ListReply{}, badRequest(fmt.Sprintf("limit must be 1..%d", maxPageSize))
	}
	var after *api.Summary
	if req.Cursor != "" {
		at, id, ok := strings.Cut(req.Cursor, "|")
		n, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil {
			return api.ListReply{}, badRequest("cursor is not a cursor of this endpoint")
		}
		after = &api.Summary{QuarantinedAt: time.Unix(0, n).UTC(), DLQID: id}
	}
	items := s.listed(func(e *entry) bool {
		return (req.Domain == "" || e.domain == req.Domain) && (req.Class == "" || e.class == req.Class) &&
			(req.Code == "" || e.code == req.Code) && (req.Supplier == "" || e.party == req.Supplier) &&
			(req.Status == "" || e.status == req.Status) &&
			(req.From.IsZero() || !e.quarantinedAt.Before(req.From)) && (req.To.IsZero() || !e.quarantinedAt.After(req.To))
	})
	rep := api.ListReply{Total: len(items), Items: []api.Summary{}}
	i := 0
	if after != nil {
		i, _ = slices.BinarySearchFunc(items, *after, newestFirst)
		if i < len(items) && items[i].DLQID == after.DLQID && items[i].QuarantinedAt.Equal(after.QuarantinedAt) {
			i++
		}
	}
	end := min(len(items), i+limit)
	rep.Items = append(rep.Items, items[i:end]...)
	if end < len(items) {
		l := items[end-1]
		rep.NextCursor = strconv.FormatInt(l.QuarantinedAt.UnixNano(), 10) + "|" + l.DLQID
	}
	return rep, nil
}

// Groups returns the triage groups: events by fingerprint (domain, error
// code, current class), each split by supplier/registrant. Open counts the
// unresolved events (open, redriving, poison); first and last seen bound
// the events' first_seen (when EVENTS stored the original); the oldest open
// age is measured from quarantine. Groups are ordered by open count, then
// total, then fingerprint.
func (s *Service) Groups(req api.GroupsRequest) api.GroupsReply {
	samples := req.Samples
	if samples <= 0 {
		samples = defaultSamples
	}
	now := s.now().UTC()
	type acc struct {
		g       api.Group
		oldest  time.Time
		members []*entry
		parties map[string]*acc
	}
	add := func(a *acc, e *entry) {
		a.g.Total++
		if a.g.FirstSeen.IsZero() || e.firstSeen.Before(a.g.FirstSeen) {
			a.g.FirstSeen = e.firstSeen
		}
		if e.firstSeen.After(a.g.LastSeen) {
			a.g.LastSeen = e.firstSeen
		}
		if e.unresolved() {
			a.g.Open++
			if a.oldest.IsZero() || e.quarantinedAt.Before(a.oldest) {
				a.oldest = e.quarantinedAt
			}
		}
		a.members = append(a.members, e)
	}
	groups := map[string]*acc{}
	s.index.mu.RLock()
	for _, e := range s.index.chains {
		if req.Domain != "" && e.domain != req.Domain {
			continue
		}
		fp := e.domain + ":" + e.code + ":" + e.class
		a := groups[fp]
		if a == nil {
			a = &acc{g: api.Group{Fingerprint: fp, Domain: e.domain, Code: e.code, Class: e.class}, parties: map[string]*acc{}}
			groups[fp] = a
		}
		add(a, e)
		p := a.parties[e.party]
		if p == nil {
			p = &acc{g: api.Group{Fingerprint: fp + ":" + e.party, Domain: e.domain, Code: e.code, Class: e.class, Party: e.party}}
			a.parties[e.party] = p
		}
		add(p, e)
	}
	finish := func(a *acc) api.Group {
		g := a.g
		if !a.oldest.IsZero() {
			g.OldestOpenSeconds = max(0, now.Sub(a.oldest).Seconds())
		}
		slices.SortFunc(a.members, func(x, y *entry) int {
			if x.unresolved() != y.unresolved() {
				if x.unresolved() {
					return -1
				}
				return 1
			}
			if c := y.quarantinedAt.Compare(x.quarantinedAt); c != 0 {
				return c
			}
			return cmp.Compare(x.dlqID, y.dlqID)
		})
		g.Samples = []string{}
		for _, e := range a.members[:min(samples, len(a.members))] {
			g.Samples = append(g.Samples, e.dlqID)
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

func byOpen(a, b api.Group) int {
	if c := cmp.Compare(b.Open, a.Open); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Total, a.Total); c != 0 {
		return c
	}
	return cmp.Compare(a.Fingerprint, b.Fingerprint)
}
