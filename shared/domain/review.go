package domain

import "log/slog"

// Change is one field of an event a correction changes, with its values
// before and after as the payloads write them ("" when absent or null).
// The values are payload values: show them only to the roles that read
// payloads and never log them (String and LogValue give the field name
// only).
type Change struct {
	Field, Before, After string
}

// String is the field name only, so that no value reaches a log by a %v.
func (c Change) String() string { return c.Field }

// LogValue logs the field name, never the values.
func (c Change) LogValue() slog.Value { return slog.StringValue(c.Field) }

// Review is what a domain's second-person rule (Spec.SecondPerson) finds
// of one correction: the zero Review when a single person may make it.
type Review struct {
	// Reasons name the rules that matched, in words, without any value
	// of the payloads (e.g. "a correction of a controlled substance (DEA
	// Schedule II–V)").
	Reasons []string
	// Changes are the fields the correction changes that the rule asks a
	// second person to see, in the domain's order, with their values.
	Changes []Change
}

// Needed reports whether the rule asks for a second person.
func (r Review) Needed() bool { return len(r.Reasons) > 0 }

// ReviewCorrection applies the domain's second-person rule
// (SecondPerson) to a correction of one of its events, from the payload
// before (original) to the payload after (corrected), each decoded by
// Decode (nil when it does not decode). A domain without a rule of its
// own needs no second person by it: the zero Review.
func (s Spec) ReviewCorrection(original, corrected Doc) Review {
	if s.SecondPerson == nil {
		return Review{}
	}
	return s.SecondPerson(original, corrected)
}
