package api

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/domain"
)

// Endpoint subjects of legal holds (served by the auditor, package hold).
const (
	HoldPlace = "hold.place"
	HoldLift  = "hold.lift"
	HoldList  = "hold.list"
	HoldGet   = "hold.get"
	// HoldLiftApproved executes a signed hold_lift approval: the
	// redriver's request (it executes approvals), within the services'
	// account; no person's account imports it.
	HoldLiftApproved = "hold.lift.approved"
)

// Error codes of legal holds, beside the shared ones (ErrBadRequest,
// ErrNotFound, ErrConflict, ...).
const (
	// ErrHeld: the event is under a legal hold; it may not be drained,
	// redriven, released or resolved until every hold on it is lifted.
	ErrHeld = "HELD"
	// ErrNotPlaced: the hold to lift is not placed (lifted already).
	ErrNotPlaced = "NOT_PLACED"
	// ErrHoldRateLimited: the person placed more holds than the auditor's
	// rate allows (HoldPlacePerMinute, HoldPlaceBurst); retry later.
	ErrHoldRateLimited = "HOLD_RATE_LIMITED"
	// ErrHoldMatchesNothing: a party or filter hold matches no stored
	// event (a misspelt party?); placed only with confirm (it then holds
	// the matching events quarantined later).
	ErrHoldMatchesNothing = "HOLD_MATCHES_NOTHING"
)

// MaxListedHoldIDs bounds the dlq ids hold.list shows per hold (Count
// says how many it holds; hold.get lists them all).
const MaxListedHoldIDs = 20

// Hold statuses.
const (
	// HoldActive: placed and not lifted; it holds what its target names.
	HoldActive = "active"
	// HoldLifted: lifted; it holds nothing any more.
	HoldLifted = "lifted"
)

// HoldFilter selects the events a filter hold holds: every member set
// must match (the latest failure's error code for ErrorCodes, the
// original's first_seen for Since <= first_seen < Until, the identifiers
// as a records search matches them: ListRequest's identifier filters,
// read from the event's keys, its first record and its verbatim payload).
// At least one member is set.
type HoldFilter struct {
	Domain     string     `json:"domain,omitempty"`
	PartyID    string     `json:"party_id,omitempty"`
	ErrorCodes []string   `json:"error_codes,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
	// Identifier filters, as ListRequest's (NDC in any FDA layout, a
	// pharmacy or DSCSA lot or an FSMA TLC, a GTIN or an SGTIN, an SSCC,
	// ...; Identifiers by search field name, name=value).
	NDC         string            `json:"ndc,omitempty"`
	Lot         string            `json:"lot,omitempty"`
	GTIN        string            `json:"gtin,omitempty"`
	Serial      string            `json:"serial,omitempty"`
	SSCC        string            `json:"sscc,omitempty"`
	TLC         string            `json:"tlc,omitempty"`
	Identifiers map[string]string `json:"identifiers,omitempty"`
}

// Search is the records search of the filter's domain, party and
// identifiers (its identifier filters as ListRequest.IdentifierFilters
// reads them).
func (f HoldFilter) Search() ListRequest {
	return ListRequest{Domain: f.Domain, Supplier: f.PartyID, NDC: f.NDC, Lot: f.Lot, GTIN: f.GTIN, Serial: f.Serial,
		SSCC: f.SSCC, TLC: f.TLC, Identifiers: f.Identifiers}
}

// HasIdentifiers reports whether the filter names an identifier.
func (f HoldFilter) HasIdentifiers() bool { return f.Search().HasIdentifiers() }

// HoldTarget is what a hold holds: exactly one of one event (DLQID),
// a set of events (DLQIDs: the console's "hold the selected", one hold
// for all of them, placed for all or for none), a party's events
// (PartyID) or the events a filter selects (Filter). A party or filter
// hold is dynamic: it also holds the events quarantined after it was
// placed that match it.
type HoldTarget struct {
	DLQID   string      `json:"dlq_id,omitempty"`
	DLQIDs  []string    `json:"dlq_ids,omitempty"`
	PartyID string      `json:"party_id,omitempty"`
	Filter  *HoldFilter `json:"filter,omitempty"`
}

// MaxHoldDLQIDs bounds the events of one hold's DLQIDs (a filter holds
// any number).
const MaxHoldDLQIDs = 1000

// Hold is a legal hold as stored (bucket HOLDS) and shown (hold.get,
// hold.list).
type Hold struct {
	// ID names the hold (a token safe in a subject and a key).
	ID string `json:"id"`
	// CaseID is the legal matter; Reason why the hold is placed.
	CaseID string `json:"case_id"`
	Reason string `json:"reason"`
	// Target is what it holds.
	Target HoldTarget `json:"target"`
	// Status is HoldActive or HoldLifted.
	Status string `json:"status"`
	// PlacedBy, PlacedByRole and PlacedAt: who placed it (the
	// authenticated caller) and when.
	PlacedBy     string    `json:"placed_by"`
	PlacedByRole string    `json:"placed_by_role,omitempty"`
	PlacedAt     time.Time `json:"placed_at"`
	// LiftedBy, LiftedByRole, LiftedAt and LiftReason: who lifted it,
	// when and why.
	LiftedBy     string     `json:"lifted_by,omitempty"`
	LiftedByRole string     `json:"lifted_by_role,omitempty"`
	LiftedAt     *time.Time `json:"lifted_at,omitempty"`
	LiftReason   string     `json:"lift_reason,omitempty"`
	// LiftSigned is the lifter's signed decision to lift (issue #38).
	LiftSigned *SignedDecision `json:"lift_signed,omitempty"`
	// LiftApprovalID and LiftApprovedBy: the two-person approval the lift
	// executed and its signer, when the policy required one
	// (ActionHoldLift; the signature is in AUDIT).
	LiftApprovalID string `json:"lift_approval_id,omitempty"`
	LiftApprovedBy string `json:"lift_approved_by,omitempty"`
	// Revision is the entry's revision in HOLDS (the compare-and-set of a
	// lift; for information).
	Revision uint64 `json:"revision,omitempty"`
}

// LogValue logs the hold's id, case and status; never its target's party
// or filter values.
func (h Hold) LogValue() slog.Value {
	return slog.GroupValue(slog.String("hold_id", h.ID), slog.String("case_id", h.CaseID), slog.String("status", h.Status))
}

// HoldPlaceRequest places a legal hold (hold.place). The caller placing
// it is the authenticated one, never a member of the request.
type HoldPlaceRequest struct {
	// CaseID and Reason are required.
	CaseID string     `json:"case_id"`
	Reason string     `json:"reason"`
	Target HoldTarget `json:"target"`
	// Confirm places a party or filter hold that matches no stored event
	// (refused without it: ErrHoldMatchesNothing).
	Confirm bool `json:"confirm,omitempty"`
}

// HoldLiftRequest lifts a legal hold (hold.lift).
type HoldLiftRequest struct {
	ID string `json:"id"`
	// CaseID must be the hold's (a check that the right hold is lifted);
	// Reason is required.
	CaseID string `json:"case_id"`
	Reason string `json:"reason"`
	// Signed is the decision signed by its person (issue #38).
	Signed *SignedDecision `json:"signed,omitempty"`
}

// HoldLiftApprovedRequest executes a signed hold_lift approval
// (HoldLiftApproved): the hold, case and reason are the approval's
// request, lifted as its requester.
type HoldLiftApprovedRequest struct {
	ApprovalID string `json:"approval_id"`
}

// Validate requires an approval id.
func (r HoldLiftApprovedRequest) Validate() error {
	if !ValidHoldID(r.ApprovalID) {
		return BadField("approval_id", "is not an approval id")
	}
	return nil
}

// HoldGetRequest names a hold (hold.get).
type HoldGetRequest struct {
	ID string `json:"id"`
}

// HoldListRequest lists the holds (hold.list).
type HoldListRequest struct {
	// IncludeLifted lists the lifted holds too (active ones only by
	// default).
	IncludeLifted bool `json:"include_lifted,omitempty"`
}

// HeldHold is a hold with the events it holds now.
type HeldHold struct {
	Hold Hold `json:"hold"`
	// DLQIDs are the events whose chain carries the hold (placed, not
	// lifted), sorted; hold.list shows at most MaxListedHoldIDs of them
	// (Truncated then says so).
	DLQIDs []string `json:"dlq_ids"`
	// Pending are events that match the hold and whose hold record is not
	// written yet (it is being appended); at most MaxListedHoldIDs in
	// hold.list.
	Pending []string `json:"pending,omitempty"`
	// Count and PendingCount are how many events carry the hold, and how
	// many are pending.
	Count        int  `json:"count"`
	PendingCount int  `json:"pending_count"`
	Truncated    bool `json:"truncated,omitempty"`
}

// HoldReply is a hold and the events it holds (hold.place, hold.lift,
// hold.get). A place or lift that could not append the record to every
// chain it should says which in Failed (the auditor retries them).
type HoldReply struct {
	HeldHold
	Failed []string `json:"failed,omitempty"`
}

// HoldListReply is hold.list's answer, newest first.
type HoldListReply struct {
	Holds []HeldHold `json:"holds"`
}

// MaxCaseID bounds a hold's case id.
const MaxCaseID = 256

// ValidHoldID reports whether id could name a hold (a key of HOLDS and a
// subject token).
func ValidHoldID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// requireText requires a person's free text field (case id, reason):
// present, at most max bytes, no control character.
func requireText(field, v string, max int) error {
	switch {
	case strings.TrimSpace(v) == "":
		return BadField(field, "is required")
	case len(v) > max:
		return BadField(field, "is at most %d bytes", max)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return BadField(field, "must not hold control characters")
	}
	return nil
}

// Validate checks that exactly one target is set, and its members.
func (t HoldTarget) Validate() error {
	n := 0
	for _, set := range []bool{t.DLQID != "", t.DLQIDs != nil, t.PartyID != "", t.Filter != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return BadField("target", "exactly one of dlq_id, dlq_ids, party_id and filter is required")
	}
	switch {
	case t.DLQID != "" && !validDLQID(t.DLQID):
		return BadField("target.dlq_id", "is not a dlq id")
	case t.DLQIDs != nil:
		return validDLQIDs(t.DLQIDs)
	case t.PartyID != "":
		return requireText("target.party_id", t.PartyID, MaxActor)
	case t.Filter != nil:
		return t.Filter.Validate()
	}
	return nil
}

// validDLQIDs checks a hold's set of events: 1..MaxHoldDLQIDs dlq ids,
// none twice.
func validDLQIDs(ids []string) error {
	if len(ids) == 0 || len(ids) > MaxHoldDLQIDs {
		return BadField("target.dlq_ids", "holds 1..%d dlq ids", MaxHoldDLQIDs)
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !validDLQID(id) {
			return BadField("target.dlq_ids", "holds something that is not a dlq id")
		}
		if seen[id] {
			return BadField("target.dlq_ids", "names an event twice")
		}
		seen[id] = true
	}
	return nil
}

// validDLQID reports whether id has the form of a dlq id
// ("<domain>_<token>", a subject token).
func validDLQID(id string) bool {
	_, _, ok := domain.SplitID(id)
	return ok && len(id) <= 200 && ValidHoldID(id)
}

// Validate checks a hold filter: at least one member, known domain and
// codes, an ordered time range.
func (f HoldFilter) Validate() error {
	if f.Domain == "" && f.PartyID == "" && len(f.ErrorCodes) == 0 && f.Since == nil && f.Until == nil && !f.HasIdentifiers() {
		return BadField("target.filter", "sets no member (hold everything with a filter of a domain per domain)")
	}
	if err := checkDomain("target.filter.domain", f.Domain); err != nil {
		return err
	}
	if f.PartyID != "" {
		if err := requireText("target.filter.party_id", f.PartyID, MaxActor); err != nil {
			return err
		}
	}
	if len(f.ErrorCodes) > MaxFilterCodes {
		return BadField("target.filter.error_codes", "at most %d error codes", MaxFilterCodes)
	}
	for _, c := range f.ErrorCodes {
		if err := checkCode("target.filter.error_codes", c); err != nil {
			return err
		}
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		return BadField("target.filter.until", "must be after target.filter.since")
	}
	return checkIdentifiers("target.filter", f.Search().IdentifierFilters())
}

// MaxIdentifier bounds one identifier filter's value.
const MaxIdentifier = 1024

// checkIdentifiers checks identifier filters' shape (the auditor reads
// their values as the domains do): a field name of at most 64 bytes and
// a value of at most MaxIdentifier, neither with control characters.
func checkIdentifiers(prefix string, ids map[string]string) error {
	field := func(name string) string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	for _, name := range slices.Sorted(maps.Keys(ids)) { // the first bad field, always the same
		v := ids[name]
		if name == "" || len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool { return r <= 0x20 || r == 0x7f }) {
			return BadField(field("identifiers"), "names a field that is not a search field name")
		}
		if len(v) > MaxIdentifier || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return BadField(field(name), "is at most %d bytes without control characters", MaxIdentifier)
		}
	}
	return nil
}

// Validate requires a case id, a reason and a valid target.
func (r HoldPlaceRequest) Validate() error {
	if err := requireText("case_id", r.CaseID, MaxCaseID); err != nil {
		return err
	}
	if err := requireText("reason", r.Reason, MaxReason); err != nil {
		return err
	}
	return r.Target.Validate()
}

// Validate requires a hold id, its case id and a reason.
func (r HoldLiftRequest) Validate() error {
	if !ValidHoldID(r.ID) {
		return BadField("id", "is not a hold id")
	}
	if err := requireText("case_id", r.CaseID, MaxCaseID); err != nil {
		return err
	}
	return requireText("reason", r.Reason, MaxReason)
}

// Validate requires a hold id.
func (r HoldGetRequest) Validate() error {
	if !ValidHoldID(r.ID) {
		return BadField("id", "is not a hold id")
	}
	return nil
}
