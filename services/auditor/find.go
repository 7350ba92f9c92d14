package auditor

import (
	"errors"
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/gs1"
)

// idFilter is a list request's identifier filters (api.ListRequest.NDC
// and the others), normalized as the domains normalize them. It matches
// the identifiers an event's ordering key and party name (identifiersOf):
// the auditor's index keeps them per chain, and a scan reads them from
// the chain's records, so a search reads no payload.
type idFilter struct {
	// domain is the domain the identifiers belong to ("" when only a lot
	// is given, which pharmacy and FSMA both have).
	domain                                               string
	ndc11, lot, registrant, key, gtin, serial, sscc, tlc string
	// txID is a pharmacy transaction id, matched against the first
	// record's identifiers (records that carry them) and, with the
	// registrant, against the idempotency key (older records).
	txID string
	set  bool
}

// errTwoDomains: a request names identifiers of two domains.
var errTwoDomains = errors.New("identifiers of two domains (pharmacy: ndc, registrant, transaction_id; dscsa: gtin, serial, sscc; fsma: tlc) cannot match one event")

// parseIDFilter normalizes req's identifier filters. A bad identifier is
// a BAD_REQUEST naming its field and the rule, never echoing the value.
func parseIDFilter(req api.ListRequest) (idFilter, error) {
	f := idFilter{set: req.HasIdentifiers()}
	if !f.set {
		return f, nil
	}
	claim := func(d string) error {
		if f.domain != "" && f.domain != d {
			return api.Wrap(api.ErrBadRequest, errTwoDomains, errTwoDomains.Error())
		}
		f.domain = d
		return nil
	}
	if s := strings.TrimSpace(req.NDC); s != "" {
		n11, err := pharmacy.NormalizeNDC(s)
		if err != nil {
			return f, api.BadField("ndc", "not an NDC: %s", err)
		}
		f.ndc11 = n11
		if err := claim(pharmacy.Name); err != nil {
			return f, err
		}
	}
	if s := strings.TrimSpace(req.Registrant); s != "" {
		s = strings.ToUpper(s)
		if err := pharmacy.ValidateDEA(s); err != nil {
			return f, api.BadField("registrant", "not a DEA registration number: %s", err)
		}
		f.registrant = s
		if err := claim(pharmacy.Name); err != nil {
			return f, err
		}
	}
	if s := strings.TrimSpace(req.TransactionID); s != "" {
		f.txID = s
		if f.registrant != "" {
			// The event's idempotency key (pharmacy.KeySource): a
			// record written before records kept the transaction id
			// (record.Record.Identifiers) matches by it.
			f.key = domain.Key(pharmacy.Name, f.registrant, s)
		}
		if err := claim(pharmacy.Name); err != nil {
			return f, err
		}
	}
	f.lot = strings.TrimSpace(req.Lot)
	if s := strings.TrimSpace(req.GTIN); s != "" {
		if dscsa.IsItemURI(s) {
			gtin, serial, err := dscsa.ParseItem(s)
			if err != nil {
				return f, api.BadField("gtin", "%s", err)
			}
			if ser := strings.TrimSpace(req.Serial); ser != "" && ser != serial {
				return f, api.BadField("serial", "differs from the serial of the item URI given as the GTIN")
			}
			f.gtin, f.serial = gtin, serial
		} else {
			gtin, err := gtin14(s)
			if err != nil {
				return f, api.BadField("gtin", "not a GTIN: %s", err)
			}
			f.gtin = gtin
		}
		if err := claim(dscsa.Name); err != nil {
			return f, err
		}
	}
	if s := strings.TrimSpace(req.Serial); s != "" && f.serial == "" {
		if dscsa.IsItemURI(s) {
			gtin, serial, err := dscsa.ParseItem(s)
			if err != nil {
				return f, api.BadField("serial", "%s", err)
			}
			if f.gtin != "" && f.gtin != gtin {
				return f, api.BadField("serial", "the item URI's GTIN differs from the GTIN given")
			}
			f.gtin, f.serial = gtin, serial
		} else {
			f.serial = s
		}
		if err := claim(dscsa.Name); err != nil {
			return f, err
		}
	}
	if s := strings.TrimSpace(req.SSCC); s != "" {
		sscc, err := dscsa.ParseSSCC(s)
		if err != nil {
			return f, api.BadField("sscc", "%s", err)
		}
		f.sscc = sscc
		if err := claim(dscsa.Name); err != nil {
			return f, err
		}
	}
	if s := strings.TrimSpace(req.TLC); s != "" {
		f.tlc = s
		if err := claim(fsma.Name); err != nil {
			return f, err
		}
	}
	return f, nil
}

// gtin14 reads a GTIN-8, -12, -13 or -14 as the GTIN-14 it is (leading
// zeros), checking its check digit.
func gtin14(s string) (string, error) {
	switch len(s) {
	case 8, 12, 13:
		s = strings.Repeat("0", 14-len(s)) + s
	}
	if err := gs1.ValidateGTIN14(s); err != nil {
		return "", err
	}
	return s, nil
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
	dom, okey, party, key, dlqID := it.Domain, it.okey, it.PartyID, it.key, it.DLQID
	if f.domain != "" && dom != f.domain {
		return false
	}
	a, b := splitOrderingKey(dom, okey, party)
	switch dom {
	case pharmacy.Name:
		if okey == "" && (f.ndc11 != "" || f.lot != "") {
			return false
		}
		return (f.ndc11 == "" || a == f.ndc11) && (f.lot == "" || b == f.lot) &&
			(f.registrant == "" || party == f.registrant) && f.txMatch(key, dlqID, it.ids)
	case dscsa.Name:
		lotOK := f.lot == "" || pairValue(it.ids, "lot") == f.lot
		if !strings.Contains(okey, ".") { // an aggregation's SSCC
			return okey != "" && lotOK && f.gtin == "" && f.serial == "" && (f.sscc == "" || okey == f.sscc)
		}
		return okey != "" && lotOK && f.sscc == "" && (f.gtin == "" || a == f.gtin) && (f.serial == "" || b == f.serial)
	case fsma.Name:
		return okey != "" && (f.tlc == "" || b == f.tlc) && (f.lot == "" || b == f.lot)
	}
	return false
}

// txMatch reports whether a pharmacy chain matches the filter's
// transaction id: the one its first record names, or (a record written
// before records named it, with the registrant given) its idempotency
// key or dlq id.
func (f idFilter) txMatch(key, dlqID string, ids []string) bool {
	if f.txID == "" {
		return true
	}
	if tx := pairValue(ids, "transaction_id"); tx != "" {
		return tx == f.txID
	}
	return f.key != "" && (key == f.key || dlqID == f.key)
}

// splitOrderingKey splits an ordering key into its two identifiers: the
// first ends at the first dot for pharmacy (NDC-11, after the registrant
// that leads the key) and DSCSA (GTIN-14), whose first halves have no dot;
// for FSMA the first is the supplier (the party), which may hold dots.
func splitOrderingKey(dom, okey, party string) (string, string) {
	if dom == fsma.Name && party != "" {
		if tlc, ok := strings.CutPrefix(okey, party+"."); ok {
			return party, tlc
		}
	}
	if dom == pharmacy.Name && party != "" {
		// "<registrant>.<ndc11>.<lot>" since the key names its party;
		// records quarantined before are "<ndc11>.<lot>".
		okey = strings.TrimPrefix(okey, party+".")
	}
	a, b, _ := strings.Cut(okey, ".")
	return a, b
}

// identifiersOf returns the identifiers an ordering key names and the
// first record's listed identifiers (pairs, listedPairs), under the
// envelope's names (api.Summary.Identifiers); nil when there are none.
func identifiersOf(dom, okey, party string, pairs []string) map[string]string {
	m := keyIdentifiers(dom, okey, party)
	for i := 0; i+1 < len(pairs); i += 2 {
		if m == nil {
			m = make(map[string]string, len(pairs)/2)
		}
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// keyIdentifiers returns the identifiers an ordering key names; nil when
// there are none.
func keyIdentifiers(dom, okey, party string) map[string]string {
	if okey == "" {
		return nil
	}
	a, b := splitOrderingKey(dom, okey, party)
	switch dom {
	case pharmacy.Name:
		m := map[string]string{"ndc11": a}
		if b != "" {
			m["lot"] = b
		}
		return m
	case dscsa.Name:
		if !strings.Contains(okey, ".") { // an aggregation's container
			return map[string]string{"sscc": okey}
		}
		return map[string]string{"gtin": a, "serial": b}
	case fsma.Name:
		return map[string]string{"tlc": b}
	}
	return nil
}
