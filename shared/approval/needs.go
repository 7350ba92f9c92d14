package approval

import (
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain"
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
	// CorrectionsControlled the key fields the domain's second-person
	// rule lists (domain.Review.Changes), with their values: show it only to roles that read payloads (Redact), never
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
// diff. Under CorrectionsControlled a correction does too when its
// domain's second-person rule says so (domain.Spec.SecondPerson: for
// pharmacy, a DEA Schedule II–V substance or a change of quantity, NDC,
// lot or registrant), the changes it lists added to the diff. An unknown
// kind is an ErrBadRequest.
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
		if p.Corrections == CorrectionsControlled {
			r := domainReview(a)
			for _, c := range r.Changes {
				d.Diff = append(d.Diff, api.IdentityChange{Field: c.Field, Before: c.Before, After: c.After})
			}
			for _, reason := range r.Reasons {
				need("policy: " + reason)
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

// domainReview applies the second-person rule of the correction's domain
// (domain.Spec.SecondPerson), and of the domain it would replay in when it
// names another, to its payloads.
func domainReview(a Action) domain.Review {
	before, _ := domain.Decode(a.Original)
	after, _ := domain.Decode(a.Corrected)
	var r domain.Review
	for i, dom := range []string{a.Domain, a.CorrectedDomain} {
		if i == 1 && (dom == "" || dom == a.Domain) {
			break
		}
		if spec, ok := registry.Lookup(dom); ok {
			got := spec.ReviewCorrection(before, after)
			r.Reasons, r.Changes = append(r.Reasons, got.Reasons...), append(r.Changes, got.Changes...)
		}
	}
	return r
}
