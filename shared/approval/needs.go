package approval

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/gate"
)

// Identity fields the correction guard compares (api.IdentityChange.Field).
const (
	FieldIdempotencyKey = "idempotency_key"
	FieldOrderingKey    = "ordering_key"
	FieldDomain         = "domain"
	FieldEventType      = "event_type"
)

// Action is an action a person asks for, as Needs sees it.
type Action struct {
	// Kind is one of api.ActionCorrect, ActionRelease, ActionDrain,
	// ActionHoldLift, ActionDismiss.
	Kind string
	// Domain is the event's domain (the chain's), for a correction.
	// CorrectedDomain is the domain the correction would replay in, when
	// it names one; empty: the same.
	Domain, CorrectedDomain string
	// SubjectEventType is the event type of the original subject: the
	// replay's when a payload names none (as the redriver replays).
	SubjectEventType string
	// Original and Corrected are a correction's payloads: the effective
	// payload before the correction (the original or the latest
	// correction) and the corrected one.
	Original, Corrected []byte
	// Selected, IncludesValidation and IgnoreOrder describe a drain: how
	// many events it selects, whether validation-class events are among
	// them, and whether it waives per-key order.
	Selected           int
	IncludesValidation bool
	IgnoreOrder        bool
}

// Decision is whether an action needs approval, and why.
type Decision struct {
	// Needed: the action waits for a second person.
	Needed bool
	// Reasons names the rules that matched (no values).
	Reasons []string
	// Diff lists the identity fields a correction changes, and under
	// CorrectionsControlled the pharmacy key fields it changes
	// (PharmacyKeyDiff), with their values: show it only to roles that read payloads (Redact), never
	// log it (api.IdentityChange logs its field name only).
	Diff []api.IdentityChange
}

// DiffFields returns the names of the changed identity fields.
func (d Decision) DiffFields() []string {
	out := make([]string, len(d.Diff))
	for i, c := range d.Diff {
		out[i] = c.Field
	}
	return out
}

// Needs decides whether action a needs approval under policy p. A
// correction that changes the event's identity (idempotency key, ordering
// key, domain or event type, as the domain's rules derive them from the
// payloads) always does, whatever p says, and the decision carries the
// diff. Under CorrectionsControlled a correction of a pharmacy event does
// too when either payload names a DEA schedule (Controlled) or the
// correction changes its quantity, NDC, lot or registrant
// (PharmacyKeyDiff, added to the diff). An unknown kind is an
// ErrBadRequest.
func Needs(p Policy, a Action) (Decision, error) {
	var d Decision
	need := func(reason string) { d.Needed, d.Reasons = true, append(d.Reasons, reason) }
	switch a.Kind {
	case api.ActionCorrect:
		d.Diff = IdentityDiff(a)
		if len(d.Diff) > 0 {
			need("the correction changes the event's identity (" + strings.Join(d.DiffFields(), ", ") + ")")
		}
		if p.Corrections == CorrectionsAll {
			need("policy: every correction")
		}
		if p.Corrections == CorrectionsControlled && (a.Domain == pharmacy.Name || a.CorrectedDomain == pharmacy.Name) {
			if Controlled(a.Original) || Controlled(a.Corrected) {
				need("policy: a correction of a controlled substance (DEA Schedule II–V)")
			}
			if keys := PharmacyKeyDiff(a.Original, a.Corrected); len(keys) > 0 {
				d.Diff = append(d.Diff, keys...)
				names := make([]string, len(keys))
				for i, c := range keys {
					names[i] = c.Field
				}
				need("policy: the correction changes the pharmacy event's " + strings.Join(names, ", "))
			}
		}
		if !registry.Known(a.Domain) {
			need("the identity of an event of no registered domain cannot be compared")
		}
	case api.ActionRelease:
		if p.ReleasePoison {
			need("policy: every release of a poison event")
		}
	case api.ActionDrain:
		if p.DrainMaxSelected > 0 && a.Selected > p.DrainMaxSelected {
			need(fmt.Sprintf("policy: the drain selects %d events, more than %d", a.Selected, p.DrainMaxSelected))
		}
		if p.DrainValidation && a.IncludesValidation {
			need("policy: the drain includes validation-class events")
		}
		if p.IgnoreOrder && a.IgnoreOrder {
			need("policy: the drain waives per-key order (ignore_order)")
		}
	case api.ActionHoldLift:
		if p.HoldLift {
			need("policy: lifting a legal hold")
		}
	case api.ActionDismiss:
		if !p.DismissWithoutApproval {
			need("policy: every dismissal")
		}
	default:
		return Decision{}, badField("action", "must be one of "+strings.Join(Actions(), ", "))
	}
	return d, nil
}

// Actions are the kinds of action Needs knows.
func Actions() []string {
	return []string{api.ActionCorrect, api.ActionRelease, api.ActionDrain, api.ActionHoldLift, api.ActionDismiss}
}

// identity is what the guard compares of one payload.
type identity struct{ key, ordering, domain, eventType string }

// identityOf derives the identity of payload in domain dom by the domain's
// rules (the fields it cannot derive stay empty); fallbackType is the event
// type when the payload names none.
func identityOf(dom string, payload []byte, fallbackType string) (id identity) {
	id = identity{domain: dom, eventType: fallbackType}
	spec, ok := registry.Lookup(dom)
	if !ok {
		return id
	}
	defer func() {
		if recover() != nil { // a checker's bug must not break the guard
			id = identity{domain: dom, eventType: fallbackType}
		}
	}()
	doc, err := gate.Decode(payload)
	if err != nil {
		return id
	}
	env := spec.Checker.Identify(doc)
	id.key, id.ordering = env.IdempotencyKey, env.OrderingKey
	// The replay's event type, as the redriver derives it: the payload's,
	// else the original subject's.
	if t, err := spec.Checker.EventType(doc); err == nil && t != "" {
		id.eventType = t
	}
	return id
}

// IdentityDiff compares the identity of a correction's original and
// corrected payloads (Action.Original, Corrected) and lists the fields
// that differ, in a fixed order. A field the rules derive from one payload
// and not from the other differs too: a correction that makes the identity
// underivable, or derivable for the first time, is an identity change.
func IdentityDiff(a Action) []api.IdentityChange {
	corrDomain := a.CorrectedDomain
	if corrDomain == "" {
		corrDomain = a.Domain
	}
	before := identityOf(a.Domain, a.Original, a.SubjectEventType)
	after := identityOf(corrDomain, a.Corrected, a.SubjectEventType)
	var out []api.IdentityChange
	add := func(field, b, c string) {
		if b != c {
			out = append(out, api.IdentityChange{Field: field, Before: b, After: c})
		}
	}
	add(FieldIdempotencyKey, before.key, after.key)
	add(FieldOrderingKey, before.ordering, after.ordering)
	add(FieldDomain, before.domain, after.domain)
	add(FieldEventType, before.eventType, after.eventType)
	return out
}

// Pharmacy fields whose change needs a second person under
// CorrectionsControlled (api.IdentityChange.Field), as the pharmacy
// schema names them.
const (
	FieldQuantity   = "quantity_delta"
	FieldNDC        = "ndc"
	FieldLot        = "lot"
	FieldRegistrant = "registrant_dea"
)

// controlledSchedules are the DEA schedules a pharmacy event may name
// (the domain accepts II, IIN, III, IIIN, IV and V; N: non-narcotic), and
// Schedule I, which it refuses but which is controlled all the same.
var controlledSchedules = map[string]bool{"I": true, "II": true, "IIN": true, "III": true, "IIIN": true, "IV": true, "V": true}

// Controlled reports whether pharmacy payload names a controlled
// substance: its dea_schedule, trimmed and upper-cased, is a DEA
// schedule. A payload that does not decode, or names no schedule (or one
// the DEA has not), is not.
func Controlled(payload []byte) bool {
	doc, err := gate.Decode(payload)
	if err != nil {
		return false
	}
	s, ok := domain.String(doc, "dea_schedule")
	return ok && controlledSchedules[strings.ToUpper(s)]
}

// PharmacyKeyDiff lists the pharmacy key fields (quantity, NDC, lot,
// registrant) whose values differ between payloads original and
// corrected, in that order, with their values as written. Two values are
// the same when they are after trimming (and upper-casing a registrant),
// when both NDCs normalize to the same NDC-11, and when both are absent,
// null or empty. A payload that does not decode has none of them, so
// every field the other one has differs.
func PharmacyKeyDiff(original, corrected []byte) []api.IdentityChange {
	before, _ := gate.Decode(original)
	after, _ := gate.Decode(corrected)
	var out []api.IdentityChange
	for _, field := range [...]string{FieldQuantity, FieldNDC, FieldLot, FieldRegistrant} {
		b, c := keyValue(before, field), keyValue(after, field)
		if !sameKey(field, b, c) {
			out = append(out, api.IdentityChange{Field: field, Before: b, After: c})
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
		nb, errB := pharmacy.NormalizeNDC(b)
		nc, errC := pharmacy.NormalizeNDC(c)
		return errB == nil && errC == nil && nb == nc
	}
	return b == c
}
