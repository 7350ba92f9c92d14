package auditor

import (
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/hold"
	"slices"
)

// idFilter is a list request's identifier filters (api.ListRequest.NDC
// and the others: api.ListRequest.IdentifierFilters), read by the
// domains' searches (domain.Spec.Search) as the holds read them
// (hold.IDFilter, their one owner). It matches the identifiers an
// event's ordering key and party name, those its first record lists and
// those its verbatim payload names (hold.PayloadIdentifiers), whatever
// it failed on: the auditor's index keeps them per chain, and a scan
// reads them from the chain's first record.
type idFilter struct {
	hold.IDFilter
}

// parseIDFilter normalizes req's identifier filters (hold.ParseIDs): a
// bad identifier, or one req's domain does not search by, is a
// BAD_REQUEST naming its field and the rule, never echoing the value.
func parseIDFilter(req api.ListRequest) (idFilter, error) {
	f, err := hold.ParseIDs(req)
	return idFilter{f}, err
}

// domainOK reports whether a request for domain (its Domain filter) can
// match the filter's identifiers.
func (f idFilter) domainOK(domain string) bool { return f.DomainOK(domain) }

// scanDomain is the domain a scan for the filter reads: the request's, or
// the identifiers'.
func (f idFilter) scanDomain(domain string) string { return f.ScanDomain(domain) }

// set reports whether the request gave identifier filters.
func (f idFilter) set() bool { return f.Set }

// match reports whether the chain it (its domain, ordering key, party,
// idempotency key, dlq id and identifiers) matches every identifier of
// the filter.
func (f idFilter) match(it *listItem) bool {
	if !f.Set {
		return true
	}
	return f.Match(it.Domain, it.chain())
}

// chain is what a search sees of the item's chain.
func (it *listItem) chain() domain.Chain {
	return domain.Chain{OrderingKey: it.okey, PartyID: it.PartyID, IdempotencyKey: it.key, DLQID: it.DLQID, Listed: it.ids}
}

// withPayload adds what the verbatim payload of a chain's first record
// (raw, as stored) names to the chain's keys and identifiers
// (hold.PayloadIdentifiers, hold.Merge): a search finds an event by them
// whatever it failed on, the gate's envelope or not.
func withPayload(dom string, raw []byte, okey string, ids []string) (string, []string) {
	pokey, _, pairs := hold.PayloadIdentifiers(dom, hold.RecordPayload(raw))
	c := hold.Merge(domain.Chain{OrderingKey: okey, Listed: ids}, pokey, "", pairs)
	return c.OrderingKey, c.Listed
}

// identifiersOf returns the identifiers an ordering key names (its
// domain's domain.Search.KeyIdentifiers) and the first record's listed
// identifiers (pairs, listedPairs), under the envelope's names
// (api.Summary.Identifiers); nil when there are none.
func identifiersOf(dom, okey, party string, pairs []string) map[string]string {
	var m map[string]string
	spec, ok := registry.Lookup(dom)
	if ok && spec.Search.KeyIdentifiers != nil {
		m = spec.Search.KeyIdentifiers(okey, party)
	}
	if len(pairs) == 0 {
		return m
	}
	if m == nil {
		m = make(map[string]string, len(pairs)/2)
	}
	shown := make(map[string]bool, len(m)+len(pairs)/2) // values shown, under any name
	for _, v := range m {
		shown[v] = true
	}
	// The record's own names first (the envelope's, Spec.Listed: ndc11,
	// registrant_dea), then the search's fields (ndc, registrant) for a
	// value not shown yet; a name a matcher reads beside them (DSCSA's
	// sgtin) is not shown. What a search reads of the payload (the same
	// NDC under the search's name, an item's second value) finds the
	// event but is not shown twice.
	for _, names := range [][]string{spec.Listed, spec.Search.Fields} {
		for i := 0; i+1 < len(pairs); i += 2 {
			if !slices.Contains(names, pairs[i]) {
				continue
			}
			if _, ok := m[pairs[i]]; ok || shown[pairs[i+1]] {
				continue
			}
			m[pairs[i]], shown[pairs[i+1]] = pairs[i+1], true
		}
	}
	return m
}
