package fsma

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/deadletter/deadletter/shared/domain"
)

// unique gives an FSMA event the identity number i (domain.Spec.Unique):
// its traceability lot code (the ordering key) and its reference document
// number (the idempotency key).
func unique(doc domain.Doc, i int) {
	id := fmt.Sprintf("SAMPLE-%09d", i)
	doc["traceability_lot_code"] = id
	if ref, ok := doc["reference_document"].(map[string]any); ok {
		ref["number"] = id
	}
}

// search finds FSMA events (domain.Spec.Search) by traceability lot code,
// given as tlc or as lot: the event's own (its ordering key's) or any its
// payload holds (payloadIdentifiers: its traceability_lot_code as written,
// also when the gate refused the event, and the input TLCs a
// transformation consumed).
var search = domain.Search{
	Fields:         []string{"tlc", "lot"},
	Parse:          parseSearch,
	KeyIdentifiers: keyIdentifiers,
	Identifiers:    payloadIdentifiers,
}

func parseSearch(v map[string]string) (domain.Matcher, error) {
	tlc, lot := v["tlc"], v["lot"]
	return func(c domain.Chain) bool {
		t := ""
		if c.OrderingKey != "" {
			_, t = splitKey(c.OrderingKey, c.PartyID)
		}
		has := func(want string) bool { return want == "" || t == want || c.Has("tlc", want) }
		return has(tlc) && has(lot)
	}, nil
}

// payloadIdentifiers returns the traceability lot codes an FSMA payload
// holds (domain.Search.Identifiers), valid or not, as "tlc": its
// traceability_lot_code and its input_tlcs, trimmed, strings only.
func payloadIdentifiers(doc domain.Doc) map[string][]string {
	var ids domain.IdentifierSet
	if s, ok := domain.String(doc, fieldTLC); ok {
		ids.Add("tlc", s)
	}
	inputs, _ := domain.Array(doc, fieldInputTLCs)
	for _, v := range inputs {
		if s, ok := v.(string); ok {
			ids.Add("tlc", strings.TrimSpace(s))
		}
	}
	return ids.Map()
}

// splitKey splits an ordering key "<supplier>.<tlc>" into its supplier
// (the party, which may hold dots) and traceability lot code.
func splitKey(okey, party string) (supplier, tlc string) {
	if party != "" {
		if tlc, ok := strings.CutPrefix(okey, party+"."); ok {
			return party, tlc
		}
	}
	supplier, tlc, _ = strings.Cut(okey, ".")
	return supplier, tlc
}

func keyIdentifiers(okey, party string) map[string]string {
	if okey == "" {
		return nil
	}
	_, tlc := splitKey(okey, party)
	return map[string]string{"tlc": tlc}
}

// Bounds of the fsma sheet: maxFieldName bounds the payload field names
// that become columns, maxMembers the members of one object field that
// do, maxExtraFields the fields beyond the KDEs that do (a publisher's
// extension fields). The JSONL export holds the rest.
const (
	maxFieldName   = 64
	maxMembers     = 16
	maxExtraFields = 64
)

// sheetLead are the FSMA 204 identity fields, the first columns of the
// fsma sheet.
var sheetLead = []string{fieldSupplier, fieldTLC, "cte_type"}

// memberOrder orders the members of a flattened object: a location's and
// a reference document's first, the rest by name.
var memberOrder = []string{"gln", "name", "address", "phone", "type", "number"}

// fsmaSheet is the fsma sheet of an export (domain.Spec.Sheet), as in the
// FDA's FSMA 204 sortable spreadsheet: the identity fields, every KDE of
// the CTE types present and the other fields the events carry, location
// and reference-document objects flattened into one column per member.
type fsmaSheet struct {
	ctes    map[string]bool     // the CTE types present
	members map[string][]string // the members seen per object field
	plain   map[string]bool     // fields seen with a value that is not an object
	seen    map[string]bool     // fields with a cell in some row
}

func sheet() domain.Sheet {
	return &fsmaSheet{ctes: map[string]bool{}, members: map[string][]string{}, plain: map[string]bool{}, seen: map[string]bool{}}
}

// Row returns the cells of every field of doc, an object field's as one
// cell per member ("<field>.<member>").
func (s *fsmaSheet) Row(doc domain.Doc, eventType string) map[string]any {
	if eventType != "" {
		s.ctes[eventType] = true
	}
	vals := map[string]any{}
	for k, v := range doc {
		if k == "" || strings.Contains(k, ".") || len(k) > maxFieldName {
			continue // not a column name (a dot is the flattening's)
		}
		switch x := v.(type) {
		case map[string]any:
			for m, mv := range x {
				if m == "" || strings.Contains(m, ".") || len(m) > maxFieldName {
					continue
				}
				if !slices.Contains(s.members[k], m) {
					if len(s.members[k]) == maxMembers {
						continue // the JSONL export holds it
					}
					s.members[k] = append(s.members[k], m)
				}
				vals[k+"."+m] = typed(k, mv)
				s.seen[k] = true
			}
		default:
			vals[k] = typed(k, v)
			s.plain[k] = true
			s.seen[k] = true
		}
	}
	return vals
}

// Columns returns the identity fields, every KDE of the CTE types present
// (in the rule's order), then the other fields the events carry (by name,
// at most maxExtraFields), each object field as one column per member (at
// most maxMembers), and as a column of its own too when some event gives
// it a value that is not an object.
func (s *fsmaSheet) Columns() []domain.Column {
	var fields []string
	add := func(f string) {
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	for _, f := range sheetLead {
		add(f)
	}
	for _, cte := range CTETypes() {
		if s.ctes[cte] {
			for _, k := range RequiredKDEs(cte) {
				for _, f := range strings.Split(k, " or ") {
					add(f)
				}
			}
		}
	}
	extra := make([]string, 0, len(s.seen))
	for f := range s.seen {
		if !slices.Contains(fields, f) {
			extra = append(extra, f)
		}
	}
	sort.Strings(extra)
	for _, f := range extra[:min(len(extra), maxExtraFields)] {
		add(f)
	}
	var cols []domain.Column
	for _, f := range fields {
		ms := slices.Clone(s.members[f])
		if len(ms) == 0 || s.plain[f] {
			cols = append(cols, domain.Column{Name: f, Kind: fieldKind(f)})
		}
		slices.SortFunc(ms, func(a, c string) int {
			ia, ic := slices.Index(memberOrder, a), slices.Index(memberOrder, c)
			switch {
			case ia >= 0 && ic >= 0:
				return ia - ic
			case ia >= 0:
				return -1
			case ic >= 0:
				return 1
			}
			return strings.Compare(a, c)
		})
		for _, m := range ms {
			cols = append(cols, domain.Column{Name: f + "." + m, Kind: domain.KindText})
		}
	}
	return cols
}

// fieldKind is the kind of an FSMA field's column.
func fieldKind(f string) domain.CellKind {
	switch f {
	case fieldEventTime:
		return domain.KindTime
	case "quantity":
		return domain.KindNumber
	case "harvest_date", "harvest_date_start", "harvest_date_end", "cooling_date":
		return domain.KindDate
	}
	return domain.KindText
}

// typed is the cell of the field f's value v.
func typed(f string, v any) any {
	switch fieldKind(f) {
	case domain.KindTime:
		if t := domain.CellTime(v); t != nil {
			return t
		}
	case domain.KindNumber:
		if n := domain.CellNumber(v); n != nil {
			return n
		}
	case domain.KindDate:
		if d := domain.CellDate(v); d != nil {
			return d
		}
		if t := domain.CellTime(v); t != nil {
			return t
		}
	}
	return domain.CellText(v)
}
