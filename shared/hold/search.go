package hold

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/record"
)

// The identifier search a records list (audit.list, dlqctl find), a
// filter hold and an export share: one owner, here, because the
// redriver refuses a held event by the same match the auditor holds it
// by (Refuse, Matches).
//
// A search matches what a domain's search (domain.Spec.Search) reads of
// a chain: its ordering key, party, idempotency key and dlq id, the
// identifiers its first record lists and those its verbatim payload
// names (PayloadIdentifiers), whatever the event failed on.

// IDFilter is a records search's identifier filters (api.ListRequest's
// IdentifierFilters), read by the domains' searches (domain.Search.Parse).
type IDFilter struct {
	// Domain is the domain the identifiers belong to ("" when only
	// fields several domains answer are given, e.g. a lot, which
	// pharmacy, DSCSA and FSMA all have).
	Domain string
	// Set reports whether any identifier filter was given.
	Set bool
	// matchers match a chain of their domain; a chain of a domain
	// without one does not match.
	matchers map[string]domain.Matcher
}

// searchFields is what the registered domains' searches answer: the
// domains of each search field, and the message refusing fields of two
// domains in one request.
var searchFields = sync.OnceValues(func() (map[string][]string, error) {
	owners := map[string][]string{}
	for _, s := range allSpecs() {
		for _, f := range s.Search.Fields {
			owners[f] = append(owners[f], s.Name)
		}
	}
	var parts []string
	for _, s := range allSpecs() {
		var own []string
		for _, f := range s.Search.Fields {
			if len(owners[f]) == 1 {
				own = append(own, f)
			}
		}
		if len(own) > 0 {
			parts = append(parts, s.Name+": "+strings.Join(own, ", "))
		}
	}
	// errTwoDomains: a request names identifiers of two domains.
	errTwoDomains := fmt.Errorf("identifiers of two domains (%s) cannot match one event", strings.Join(parts, "; "))
	return owners, errTwoDomains
})

// ParseIDs normalizes req's identifier filters, each domain's by its
// search (domain.Search.Parse), in the registry's order. A bad
// identifier is a BAD_REQUEST naming its field and the rule, never
// echoing the value; so is a field req.Domain's search does not answer
// (an export or hold of one domain by another's field would otherwise be
// silently empty).
func ParseIDs(req api.ListRequest) (IDFilter, error) {
	given := req.IdentifierFilters()
	f := IDFilter{Set: len(given) > 0}
	if !f.Set {
		return f, nil
	}
	owners, errTwoDomains := searchFields()
	values := make(map[string]string, len(given))
	var scoped domain.Spec
	if req.Domain != "" {
		scoped = specs()[req.Domain]
	}
	for _, name := range slices.Sorted(maps.Keys(given)) { // the first bad field, always the same
		v := given[name]
		if len(owners[name]) == 0 {
			return f, api.BadField("identifiers", "names a field no domain searches by (the fields: %s)", strings.Join(slices.Sorted(maps.Keys(owners)), ", "))
		}
		if scoped.Name != "" && !slices.Contains(scoped.Search.Fields, name) {
			return f, api.BadField(name, "is not a field domain %s searches by (its fields: %s)", scoped.Name, strings.Join(scoped.Search.Fields, ", "))
		}
		if w := req.Identifiers[name]; w != "" && w != v {
			return f, api.BadField(name, "given twice, with two values")
		}
		if v = strings.TrimSpace(v); v != "" {
			values[name] = v
		}
	}
	f.matchers = map[string]domain.Matcher{}
	for _, s := range allSpecs() {
		own, vals := false, map[string]string{}
		for _, name := range s.Search.Fields {
			if v, ok := values[name]; ok {
				vals[name] = v
				own = own || len(owners[name]) == 1
			}
		}
		if !own || (scoped.Name != "" && s.Name != scoped.Name) {
			continue
		}
		m, err := parseSearch(s, vals)
		if err != nil {
			return f, err
		}
		if f.Domain != "" {
			return f, api.Wrap(api.ErrBadRequest, errTwoDomains, errTwoDomains.Error())
		}
		f.Domain, f.matchers[s.Name] = s.Name, m
	}
	if f.Domain != "" {
		// A field the owning domain does not answer (an NDC beside an
		// FSMA TLC) names another domain: never dropped in silence.
		for name := range values {
			if !slices.Contains(specs()[f.Domain].Search.Fields, name) {
				return f, api.Wrap(api.ErrBadRequest, errTwoDomains, errTwoDomains.Error())
			}
		}
		return f, nil
	}
	// Only fields several domains answer (or the request's domain's):
	// each of those domains matches its own chains.
	for _, s := range allSpecs() {
		if scoped.Name != "" && s.Name != scoped.Name {
			continue
		}
		vals := map[string]string{}
		for name, v := range values {
			if !slices.Contains(s.Search.Fields, name) {
				vals = nil
				break
			}
			vals[name] = v
		}
		if vals == nil || s.Search.Parse == nil {
			continue
		}
		m, err := parseSearch(s, vals)
		if err != nil {
			return f, err
		}
		f.matchers[s.Name] = m
	}
	return f, nil
}

// parseSearch reads the values of one domain's search fields, a refused
// value as a BAD_REQUEST naming its field.
func parseSearch(s domain.Spec, vals map[string]string) (domain.Matcher, error) {
	m, err := s.Search.Parse(vals)
	if se, ok := errors.AsType[*domain.SearchError](err); ok {
		return nil, api.BadField(se.Field, "%s", se.Rule)
	}
	if err != nil {
		return nil, api.BadField("identifiers", "%s", err)
	}
	return m, nil
}

// DomainOK reports whether a request for dom (its Domain filter) can
// match the filter's identifiers.
func (f IDFilter) DomainOK(dom string) bool {
	return dom == "" || f.Domain == "" || dom == f.Domain
}

// ScanDomain is the domain a scan for the filter reads: the request's,
// or the identifiers'.
func (f IDFilter) ScanDomain(dom string) string {
	if dom != "" {
		return dom
	}
	return f.Domain
}

// Match reports whether chain c of domain dom matches every identifier
// of the filter (true when none is set).
func (f IDFilter) Match(dom string, c domain.Chain) bool {
	if !f.Set {
		return true
	}
	if f.Domain != "" && dom != f.Domain {
		return false
	}
	m := f.matchers[dom]
	return m != nil && m(c)
}

// allSpecs are the registered domains in the registry's order, and
// specs the same by name, read once (registry.All and registry.Lookup
// build every domain's Spec on each call: too slow per record or per
// hold matched).
var (
	allSpecs = sync.OnceValue(registry.All)
	specs    = sync.OnceValue(func() map[string]domain.Spec {
		m := map[string]domain.Spec{}
		for _, s := range allSpecs() {
			m[s.Name] = s
		}
		return m
	})
)

// maxPayloadRead bounds the payload PayloadIdentifiers decodes (the
// gate's own size limit is far below it).
const maxPayloadRead = 8 << 20

// PayloadIdentifiers returns what domain dom reads of an event's
// identity from its verbatim payload, whatever the event failed on (the
// domain's Checker.Identify, which derives what it can of a document
// that failed validation): its ordering key, its party and its listed
// identifiers (the domain's allow-list, record.ListedIdentifiers, but
// event_type) as name, value pairs sorted by name. Nothing for a payload
// that is not one JSON object, or of an unknown domain. It never fails
// and never panics.
func PayloadIdentifiers(dom string, payload []byte) (okey, party string, pairs []string) {
	spec, ok := specs()[dom]
	if !ok || spec.Checker == nil || len(payload) == 0 || len(payload) > maxPayloadRead {
		return "", "", nil
	}
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var doc map[string]any
	if d.Decode(&doc) != nil || doc == nil {
		return "", "", nil
	}
	defer func() {
		if recover() != nil { // a domain's bug never stops a search
			okey, party, pairs = "", "", nil
		}
	}()
	env := spec.Checker.Identify(doc)
	ids := record.ListedIdentifiers(dom, &env)
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		if k != "event_type" {
			pairs = append(pairs, k, ids[k])
		}
	}
	// Every identifier the payload holds, as the domain's search reads
	// them (domain.Search.Identifiers: each item of a shipment, its
	// SSCCs, a GTIN as written even with a bad check digit), up to
	// maxPayloadPairs.
	if spec.Search.Identifiers != nil {
		all := spec.Search.Identifiers(doc)
		for _, k := range slices.Sorted(maps.Keys(all)) {
			for _, v := range all[k] {
				if len(pairs) >= 2*maxPayloadPairs {
					break
				}
				if ids[k] != v {
					pairs = append(pairs, k, v)
				}
			}
		}
	}
	return env.OrderingKey, env.PartyID, pairs
}

// maxPayloadPairs bounds the identifiers kept of one payload (a search
// keeps them in memory for every unresolved chain): a shipment of more
// items is found by its first maxPayloadPairs identifiers and by its keys.
const maxPayloadPairs = 2048

// RecordPayload returns the verbatim payload of a stored record (its
// "payload" member) when it is text (record.NewPayload keeps a JSON
// payload as text; any other is no document a domain reads), nil
// otherwise. It does not check the payload's digest: a search reads
// identifiers, verification checks seals (audit.verify).
func RecordPayload(raw []byte) []byte {
	var r struct {
		Payload *record.Payload `json:"payload"`
	}
	if jsonv2.Unmarshal(raw, &r, jsonv2.RejectUnknownMembers(false)) != nil || r.Payload == nil || r.Payload.Encoding != record.EncodingText {
		return nil
	}
	return []byte(r.Payload.Data)
}

// Merge returns c with what a payload names (PayloadIdentifiers) added:
// its ordering key and party when c has none, and its identifiers
// beside c's (c's listed first for a name both give, so
// domain.Chain.Identifier still reads c's), sorted by name.
func Merge(c domain.Chain, okey, party string, pairs []string) domain.Chain {
	if c.OrderingKey == "" {
		c.OrderingKey = okey
	}
	if c.PartyID == "" {
		c.PartyID = party
	}
	if len(pairs) == 0 {
		return c
	}
	out := slices.Clone(c.Listed)
	for i := 0; i+1 < len(pairs); i += 2 {
		if !c.Has(pairs[i], pairs[i+1]) {
			out = append(out, pairs[i], pairs[i+1])
		}
	}
	c.Listed = sortPairs(out)
	return c
}

// sortPairs sorts name, value pairs by name.
func sortPairs(p []string) []string {
	type pair struct{ k, v string }
	ps := make([]pair, 0, len(p)/2)
	for i := 0; i+1 < len(p); i += 2 {
		ps = append(ps, pair{p[i], p[i+1]})
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return strings.Compare(a.k, b.k) })
	out := p[:0]
	for _, x := range ps {
		out = append(out, x.k, x.v)
	}
	return out
}
