package pharmacy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/domain"
)

// The fields whose change needs a second person under the domains' own
// rules (Spec.SecondPerson, domain.Change.Field), as the schema names
// them: the quantity, the NDC, the lot and the registrant.
const (
	FieldQuantity   = "quantity_delta"
	FieldNDC        = "ndc"
	FieldLot        = "lot"
	FieldRegistrant = "registrant_dea"
)

// keyFields are the fields KeyChanges compares, in the order it lists
// them.
var keyFields = [...]string{FieldQuantity, FieldNDC, FieldLot, FieldRegistrant}

// controlledSchedule reports whether a normalized schedule is a DEA
// schedule: one an event may name (schedules: II to V, N non-narcotic) or
// Schedule I, which the rules refuse (a pharmacy holds none) but which is
// controlled all the same.
func controlledSchedule(s string) bool { return s == "I" || schedules[s] }

// Reasons of secondPerson, in words, without values.
const (
	reasonControlled = "a correction of a controlled substance (DEA Schedule II–V)"
	reasonKeyChange  = "the correction changes the pharmacy event's "
)

// secondPerson is the pharmacy domain's second-person rule
// (domain.Spec.SecondPerson, issue #40): a correction needs a second
// person when either payload names a controlled substance (Controlled)
// or it changes the event's quantity, NDC, lot or registrant
// (KeyChanges, which the Review's Changes are).
func secondPerson(original, corrected domain.Doc) domain.Review {
	var r domain.Review
	if Controlled(original) || Controlled(corrected) {
		r.Reasons = append(r.Reasons, reasonControlled)
	}
	if keys := KeyChanges(original, corrected); len(keys) > 0 {
		names := make([]string, len(keys))
		for i, c := range keys {
			names[i] = c.Field
		}
		r.Changes = keys
		r.Reasons = append(r.Reasons, reasonKeyChange+strings.Join(names, ", "))
	}
	return r
}

// Controlled reports whether a pharmacy event names a controlled
// substance: its dea_schedule, trimmed and upper-cased, is a DEA schedule
// (controlledSchedule). An event that names no schedule, or one the DEA
// has not, is not; nor is a nil one (a payload that did not decode).
func Controlled(doc domain.Doc) bool {
	s, ok := domain.String(doc, "dea_schedule")
	return ok && controlledSchedule(strings.ToUpper(s))
}

// KeyChanges lists the key fields (quantity, NDC, lot, registrant) whose
// values differ between events original and corrected, in that order,
// with their values as written. Two values are the same when they are
// after trimming (and upper-casing a registrant), when both NDCs
// normalize to the same NDC-11 (NormalizeNDC), and when both are absent,
// null or empty. A nil event (a payload that did not decode) has none of
// them, so every field the other one has differs.
func KeyChanges(original, corrected domain.Doc) []domain.Change {
	var out []domain.Change
	for _, field := range keyFields {
		b, c := keyValue(original, field), keyValue(corrected, field)
		if !sameKey(field, b, c) {
			out = append(out, domain.Change{Field: field, Before: b, After: c})
		}
	}
	return out
}

// keyValue is doc[field] as written: a string trimmed, another value as
// its JSON text, "" when absent or null.
func keyValue(doc domain.Doc, field string) string {
	v, ok := doc[field]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return strings.TrimSpace(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	return string(b)
}

// sameKey reports whether two values of field are the same key value.
func sameKey(field, b, c string) bool {
	switch field {
	case FieldRegistrant:
		return strings.EqualFold(b, c)
	case FieldNDC:
		if b == c {
			return true
		}
		nb, errB := NormalizeNDC(b)
		nc, errC := NormalizeNDC(c)
		return errB == nil && errC == nil && nb == nc
	}
	return b == c
}
