package auditor

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
)

// idFilter is a list request's identifier filters (api.ListRequest.NDC
// and the others: api.ListRequest.IdentifierFilters), read by the domains'
// searches (domain.Spec.Search). It matches the identifiers an event's
// ordering key and party name and those its first record lists
// (identifiersOf): the auditor's index keeps them per chain, and a scan
// reads them from the chain's records, so a search reads no payload.
type idFilter struct {
	// domain is the domain the identifiers belong to ("" when only
	// fields several domains answer are given, e.g. a lot, which
	// pharmacy, DSCSA and FSMA all have).
	domain string
	// matchers match a chain of their domain; a chain of a domain
	// without one does not match.
	matchers map[string]domain.Matcher
	set      bool
}

// searchFields is what the registered domains' searches answer: the
// domains of each search field, and the message refusing fields of two
// domains in one request.
var searchFields = sync.OnceValues(func() (map[string][]string, error) {
	owners := map[string][]string{}
	for _, s := range registry.All() {
		for _, f := range s.Search.Fields {
			owners[f] = append(owners[f], s.Name)
		}
	}
	var parts []string
	for _, s := range registry.All() {
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

// parseIDFilter normalizes req's identifier filters, each domain's by its
// search (domain.Search.Parse), in the registry's order. A bad identifier
// is a BAD_REQUEST naming its field and the rule, never echoing the value.
func parseIDFilter(req api.ListRequest) (idFilter, error) {
	given := req.IdentifierFilters()
	f := idFilter{set: len(given) > 0}
	if !f.set {
		return f, nil
	}
	owners, errTwoDomains := searchFields()
	values := make(map[string]string, len(given))
	for _, name := range slices.Sorted(maps.Keys(given)) { // the first bad field, always the same
		v := given[name]
		if len(owners[name]) == 0 {
			return f, api.BadField("identifiers", "names a field no domain searches by (the fields: %s)", strings.Join(slices.Sorted(maps.Keys(owners)), ", "))
		}
		if w := req.Identifiers[name]; w != "" && w != v {
			return f, api.BadField(name, "given twice, with two values")
		}
		if v = strings.TrimSpace(v); v != "" {
			values[name] = v
		}
	}
	f.matchers = map[string]domain.Matcher{}
	for _, s := range registry.All() {
		own, vals := false, map[string]string{}
		for _, name := range s.Search.Fields {
			if v, ok := values[name]; ok {
				vals[name] = v
				own = own || len(owners[name]) == 1
			}
		}
		if !own {
			continue
		}
		m, err := parseSearch(s, vals)
		if err != nil {
			return f, err
		}
		if f.domain != "" {
			return f, api.Wrap(api.ErrBadRequest, errTwoDomains, errTwoDomains.Error())
		}
		f.domain, f.matchers[s.Name] = s.Name, m
	}
	if f.domain != "" {
		return f, nil
	}
	// Only fields several domains answer: each of those domains matches
	// its own chains.
	for _, s := range registry.All() {
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

// domainOK reports whether a request for domain (its Domain filter) can
// match the filter's identifiers.
func (f idFilter) domainOK(domain string) bool {
	return domain == "" || f.domain == "" || domain == f.domain
}

// scanDomain is the domain a scan for the filter reads: the request's, or
// the identifiers'.
func (f idFilter) scanDomain(domain string) string {
	if domain != "" {
		return domain
	}
	return f.domain
}

// match reports whether the chain it (its domain, ordering key, party,
// idempotency key, dlq id and listed identifiers) matches every
// identifier of the filter.
func (f idFilter) match(it *listItem) bool {
	if !f.set {
		return true
	}
	if f.domain != "" && it.Domain != f.domain {
		return false
	}
	m := f.matchers[it.Domain]
	return m != nil && m(domain.Chain{OrderingKey: it.okey, PartyID: it.PartyID, IdempotencyKey: it.key, DLQID: it.DLQID, Listed: it.ids})
}

// identifiersOf returns the identifiers an ordering key names (its
// domain's domain.Search.KeyIdentifiers) and the first record's listed
// identifiers (pairs, listedPairs), under the envelope's names
// (api.Summary.Identifiers); nil when there are none.
func identifiersOf(dom, okey, party string, pairs []string) map[string]string {
	var m map[string]string
	if spec, ok := registry.Lookup(dom); ok && spec.Search.KeyIdentifiers != nil {
		m = spec.Search.KeyIdentifiers(okey, party)
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if m == nil {
			m = make(map[string]string, len(pairs)/2)
		}
		m[pairs[i]] = pairs[i+1]
	}
	return m
}
