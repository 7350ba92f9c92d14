package pharmacy

import (
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/gs1"
)

// unique gives a pharmacy event the identity number i (domain.Spec.Unique):
// its transaction id (the idempotency key) and its lot (the ordering key).
func unique(doc domain.Doc, i int) {
	id := fmt.Sprintf("SAMPLE-%09d", i)
	doc["transaction_id"] = id
	doc["lot"] = id
}

// search finds pharmacy events (domain.Spec.Search) by NDC in any FDA
// layout (→ NDC-11), lot, registrant (a DEA number, any case) and
// transaction id: by the event's ordering key and party, the identifiers
// its first record lists, every identifier its payload holds
// (payloadIdentifiers, read as written: an event whose NDC or registrant
// the gate refused is found by them) or, with the registrant, the
// idempotency key of a record written before records listed the
// transaction id.
var search = domain.Search{
	Fields:         []string{"ndc", "registrant", "transaction_id", "lot"},
	Parse:          parseSearch,
	KeyIdentifiers: keyIdentifiers,
	Identifiers:    payloadIdentifiers,
}

func parseSearch(v map[string]string) (domain.Matcher, error) {
	var ndc11, registrant, key string
	if s := v["ndc"]; s != "" {
		n11, err := NormalizeNDC(s)
		if err != nil {
			return nil, &domain.SearchError{Field: "ndc", Rule: "not an NDC: " + err.Error()}
		}
		ndc11 = n11
	}
	if s := v["registrant"]; s != "" {
		s = strings.ToUpper(s)
		if err := ValidateDEA(s); err != nil {
			return nil, &domain.SearchError{Field: "registrant", Rule: "not a DEA registration number: " + err.Error()}
		}
		registrant = s
	}
	txID, lot := v["transaction_id"], v["lot"]
	if txID != "" && registrant != "" {
		// The event's idempotency key (KeySource): a record written
		// before records kept the transaction id (Listed) matches by it.
		key = domain.Key(Name, registrant, txID)
	}
	return func(c domain.Chain) bool {
		n, l := "", ""
		if c.OrderingKey != "" {
			n, l = splitKey(c.OrderingKey, c.PartyID)
		}
		return (ndc11 == "" || n == ndc11 || c.Has("ndc", ndc11)) && (lot == "" || l == lot || c.Has("lot", lot)) &&
			(registrant == "" || c.PartyID == registrant || c.Has("registrant", registrant)) && txMatch(c, txID, key)
	}, nil
}

// txMatch reports whether a chain matches the transaction id searched:
// the one its first record lists or its payload holds, or (a record
// written before records listed it, with the registrant given) its
// idempotency key or dlq id.
func txMatch(c domain.Chain, txID, key string) bool {
	if txID == "" || c.Has("transaction_id", txID) {
		return true
	}
	if c.Identifier("transaction_id") != "" {
		return false
	}
	return key != "" && (c.IdempotencyKey == key || c.DLQID == key)
}

// payloadIdentifiers returns the identifiers a pharmacy payload holds
// (domain.Search.Identifiers), valid or not: "ndc" as NDC-11 (ten plain
// digits, which the rules refuse as ambiguous, as each NDC-11 they may
// be), "lot", "registrant" (upper case) and "transaction_id", each
// trimmed, strings only.
func payloadIdentifiers(doc domain.Doc) map[string][]string {
	var ids domain.IdentifierSet
	if s, ok := domain.String(doc, "ndc"); ok {
		if n11, err := NormalizeNDC(s); err == nil {
			ids.Add("ndc", n11)
		} else if len(s) == 10 && gs1.Digits(s) {
			ids.Add("ndc", "0"+s)           // 4-4-2
			ids.Add("ndc", s[:5]+"0"+s[5:]) // 5-3-2
			ids.Add("ndc", s[:9]+"0"+s[9:]) // 5-4-1
		}
	}
	for field, name := range map[string]string{"lot": "lot", "transaction_id": "transaction_id", "registrant_dea": "registrant"} {
		if s, ok := domain.String(doc, field); ok {
			if name == "registrant" {
				s = strings.ToUpper(s)
			}
			ids.Add(name, s)
		}
	}
	return ids.Map()
}

// splitKey splits an ordering key into its NDC-11 and lot:
// "<registrant>.<ndc11>.<lot>" since the key names its party; records
// quarantined before are "<ndc11>.<lot>".
func splitKey(okey, party string) (ndc11, lot string) {
	if party != "" {
		okey = strings.TrimPrefix(okey, party+".")
	}
	ndc11, lot, _ = strings.Cut(okey, ".")
	return ndc11, lot
}

func keyIdentifiers(okey, party string) map[string]string {
	if okey == "" {
		return nil
	}
	ndc11, lot := splitKey(okey, party)
	m := map[string]string{"ndc11": ndc11}
	if lot != "" {
		m["lot"] = lot
	}
	return m
}

// sheetColumns are the pharmacy sheet's columns (domain.Spec.Sheet).
var sheetColumns = []domain.Column{
	{Name: "registrant_dea"}, {Name: "transaction_id"}, {Name: "event_type"}, {Name: "ndc"}, {Name: "ndc11"}, {Name: "drug_name"},
	{Name: "lot"}, {Name: "expiry", Kind: domain.KindDate}, {Name: "quantity", Kind: domain.KindNumber},
	{Name: "unit"}, {Name: "dea_schedule"}, {Name: "counterparty_dea"}, {Name: "occurred_at", Kind: domain.KindTime},
	{Name: "actor_id"},
}

// sheet is the pharmacy sheet of an export: registrant, transaction id,
// event type, NDC and NDC-11, drug name, lot, expiry, quantity, unit, schedule,
// counterparty, occurred at and actor.
func sheet() domain.Sheet {
	return domain.FixedSheet{Cols: sheetColumns, Cells: func(doc domain.Doc, _ string) []any {
		t := domain.CellText
		ndc := t(doc["ndc"])
		var ndc11 any
		if n, err := NormalizeNDC(ndc); err == nil {
			ndc11 = n
		}
		return []any{
			t(doc["registrant_dea"]), t(doc["transaction_id"]), t(doc["event_type"]), ndc, ndc11, t(doc["drug_name"]),
			t(doc["lot"]), domain.CellOr(domain.CellDate(doc["expiry"]), doc["expiry"]),
			domain.CellOr(domain.CellNumber(doc["quantity_delta"]), doc["quantity_delta"]),
			t(doc["unit"]), t(doc["dea_schedule"]), t(doc["counterparty_dea"]),
			domain.CellOr(domain.CellTime(doc["occurred_at"]), doc["occurred_at"]), t(doc["actor_id"]),
		}
	}}
}
