package record

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Errors of Fold. Each is wrapped with the position of the offending record.
var (
	// ErrEmptyChain: Fold was given no record.
	ErrEmptyChain = errors.New("record: empty chain")
	// ErrBrokenLink: a record's index, prev_hash or dlq_id does not follow
	// the record before it.
	ErrBrokenLink = errors.New("record: broken chain link")
	// ErrInvalidTransition: the record's kind is not allowed in the
	// current status.
	ErrInvalidTransition = errors.New("record: invalid transition")
	// ErrUnknownKind: the record's kind is not a Kind* constant.
	ErrUnknownKind = errors.New("record: unknown record kind")
	// ErrInvalidClass: the record's class is not allowed for its kind.
	ErrInvalidClass = errors.New("record: invalid class")
	// ErrMissingPayload: a corrected record carries no payload.
	ErrMissingPayload = errors.New("record: corrected record without payload")
	// ErrMissingDecision: a resolved record lacks its actor or reason.
	ErrMissingDecision = errors.New("record: decision without actor or reason")
	// ErrMissingSignature: an approved record lacks its signature, or a
	// member of it, or names the requester as the approver.
	ErrMissingSignature = errors.New("record: approval without a complete signature")
	// ErrMissingHold: a hold record lacks its hold, a member of it, its
	// actor or reason, states another status than the event's, places a
	// hold already placed or lifts one not placed.
	ErrMissingHold = errors.New("record: hold record without a complete hold")
)

// State is the current state of one quarantined event, folded from its
// chain by Fold.
type State struct {
	// DLQID and Domain identify the event (record 0).
	DLQID  string `json:"dlq_id"`
	Domain string `json:"domain"`
	// Class is the current failure class: validation, exhausted or poison.
	Class Class `json:"class"`
	// Status is one of the Status* constants.
	Status Status `json:"status"`
	// ErrorCode and ErrorDetail describe the latest failure.
	ErrorCode   codes.Code `json:"error_code"`
	ErrorDetail string     `json:"error_detail"`
	// RedriveCount is how many replays have failed so far.
	RedriveCount int `json:"redrive_count"`
	// Records is the number of records folded.
	Records int `json:"records"`
	// FirstSeen is when the original event was stored; QuarantinedAt when
	// record 0 was written; LastChange when the last record was written.
	FirstSeen     time.Time `json:"first_seen"`
	QuarantinedAt time.Time `json:"quarantined_at"`
	LastChange    time.Time `json:"last_change"`
	// LastKind and LastHash are the kind and audit hash of the last record
	// (the PrevHash of the next one).
	LastKind Kind   `json:"last_kind"`
	LastHash string `json:"last_hash"`
	// IdempotencyKey, OrderingKey, PartyID and EventTime are the event's
	// identity, when its payload parsed.
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	OrderingKey    string     `json:"ordering_key,omitempty"`
	PartyID        string     `json:"party_id,omitempty"`
	EventTime      *time.Time `json:"event_time,omitempty"`
	// EventHashID is record 0's event_hash_id (the event's standard
	// content fingerprint), when it has one.
	EventHashID string `json:"event_hash_id,omitempty"`
	// Document is record 0's document provenance, when the event was read
	// from an EPCIS document.
	Document *envelope.Document `json:"document,omitempty"`
	// Publisher is the original event's publisher (record 0).
	Publisher string `json:"publisher,omitempty"`
	// Payload is the effective payload: the latest correction, else the
	// original. Corrected tells which. OriginalPayload is record 0's.
	Payload         *Payload `json:"payload,omitempty"`
	Corrected       bool     `json:"corrected"`
	OriginalPayload *Payload `json:"original_payload,omitempty"`
	// Headers are the original message's headers.
	Headers map[string][]string `json:"headers,omitempty"`
	// SourceSubject, SourceStream and SourceSeq locate the original.
	SourceSubject string `json:"source_subject"`
	SourceStream  string `json:"source_stream"`
	SourceSeq     uint64 `json:"source_seq"`
	// Attempts is every record's attempts, in chain order.
	Attempts []Attempt `json:"attempts,omitempty"`
	// TraceID and SpanID are the trace context of the original failure.
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
	// Resolution is the kind of the record that resolved the event
	// (replayed, skipped_duplicate or resolved); "" until resolved.
	Resolution Kind `json:"resolution,omitempty"`
	// Signatures are the electronic signatures of the approved records,
	// in chain order.
	Signatures []Signature `json:"signatures,omitempty"`
	// Holds are the legal holds placed and not lifted, in the order they
	// were placed.
	Holds []HoldRef `json:"holds,omitempty"`
}

// HoldRef is a legal hold that holds the event, as folded from its
// hold_placed record.
type HoldRef struct {
	HoldID   string    `json:"hold_id"`
	CaseID   string    `json:"case_id"`
	PlacedBy string    `json:"placed_by"`
	PlacedAt time.Time `json:"placed_at"`
	Reason   string    `json:"reason"`
}

// Held reports whether a legal hold holds the event.
func (s State) Held() bool { return len(s.Holds) > 0 }

// HeldBy reports whether the hold named holdID holds the event.
func (s State) HeldBy(holdID string) bool {
	return slices.ContainsFunc(s.Holds, func(h HoldRef) bool { return h.HoldID == holdID })
}

// Redrivable reports whether the event may be replayed now: it is open and
// its class is exhausted, or validation when includeValidation is set or
// its payload was corrected. Poison, redriving, resolved and invalid states
// never are.
func (s State) Redrivable(includeValidation bool) bool {
	if s.Status != StatusOpen {
		return false
	}
	switch s.Class {
	case ClassExhausted:
		return true
	case ClassValidation:
		return includeValidation || s.Corrected
	}
	return false
}

// Fold returns the current state of an event from its chain, records in
// order. It checks each record's links (index = position, prev_hash = the
// previous audit_hash, same dlq_id) and lifecycle transition, but not the
// seals: callers that read stored bytes verify them with VerifySeal (or
// Parse) first. On error the state is the fold up to the last valid record
// with Status StatusInvalid.
func Fold(chain []Record) (State, error) {
	if len(chain) == 0 {
		return State{Status: StatusInvalid}, ErrEmptyChain
	}
	s, err := start(chain[0])
	if err != nil {
		return State{DLQID: chain[0].DLQID, Status: StatusInvalid}, fmt.Errorf("record 0: %w", err)
	}
	for i, r := range chain[1:] {
		next, err := s.apply(r)
		if err != nil {
			s.Status = StatusInvalid
			return s, fmt.Errorf("record %d (%s): %w", i+1, truncate(string(r.Kind), 32), err)
		}
		s = next
	}
	return s, nil
}

// start folds the first record of a chain.
func start(r Record) (State, error) {
	switch {
	case r.Kind != KindQuarantined:
		return State{}, fmt.Errorf("%w: first record is %.32q, not quarantined", ErrInvalidTransition, string(r.Kind))
	case r.Index != 0 || r.PrevHash != "":
		return State{}, fmt.Errorf("%w: first record has index %d and prev_hash %.64q", ErrBrokenLink, r.Index, r.PrevHash)
	case r.Class != ClassValidation && r.Class != ClassExhausted:
		return State{}, fmt.Errorf("%w: quarantined with class %.32q", ErrInvalidClass, string(r.Class))
	}
	s := State{
		DLQID: r.DLQID, Domain: r.Domain, Class: r.Class, Status: StatusOpen,
		ErrorCode: r.ErrorCode, ErrorDetail: r.ErrorDetail, RedriveCount: r.RedriveCount,
		FirstSeen: r.FirstSeen, QuarantinedAt: r.QuarantinedAt,
		IdempotencyKey: r.IdempotencyKey, OrderingKey: r.OrderingKey, PartyID: r.PartyID, Publisher: r.Publisher,
		EventTime: clonePtr(r.EventTime), EventHashID: r.EventHashID, Document: clonePtr(r.Document), Payload: clonePtr(r.Payload), OriginalPayload: clonePtr(r.Payload),
		Headers:       cloneHeaders(r.Headers),
		SourceSubject: r.SourceSubject, SourceStream: r.SourceStream, SourceSeq: r.SourceSeq,
		TraceID: r.TraceID, SpanID: r.SpanID,
	}
	s.record(r)
	return s, nil
}

// record accounts for r having been folded.
func (s *State) record(r Record) {
	s.Records++
	s.LastChange, s.LastKind, s.LastHash = r.QuarantinedAt, r.Kind, r.AuditHash
	if len(r.Attempts) > 0 {
		s.Attempts = append(slices.Clip(s.Attempts), r.Attempts...)
	}
}

// Next folds r, the record that follows the chain s was folded from, into
// a copy of s: Fold(append(chain, r)) without folding chain again. It
// checks r's links (index, prev_hash, dlq_id) and lifecycle transition;
// on error s is returned unchanged.
func (s State) Next(r Record) (State, error) {
	if s.Records == 0 {
		return Fold([]Record{r})
	}
	return s.apply(r)
}

// apply folds the next record r into a copy of s.
func (s State) apply(r Record) (State, error) {
	if err := s.checkLink(r); err != nil {
		return s, err
	}
	t, ok := kinds[r.Kind]
	if !ok {
		return s, fmt.Errorf("%w: %.32q", ErrUnknownKind, string(r.Kind))
	}
	if !slices.Contains(t.from, s.Status) {
		return s, fmt.Errorf("%w: %s when %s", ErrInvalidTransition, r.Kind, s.Status)
	}
	next := s
	if t.apply != nil {
		if err := t.apply(&next, r); err != nil {
			return s, err
		}
	}
	next.Status = StatusAfter(s.Status, r.Kind)
	if next.Status == StatusResolved {
		next.Resolution = r.Kind
	}
	next.record(r)
	return next, nil
}

// checkLink requires r to follow the last folded record.
func (s State) checkLink(r Record) error {
	switch {
	case r.Index != s.Records:
		return fmt.Errorf("%w: index %d at position %d", ErrBrokenLink, r.Index, s.Records)
	case r.PrevHash != s.LastHash:
		return fmt.Errorf("%w: prev_hash %.64q, previous audit_hash %.64q", ErrBrokenLink, r.PrevHash, s.LastHash)
	case r.DLQID != s.DLQID:
		return fmt.Errorf("%w: dlq_id %.200q in chain %.200q", ErrBrokenLink, r.DLQID, s.DLQID)
	}
	return nil
}

// applyCorrected makes r's payload the effective one. The class stays
// unless r states another: validation or exhausted while open, poison
// while poison.
func applyCorrected(s *State, r Record) error {
	if r.Payload == nil {
		return ErrMissingPayload
	}
	if r.Class != "" && r.Class != s.Class {
		if err := checkClass(r.Class, s.Status == StatusPoison); err != nil {
			return err
		}
		s.Class = r.Class
	}
	s.Payload, s.Corrected = clonePtr(r.Payload), true
	return nil
}

// applyReplayFailed reopens the event with the replay's failure.
func applyReplayFailed(s *State, r Record) error {
	if r.Class != "" {
		if err := checkClass(r.Class, false); err != nil {
			return err
		}
		s.Class = r.Class
	}
	s.failure(r)
	return nil
}

// applyPoisoned isolates the event with the replay's failure.
func applyPoisoned(s *State, r Record) error {
	s.Class = ClassPoison
	s.failure(r)
	return nil
}

// failure takes the redrive count and, when stated, the error of r.
func (s *State) failure(r Record) {
	s.RedriveCount = r.RedriveCount
	if r.ErrorCode != "" {
		s.ErrorCode, s.ErrorDetail = r.ErrorCode, r.ErrorDetail
	}
}

// applyReleased reopens a poison event with the class r restores.
func applyReleased(s *State, r Record) error {
	if err := checkClass(r.Class, false); err != nil {
		return err
	}
	s.Class = r.Class
	return nil
}

// applyResolved closes the event by a person's decision.
func applyResolved(s *State, r Record) error {
	if r.Actor == "" || r.Reason == "" {
		return ErrMissingDecision
	}
	return nil
}

// applyApproved records the signature of a two-person approval.
func applyApproved(s *State, r Record) error {
	g := r.Signature
	if g == nil || g.ApprovalID == "" || g.Action == "" || g.Requester == "" || g.Approver == "" ||
		g.ApproverRole == "" || g.Meaning == "" || g.RequestedAt.IsZero() || g.SignedAt.IsZero() {
		return ErrMissingSignature
	}
	if g.Approver == g.Requester || (g.ApproverPerson != "" && g.ApproverPerson == g.RequesterPerson) {
		// One person, whichever of their role logins asked or signed.
		return fmt.Errorf("%w: the approver is the requester", ErrMissingSignature)
	}
	if !personIs(g.RequesterPerson, g.Requester) || !personIs(g.ApproverPerson, g.Approver) {
		return fmt.Errorf("%w: a person named is not the user's", ErrMissingSignature)
	}
	s.Signatures = append(slices.Clip(s.Signatures), *g)
	return nil
}

// personIs reports whether person (empty on records written before
// persons were named) is user's: the user itself or one of its role
// logins, "<person>+<role>" (access.RoleLogin; record cannot import
// access, which gives the exact rule, access.PersonOf).
func personIs(person, user string) bool {
	return person == "" || user == person || strings.HasPrefix(user, person+"+")
}

// checkHold requires r's hold to be complete, with its actor and reason,
// and to state the status s has.
func checkHold(s *State, r Record) error {
	h := r.Hold
	switch {
	case h == nil || h.HoldID == "" || h.CaseID == "" || h.At.IsZero() || r.Actor == "" || r.Reason == "":
		return ErrMissingHold
	case h.Status != s.Status:
		return fmt.Errorf("%w: it states status %.32q, the event is %s", ErrMissingHold, string(h.Status), s.Status)
	}
	return nil
}

// applyHoldPlaced adds r's hold to the event's holds.
func applyHoldPlaced(s *State, r Record) error {
	if err := checkHold(s, r); err != nil {
		return err
	}
	if s.HeldBy(r.Hold.HoldID) {
		return fmt.Errorf("%w: hold %.64q is already placed", ErrMissingHold, r.Hold.HoldID)
	}
	s.Holds = append(slices.Clip(s.Holds), HoldRef{HoldID: r.Hold.HoldID, CaseID: r.Hold.CaseID,
		PlacedBy: r.Actor, PlacedAt: r.Hold.At, Reason: r.Reason})
	return nil
}

// applyHoldLifted removes r's hold from the event's holds.
func applyHoldLifted(s *State, r Record) error {
	if err := checkHold(s, r); err != nil {
		return err
	}
	if !s.HeldBy(r.Hold.HoldID) {
		return fmt.Errorf("%w: hold %.64q is not placed", ErrMissingHold, r.Hold.HoldID)
	}
	s.Holds = slices.DeleteFunc(slices.Clone(s.Holds), func(h HoldRef) bool { return h.HoldID == r.Hold.HoldID })
	return nil
}

// checkClass requires class to be poison when poison is set, else
// validation or exhausted.
func checkClass(class Class, poison bool) error {
	ok := class == ClassValidation || class == ClassExhausted
	if poison {
		ok = class == ClassPoison
	}
	if !ok {
		return fmt.Errorf("%w: %.32q", ErrInvalidClass, string(class))
	}
	return nil
}

// clonePtr returns a pointer to a copy of *p (nil stays nil).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
