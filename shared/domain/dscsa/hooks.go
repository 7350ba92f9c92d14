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
	{Name: "gtin"}, {Name: "serial"}, {Name: "epc_count", Kind: domain.KindInteger}, {Name: "epc_list"},
	{Name: "lot"}, {Name: "expiry", Kind: domain.KindDate}, {Name: "read_point"}, {Name: "business_location"},
	{Name: "event_id"}, {Name: "event_hash_id"},
}

// sheet is the dscsa sheet of an export: event time, business step,
// action, disposition, GTIN and serial of the first EPC, EPC count and
// list, lot, expiry, read point, business location, event ID and event
// hash ID.
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
	gtin, serial, _ := strings.Cut(env.OrderingKey, ".")
	var evTime, epcCount any
	if !env.EventTime.IsZero() {
		evTime = env.EventTime.UTC()
	}
	epcs, _ := domain.Array(doc, "epcList")
	if len(epcs) > 0 {
		epcCount = int64(len(epcs))
	}
	list := make([]string, 0, len(epcs))
	for _, e := range epcs {
		list = append(list, t(e))
	}
	if id, _ := domain.String(doc, "eventID"); hashID == "" && strings.HasPrefix(id, "ni:///") {
		hashID = id // the event's ID is its CBV 2.0 event hash
	}
	return []any{
		evTime, env.EventType, t(doc["action"]), t(doc["disposition"]), gtin, serial, epcCount,
		strings.Join(list, "\n"), ids["lot"], domain.CellDate(ids["expiry"]),
		firstNonEmpty(ids["read_point"], locationID(doc, "readPoint")),
		firstNonEmpty(ids["biz_location"], locationID(doc, "bizLocation")), t(doc["eventID"]), hashID,
	}
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
