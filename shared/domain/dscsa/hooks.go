package dscsa

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/gs1"
)

// unique gives a DSCSA event the identity number i (domain.Spec.Unique):
// its eventID (the idempotency key), the serial numbers of its SGTINs and
// the serial references of its SSCCs (the ordering key: its container or
// its first item). The SSCCs of event i are distinct from those of any
// other: the k-th SSCC of a list gets i*100+k, the parent i*100+99.
func unique(doc domain.Doc, i int) {
	doc["eventID"] = fmt.Sprintf("urn:uuid:00000000-0000-4000-8000-%012d", i)
	for _, field := range []string{"epcList", "childEPCs"} {
		if list, ok := doc[field].([]any); ok {
			for k, v := range list {
				if epc, ok := v.(string); ok {
					list[k] = withContainer(withSerial(epc, fmt.Sprintf("S%09dE%d", i, k)), i*100+k%99)
				}
			}
		}
	}
	if parent, ok := doc["parentID"].(string); ok {
		doc["parentID"] = withContainer(withSerial(parent, fmt.Sprintf("P%09d", i)), i*100+99)
	}
}

// withSerial replaces the serial number of an SGTIN URN (its last
// component) or of a GS1 Digital Link (the value of AI 21).
func withSerial(epc, serial string) string {
	if j := strings.Index(epc, "/21/"); j >= 0 {
		rest := epc[j+len("/21/"):]
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		return epc[:j+len("/21/")] + serial + rest[end:]
	}
	if strings.HasPrefix(strings.ToLower(epc), "urn:epc:id:sgtin:") {
		if j := strings.LastIndexByte(epc, '.'); j >= 0 {
			return epc[:j+1] + serial
		}
	}
	return epc
}

// withContainer gives an SSCC (URN or GS1 Digital Link) the serial
// reference i, in its own width, and a Digital Link its check digit again;
// any other identifier is returned as it is.
func withContainer(id string, i int) string {
	if j := strings.LastIndexByte(id, '.'); j >= 0 && strings.HasPrefix(strings.ToLower(id), "urn:epc:id:sscc:") {
		return id[:j+1] + lastDigits(id[j+1:], i)
	}
	if j := strings.Index(id, "/00/"); j >= 0 && len(id) >= j+4+18 {
		sscc := id[j+4 : j+4+18]
		body := sscc[:1] + lastDigits(sscc[1:17], i)
		return id[:j+4] + body + string(gs1.CheckDigit(body)) + id[j+4+18:]
	}
	return id
}

// lastDigits replaces the last digits of s by i (as many as i needs, at
// most len(s)), keeping the width of s.
func lastDigits(s string, i int) string {
	d := strconv.Itoa(i)
	if len(d) > len(s) {
		d = d[len(d)-len(s):]
	}
	return s[:len(s)-len(d)] + d
}

// sheetColumns are the dscsa sheet's columns (domain.Spec.Sheet).
var sheetColumns = []domain.Column{
	{Name: "event_time", Kind: domain.KindTime}, {Name: "business_step"}, {Name: "action"}, {Name: "disposition"},
	{Name: "gtin"}, {Name: "serial"}, {Name: "sscc"}, {Name: "epc_count", Kind: domain.KindInteger}, {Name: "epc_list"},
	{Name: "parent_id"}, {Name: "child_count", Kind: domain.KindInteger}, {Name: "child_epcs"},
	{Name: "lot"}, {Name: "expiry", Kind: domain.KindDate}, {Name: "read_point"}, {Name: "business_location"},
	{Name: "business_transactions"}, {Name: "event_id"}, {Name: "event_hash_id"},
}

// sheet is the dscsa sheet of an export: event time, business step,
// action, disposition, GTIN and serial of the first SGTIN, SSCC of the
// first logistic unit, EPC count and list, an aggregation's parent ID,
// child count and children, lot, expiry, read point, business location,
// business transactions ("<type>: <id>" per line, the type as its bare
// CBV word), event ID and event hash ID. An identifier the rules read is
// normalized (a GTIN-14, an SSCC-18); one they could not is as written.
func sheet() domain.Sheet {
	return domain.FixedSheet{Cols: sheetColumns, Cells: sheetCells}
}

func sheetCells(doc domain.Doc, _ string) []any {
	t := domain.CellText
	env := Checker{}.Identify(doc)
	var ids map[string]string
	hashID := env.EventHashID // derived for every event that parses, valid or not
	if env.EventType != "" {
		if full, err := (Checker{}).Check(env.EventType, doc); err == nil {
			ids = full.Identifiers
		}
	}
	gtin, serial, sscc := ids["gtin"], ids["serial"], ids["sscc"]
	if ids == nil { // an event the rules refuse: its ordering key's identifiers
		if g, s, item := strings.Cut(env.OrderingKey, "."); item {
			gtin, serial = g, s
		} else if _, agg := doc["parentID"]; !agg {
			sscc = env.OrderingKey
		}
	}
	var evTime any
	if !env.EventTime.IsZero() {
		evTime = env.EventTime.UTC()
	}
	epcs, epcCount := listCells(doc, "epcList")
	children, childCount := listCells(doc, "childEPCs")
	if childCount == nil && doc["type"] == typeAggregation {
		childCount = int64(0) // an aggregation without children (a DELETE of all)
	}
	var parentID any
	if p := firstNonEmpty(ids["parent_id"], t(doc["parentID"])); p != "" {
		parentID = p
	}
	if id, _ := domain.String(doc, "eventID"); hashID == "" && strings.HasPrefix(id, "ni:///") {
		hashID = id // the event's ID is its CBV 2.0 event hash
	}
	return []any{
		evTime, env.EventType, t(doc["action"]), t(doc["disposition"]), gtin, serial, sscc, epcCount, epcs,
		parentID, childCount, children,
		firstNonEmpty(ids["lot"], env.Identifiers["lot"]), domain.CellDate(ids["expiry"]),
		firstNonEmpty(ids["read_point"], locationID(doc, "readPoint")),
		firstNonEmpty(ids["biz_location"], locationID(doc, "bizLocation")), bizTransactions(doc),
		t(doc["eventID"]), hashID,
	}
}

// listCells returns the entries of the list doc[field], one per line as
// written, and their count (nil when the list is absent or empty).
func listCells(doc domain.Doc, field string) (string, any) {
	list, _ := domain.Array(doc, field)
	if len(list) == 0 {
		return "", nil
	}
	lines := make([]string, 0, len(list))
	for _, e := range list {
		lines = append(lines, domain.CellText(e))
	}
	return strings.Join(lines, "\n"), int64(len(list))
}

// bizTransactions returns the event's business transactions, one per
// line: "<type>: <id>", the type as its bare CBV word when it is a CBV
// business transaction type (po, desadv, inv...), as sent otherwise; an
// entry without type is its id alone.
func bizTransactions(doc domain.Doc) string {
	list, _ := domain.Array(doc, "bizTransactionList")
	lines := make([]string, 0, len(list))
	for _, v := range list {
		bt, ok := v.(map[string]any)
		if !ok {
			lines = append(lines, domain.CellText(v))
			continue
		}
		id := domain.CellText(bt["bizTransaction"])
		if typ, ok := domain.String(bt, "type"); ok {
			id = normBTT(typ) + ": " + id
		}
		lines = append(lines, id)
	}
	return strings.Join(lines, "\n")
}

// locationID returns doc[field].id (an EPCIS readPoint or bizLocation).
func locationID(doc domain.Doc, field string) string {
	o, _ := domain.Object(doc, field)
	return domain.CellText(o["id"])
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
