package record

import (
	"maps"
	"slices"
)

// Kind is the lifecycle step a record states. The first record of a chain
// is KindQuarantined; every later record is a change of state of the same
// event. Every Kind has one entry in the kinds table below, which is the
// lifecycle: where the kind is allowed, the status it leaves, its effect on
// the folded State and its audit-log event (a test requires the entry of
// every Kind constant).
type Kind string

// Kinds of record.
const (
	// KindQuarantined: the event failed and was quarantined (class
	// validation or exhausted).
	KindQuarantined Kind = "quarantined"
	// KindCorrected: an operator supplied a corrected payload; the record
	// carries it, the original bytes stay in the first record.
	KindCorrected Kind = "corrected"
	// KindRedriveRequested: a replay of the event is about to be published
	// (by a drain or a single redrive).
	KindRedriveRequested Kind = "redrive_requested"
	// KindReplayed: the replay was committed; the record is resolved.
	KindReplayed Kind = "replayed"
	// KindSkippedDuplicate: the event's key was already committed; resolved
	// without a replay.
	KindSkippedDuplicate Kind = "skipped_duplicate"
	// KindReplayFailed: the replay failed again (below the redrive cap).
	KindReplayFailed Kind = "replay_failed"
	// KindPoisoned: the replay failed at the redrive cap; the event is
	// isolated and never replayed without a release.
	KindPoisoned Kind = "poisoned"
	// KindReleased: a person moved a poison record back to redrivable.
	KindReleased Kind = "released"
	// KindResolved: a person closed the record without a replay.
	KindResolved Kind = "resolved"
	// KindDismissed: a person closed the chain for good without
	// committing its event (junk, a test, an event its publisher may not
	// publish): resolved, never replayed, holding nothing, always
	// exported. It carries who (Actor) and why (Reason), both required,
	// and needs a second person's approval unless the policy waives it
	// (api.Policy.DismissWithoutApproval).
	KindDismissed Kind = "dismissed"
	// KindApproved: a second person approved an action on the event (a
	// two-person approval, package approval); the record carries the
	// electronic signature (Signature) and keeps the status. It precedes
	// the record of the approved action.
	KindApproved Kind = "approved"
	// KindHoldPlaced: a legal hold (package hold) now holds the event: it
	// is never drained, redriven, released or resolved while held, and
	// its chain is retained (a LEGALHOLD copy) past QUARANTINE's MaxAge.
	// The record carries the hold (Hold), the person who placed it
	// (Actor) and why (Reason); it keeps the status, resolved included.
	KindHoldPlaced Kind = "hold_placed"
	// KindHoldLifted: a legal hold no longer holds the event. The record
	// carries the hold (Hold), the person who lifted it (Actor) and why
	// (Reason); it keeps the status.
	KindHoldLifted Kind = "hold_lifted"
)

// Class is an event's failure class.
type Class string

// Failure classes.
const (
	// ClassValidation: the event is structurally wrong (never retried).
	ClassValidation Class = "validation"
	// ClassExhausted: transient failures used up every delivery.
	ClassExhausted Class = "exhausted"
	// ClassPoison: the event failed after the redrive cap and is isolated.
	ClassPoison Class = "poison"
)

// Status is the state of a quarantined event, as folded from its chain.
type Status string

// Statuses of a quarantined event.
const (
	// StatusOpen: quarantined, waiting for a correction, redrive or decision.
	StatusOpen Status = "open"
	// StatusRedriving: a replay was requested and its outcome is pending.
	StatusRedriving Status = "redriving"
	// StatusResolved: closed (replayed, duplicate, or a person's decision).
	StatusResolved Status = "resolved"
	// StatusPoison: isolated after the redrive cap; needs a release.
	StatusPoison Status = "poison"
	// StatusInvalid: the chain breaks a link or lifecycle rule.
	StatusInvalid Status = "invalid"
)

// kindRule is the lifecycle of one record kind.
type kindRule struct {
	// from lists the statuses in which the kind may follow a record (none
	// for KindQuarantined, which is only the first record).
	from []Status
	// to is the status the record leaves; "" keeps the status it found.
	to Status
	// apply updates the state (already a copy) for the record; nil: only
	// the status changes.
	apply func(s *State, r Record) error
	// event is the audit-log event of a record of the kind.
	event string
}

// holdable are the statuses a hold may be placed or lifted in: every
// status but invalid (a resolved event is held too: retention).
var holdable = []Status{StatusOpen, StatusRedriving, StatusPoison, StatusResolved}

// kinds is the lifecycle, one entry per Kind. Nothing but a hold's
// placing or lifting follows a resolved event.
var kinds = map[Kind]kindRule{
	KindQuarantined:      {nil, StatusOpen, nil, "DLQ_QUARANTINED"},
	KindCorrected:        {[]Status{StatusOpen, StatusPoison}, "", applyCorrected, "DLQ_CORRECTED"},
	KindRedriveRequested: {[]Status{StatusOpen}, StatusRedriving, nil, "DLQ_REDRIVE_REQUESTED"},
	KindReplayed:         {[]Status{StatusRedriving}, StatusResolved, nil, "DLQ_REDRIVE_OK"},
	KindSkippedDuplicate: {[]Status{StatusOpen, StatusRedriving}, StatusResolved, nil, "DLQ_SKIPPED_DUPLICATE"},
	KindReplayFailed:     {[]Status{StatusRedriving, StatusOpen}, StatusOpen, applyReplayFailed, "DLQ_REPLAY_FAILED"},
	KindPoisoned:         {[]Status{StatusRedriving, StatusOpen}, StatusPoison, applyPoisoned, "DLQ_POISON_ISOLATED"},
	KindReleased:         {[]Status{StatusPoison}, StatusOpen, applyReleased, "DLQ_RELEASED"},
	KindResolved:         {[]Status{StatusOpen, StatusRedriving, StatusPoison}, StatusResolved, applyResolved, "DLQ_RESOLVED"},
	KindDismissed:        {[]Status{StatusOpen, StatusPoison}, StatusResolved, applyResolved, "DLQ_DISMISSED"},
	KindApproved:         {[]Status{StatusOpen, StatusRedriving, StatusPoison}, "", applyApproved, "DLQ_APPROVED"},
	KindHoldPlaced:       {holdable, "", applyHoldPlaced, "DLQ_HOLD_PLACED"},
	KindHoldLifted:       {holdable, "", applyHoldLifted, "DLQ_HOLD_LIFTED"},
}

// UnknownKindEvent is the audit-log event of a record whose kind this
// version does not know.
const UnknownKindEvent = "DLQ_RECORD"

// Kinds returns every record kind, sorted.
func Kinds() []Kind { return slices.Sorted(maps.Keys(kinds)) }

// Known reports whether k is a kind of this version.
func (k Kind) Known() bool {
	_, ok := kinds[k]
	return ok
}

// Event returns the audit-log event of a record of kind k
// (UnknownKindEvent for a kind this version does not know).
func (k Kind) Event() string {
	if r, ok := kinds[k]; ok {
		return r.event
	}
	return UnknownKindEvent
}

// Resolves reports whether a record of kind k resolves its event (nothing
// follows it).
func (k Kind) Resolves() bool { return kinds[k].to == StatusResolved }

// StatusAfter returns the status of an event whose status was prev once a
// record of kind is applied, as Fold defines it for valid chains: the
// status the kind leaves, or prev for a kind that keeps it (a correction)
// or that this version does not know. It does not check that the kind is
// allowed after prev (Fold does).
func StatusAfter(prev Status, kind Kind) Status {
	if r, ok := kinds[kind]; ok && r.to != "" {
		return r.to
	}
	return prev
}

// Valid reports whether c is a class of this version.
func (c Class) Valid() bool {
	return c == ClassValidation || c == ClassExhausted || c == ClassPoison
}

// Unresolved reports whether an event in status s still needs attention
// (open, redriving or poison).
func (s Status) Unresolved() bool {
	return s == StatusOpen || s == StatusRedriving || s == StatusPoison
}
