package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Error codes of the redriver's replies, beside the shared ones above
// (ErrBadRequest, ErrNotFound, ErrInvalidTransition, ErrConflict,
// ErrUnavailable).
const (
	// ErrNotRedrivable: the event's state or class does not allow a replay
	// (resolved, validation without a correction or include_validation,
	// an unreadable chain).
	ErrNotRedrivable = "NOT_REDRIVABLE"
	// ErrPoisoned: the event is poison; a person must release it first.
	ErrPoisoned = "POISONED"
	// ErrTooManyDrains: the instance already runs its maximum of drains.
	ErrTooManyDrains = "TOO_MANY_DRAINS"
	// ErrDrainOverlap: another unfinished drain (selecting, running or
	// paused) selects some of the records the new drain would select; the
	// message names it and the overlap count (Error.Overlaps lists them).
	// Cancel or finish that drain, or narrow the filter.
	ErrDrainOverlap = "DRAIN_OVERLAP"
)

// Drain statuses.
const (
	// DrainSelecting: the drain is streaming its selection.
	DrainSelecting = "selecting"
	// DrainRunning: the drain is replaying.
	DrainRunning = "running"
	// DrainCompleted: every selected event has an outcome (or is held).
	DrainCompleted = "completed"
	// DrainCancelled: drain.cancel stopped it.
	DrainCancelled = "cancelled"
	// DrainFailed: the drain stopped on an error (see DrainState.Error).
	DrainFailed = "failed"
	// DrainPaused: the drain's canary or its failure window stopped it
	// (see DrainState.Events); drain.resume continues it, drain.cancel
	// ends it. A paused drain stays paused across redriver restarts.
	DrainPaused = "paused"
)

// Reasons of a drain's pause (DrainEvent.Reason of an automatic pause, and
// the reason label of deadletter_redriver_drain_pauses_total).
const (
	// PauseCanary: the canary's re-failure rate was above
	// max_failure_rate.
	PauseCanary = "canary"
	// PauseFailureRate: the re-failure rate over the sliding window
	// crossed max_failure_rate while the drain ran.
	PauseFailureRate = "failure_rate"
)

// Actions of a drain's events (DrainEvent.Action, api.AuditAction.Action).
const (
	ActionPaused    = "paused"
	ActionResumed   = "resumed"
	ActionCancelled = "cancelled"
)

// Defaults and bounds of a drain's failure guard (DrainStartRequest).
const (
	// DefaultMaxFailureRate is max_failure_rate when it is absent and the
	// drain has a canary or a pause_window.
	DefaultMaxFailureRate = 0.1
	// DefaultPauseWindow is pause_window when it is absent and the guard
	// is on.
	DefaultPauseWindow = 100
	// MaxPauseWindow bounds pause_window.
	MaxPauseWindow = 100000
	// MinWindowOutcomes is how many outcomes the window needs before it
	// can trip (fewer when the window is smaller): one early failure does
	// not pause a drain, and a drain whose replays all fail pauses at its
	// MinWindowOutcomes-th outcome.
	MinWindowOutcomes = 10
	// MaxCanary bounds canary.
	MaxCanary = 10000
	// MaxRampSteps bounds ramp.
	MaxRampSteps = 20
	// DefaultCanary is the canary of a drain whose request names no guard
	// control (no canary, max_failure_rate or pause_window) and does not
	// turn the guard off (no_guard): the default guard is this canary and
	// DefaultMaxFailureRate over DefaultPauseWindow outcomes.
	DefaultCanary = 10
)

// Outcomes of a finished drain (DrainState.Outcome): what a completed
// drain achieved, so that one that committed nothing never reads as a
// plain success.
const (
	// DrainOutcomeAllResolved: every selected event was committed or
	// found already committed.
	DrainOutcomeAllResolved = "completed_all_resolved"
	// DrainOutcomePartial: some events were committed, others are held,
	// failed, pending or skipped (DrainState.OutcomeReason says which).
	DrainOutcomePartial = "completed_partial"
	// DrainOutcomeNothingCommitted: nothing was committed (nor found
	// committed); OutcomeReason says why (nothing selected, held, failed,
	// skipped).
	DrainOutcomeNothingCommitted = "completed_nothing_committed"
)

// Outcomes of one replay (RedriveReply.Outcome, and the counters of a
// drain).
const (
	// OutcomeReplayed: the replay was committed; the chain got replayed.
	OutcomeReplayed = "replayed"
	// OutcomeSkippedDuplicate: the key was already committed; resolved
	// without a (further) replay.
	OutcomeSkippedDuplicate = "skipped_duplicate"
	// OutcomeReplayFailed: the replay failed again; the quarantiner
	// appended replay_failed.
	OutcomeReplayFailed = "replay_failed"
	// OutcomePoisoned: the replay failed at the redrive cap.
	OutcomePoisoned = "poisoned"
	// OutcomePending: no outcome was observed in time; the event stays
	// redriving and a later drain or redrive resumes it.
	OutcomePending = "pending"
	// OutcomeResolvedElsewhere: another drain or redrive resolved it.
	OutcomeResolvedElsewhere = "resolved_elsewhere"
	// OutcomeNotRedrivable: its state no longer allowed a replay when
	// its turn came.
	OutcomeNotRedrivable = "not_redrivable"
)

// DrainFilter selects quarantined events. Every set member must match.
type DrainFilter struct {
	// Domain restricts to one registered domain (package registry).
	Domain string `json:"domain,omitempty"`
	// Classes restricts the failure classes: "exhausted" (the default)
	// and/or "validation" (which also needs a correction or
	// IncludeValidation). Poison events are never drained.
	Classes []string `json:"classes,omitempty"`
	// ErrorCodes restricts to the events whose latest failure has one of
	// these codes.
	ErrorCodes []string `json:"error_codes,omitempty"`
	// Since and Until bound when the original event was first stored
	// (first_seen): Since <= first_seen < Until.
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// PartyID restricts to one supplier or registrant.
	PartyID string `json:"party_id,omitempty"`
	// DLQIDs restricts to these chains (at most 10,000).
	DLQIDs []string `json:"dlq_ids,omitempty"`
	// Limit caps how many events are selected (0: no cap).
	Limit int `json:"limit,omitempty"`
	// IncludeValidation replays validation-class events without a
	// correction (e.g. after a schema fix).
	IncludeValidation bool `json:"include_validation,omitempty"`
}

// DrainStartRequest starts a drain (drain.start).
type DrainStartRequest struct {
	// Filter selects the events.
	Filter DrainFilter `json:"filter"`
	// RatePerSecond caps replays per second (token bucket). Absent: the
	// service's default; 0: no ceiling; negative: refused.
	RatePerSecond *float64 `json:"rate_per_second,omitempty"`
	// Burst is the token bucket's burst (default 1).
	Burst int `json:"burst,omitempty"`
	// MaxConcurrency caps replays in flight (default: the service's).
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// DryRun returns the plan and writes or publishes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Actor is ignored (kept for compatibility): a drain is recorded under
	// the authenticated caller (DrainState.StartedBy), whose name the
	// stored request carries instead. Only a redriver that allows
	// anonymous requests (tests, development without accounts) uses it as
	// the caller's name. Reason is recorded with the drain.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// IgnoreOrder replays the selected events even when an earlier,
	// unresolved event of their ordering key is not selected (by default
	// such an event holds them: HeldByEarlier). Each replay's
	// redrive_requested record says ignore_order, so the chain shows that
	// per-key order was waived and by whom.
	IgnoreOrder bool `json:"ignore_order,omitempty"`

	// Canary, when above zero, replays that many events first, waits for
	// their outcomes and continues only if their re-failure rate is at
	// most MaxFailureRate; otherwise the drain pauses (reason "canary",
	// with the failing codes). The canary takes only heads of their keys
	// (no earlier unresolved event in their key), round-robin over the
	// error codes, then keys; the later events of a canary's key wait for
	// its outcome, so per-key order holds. At most MaxCanary; a dry run's
	// plan lists the picks (DrainPlan.Canary). A resumed drain does not
	// run its canary again.
	Canary int `json:"canary,omitempty"`
	// MaxFailureRate is the re-failure rate (replay_failed, poisoned and
	// pending, i.e. a downstream 429/5xx or a timeout, over the outcomes
	// that replayed or resolved as duplicates) above which the canary
	// stops the drain and the running drain pauses itself, in [0, 1].
	// Setting it, a Canary or a PauseWindow turns the failure guard on;
	// absent with a guard, it is DefaultMaxFailureRate (0.1). A drain
	// with none of the three has no guard (it never pauses itself).
	MaxFailureRate *float64 `json:"max_failure_rate,omitempty"`
	// PauseWindow is the number of latest outcomes the running drain's
	// re-failure rate is taken over (a sliding window; default
	// DefaultPauseWindow, 100, when the guard is on). The window trips
	// once it holds MinWindowOutcomes outcomes (10, or the window when
	// smaller): the drain pauses at the outcome whose rate crosses
	// MaxFailureRate, and only the replays then in flight (at most
	// max_concurrency) still get outcomes. A resumed drain starts with an
	// empty window.
	PauseWindow int `json:"pause_window,omitempty"`
	// Ramp raises the replay rate in steps (replays per second, each
	// above zero and ascending, at most MaxRampSteps), each held for
	// RampHoldSeconds, then RatePerSecond (or no ceiling) for the rest of
	// the drain. A resumed drain ramps again from the first step.
	Ramp []float64 `json:"ramp,omitempty"`
	// RampHoldSeconds is how long each ramp step holds (required with
	// Ramp, at most 3600).
	RampHoldSeconds float64 `json:"ramp_hold_seconds,omitempty"`
	// NoGuard turns the failure guard off: no canary, no max failure
	// rate (the drain never pauses itself). Without it, a request that
	// names none of Canary, MaxFailureRate and PauseWindow gets the
	// default guard (WithDefaultGuard); with it, naming one is refused.
	NoGuard bool `json:"no_guard,omitempty"`
}

// WithDefaultGuard returns r with the default failure guard filled in
// (Canary DefaultCanary, MaxFailureRate DefaultMaxFailureRate) when it
// names no guard control and does not turn the guard off; otherwise r
// unchanged. The redriver stores the request so, which makes the guard in
// force explicit in the drain's status and in a dry run's plan.
func (r DrainStartRequest) WithDefaultGuard() DrainStartRequest {
	if r.NoGuard || r.Canary > 0 || r.PauseWindow > 0 || r.MaxFailureRate != nil {
		return r
	}
	rate := DefaultMaxFailureRate
	r.Canary, r.MaxFailureRate = DefaultCanary, &rate
	return r
}

// Guard returns the failure guard a drain of r runs with (after
// WithDefaultGuard), as a plan shows it.
func (r DrainStartRequest) Guard() DrainGuard {
	on, maxRate, window := r.WithDefaultGuard().Guarded()
	if !on {
		return DrainGuard{Off: true}
	}
	g := r.WithDefaultGuard()
	return DrainGuard{Canary: g.Canary, MaxFailureRate: maxRate, PauseWindow: window,
		Default: !r.NoGuard && r.Canary == 0 && r.PauseWindow == 0 && r.MaxFailureRate == nil}
}

// DrainGuard is the failure guard in force for a drain (DrainPlan.Guard).
type DrainGuard struct {
	// Off: the request turned the guard off (no_guard): the drain never
	// pauses itself.
	Off bool `json:"off,omitempty"`
	// Default: the request named no guard control, so the default guard
	// applies.
	Default bool `json:"default,omitempty"`
	// Canary is how many events are replayed first (0: none).
	Canary int `json:"canary"`
	// MaxFailureRate is the re-failure rate above which the canary stops
	// the drain and the running drain pauses; PauseWindow the outcomes it
	// is taken over.
	MaxFailureRate float64 `json:"max_failure_rate"`
	PauseWindow    int     `json:"pause_window"`
}

// Guarded reports whether the drain has a failure guard (canary or
// window), and its max failure rate and window, as the request stands
// (the redriver stores a request with its default guard filled in, see
// WithDefaultGuard).
func (r DrainStartRequest) Guarded() (on bool, maxRate float64, window int) {
	on = !r.NoGuard && (r.Canary > 0 || r.PauseWindow > 0 || r.MaxFailureRate != nil)
	if !on {
		return false, 0, 0
	}
	maxRate, window = DefaultMaxFailureRate, DefaultPauseWindow
	if r.MaxFailureRate != nil {
		maxRate = *r.MaxFailureRate
	}
	if r.PauseWindow > 0 {
		window = r.PauseWindow
	}
	return true, maxRate, window
}

// DrainEvent is a pause, resume or cancellation of a drain, as listed in
// its DrainState and written to AUDIT (api.AuditAction, object "drain").
type DrainEvent struct {
	// Action is ActionPaused, ActionResumed or ActionCancelled.
	Action string `json:"action"`
	// Actor is the authenticated user, or "redriver" for an automatic
	// pause.
	Actor string    `json:"actor"`
	Role  string    `json:"role,omitempty"`
	At    time.Time `json:"at"`
	// Reason is PauseCanary or PauseFailureRate for an automatic pause,
	// else the person's stated reason.
	Reason string `json:"reason,omitempty"`
	// Codes are the error codes of the failures that paused it, with how
	// many times each came.
	Codes map[string]int `json:"codes,omitempty"`
	// Window are the figures the pause was decided on.
	Window *WindowFigures `json:"window,omitempty"`
	// Unrecorded says the event is not in AUDIT yet: the drain's state is
	// its outbox, and the redriver writes it to AUDIT (once) as soon as
	// AUDIT takes it, after a restart too.
	Unrecorded bool `json:"unrecorded,omitempty"`
}

// WindowFigures are the outcomes a pause was decided on: the canary's, or
// the sliding window's.
type WindowFigures struct {
	Outcomes int     `json:"outcomes"`
	Failures int     `json:"failures"`
	Rate     float64 `json:"rate"`
	MaxRate  float64 `json:"max_rate"`
	Size     int     `json:"size"`
}

// DrainResumeRequest continues a paused drain (drain.resume).
type DrainResumeRequest struct {
	DrainID string `json:"drain_id"`
	// Reason is recorded with the resume (DrainEvent, AUDIT).
	Reason string `json:"reason,omitempty"`
}

// CanaryPick is one event a drain's canary would replay (DrainPlan.Canary).
type CanaryPick struct {
	DLQID string `json:"dlq_id"`
	// Code is the error code of its latest failure.
	Code string `json:"code"`
}

// DrainStartReply is the new drain's id, or a dry run's plan.
type DrainStartReply struct {
	DrainID string     `json:"drain_id,omitempty"`
	Status  string     `json:"status"`
	Plan    *DrainPlan `json:"plan,omitempty"`
}

// DrainPlan is what a drain would do (dry_run).
type DrainPlan struct {
	// Selected is how many events would be replayed (or resolved as
	// duplicates).
	Selected int `json:"selected"`
	// ByDomain, ByClass and ByCode count the selected events.
	ByDomain map[string]int `json:"by_domain"`
	ByClass  map[string]int `json:"by_class"`
	ByCode   map[string]int `json:"by_code"`
	// Keys is the number of distinct ordering keys among them; TopKeys
	// the (at most 20) keys with the most events.
	Keys    int        `json:"keys"`
	TopKeys []KeyCount `json:"top_keys,omitempty"`
	// WouldSkipDuplicate counts selected events whose idempotency key is
	// already committed (checked for at most 10,000 events; Checked says
	// how many were).
	WouldSkipDuplicate int `json:"would_skip_duplicate"`
	Checked            int `json:"duplicates_checked"`
	// Excluded counts the events not selected, by reason.
	Excluded map[string]int `json:"excluded"`
	// HeldByEarlier counts selected events that follow an unresolved,
	// unselected event of the same ordering key: a drain holds them.
	HeldByEarlier int `json:"held_by_earlier"`
	// HeldBy names the unselected events that hold them (at most
	// MaxHeldBy, the earliest of each key); an event under a legal hold
	// is named with Reason ReasonLegalHold, its hold and case.
	HeldBy []Blocker `json:"held_by,omitempty"`
	// HeldByHold counts the events the filter selects that are under a
	// legal hold (package hold): counted in Selected, never replayed,
	// and holding the later events of their ordering key even when the
	// drain ignores order (those are in HeldByEarlier).
	HeldByHold int `json:"held_by_hold"`
	// UnderHold names them (at most MaxHeldBy), with their hold and case.
	UnderHold []Blocker `json:"under_hold,omitempty"`
	// Canary lists what the request's canary would replay first, in
	// order.
	Canary []CanaryPick `json:"canary,omitempty"`
	// Guard is the failure guard the drain would run with (the default
	// one unless the request names its own or turns it off).
	Guard *DrainGuard `json:"guard,omitempty"`
	// Holds counts the selected events under a legal hold by hold (never
	// replayed: HeldByHold), with the hold's case.
	Holds []HoldCount `json:"holds,omitempty"`
	// Overlaps lists the unfinished drains (selecting, running, paused)
	// whose filters select some of these events: drain.start refuses
	// such a drain (ErrDrainOverlap).
	Overlaps []DrainOverlap `json:"overlaps,omitempty"`
}

// DrainOverlap is an unfinished drain that selects some of the events of
// another drain's filter (DrainPlan.Overlaps, Error.Overlaps).
type DrainOverlap struct {
	DrainID string `json:"drain_id"`
	// Status is the other drain's status (selecting, running, paused).
	Status    string `json:"status"`
	StartedBy string `json:"started_by,omitempty"`
	// Records counts the events both would select.
	Records int `json:"records"`
}

// HoldCount is how many of a drain's selected events one legal hold
// holds (DrainPlan.Holds, DrainState.Holds).
type HoldCount struct {
	HoldID  string `json:"hold_id"`
	CaseID  string `json:"case_id,omitempty"`
	Records int    `json:"records"`
}

// MaxHeldBy bounds the blockers a plan or a drain's status names.
const MaxHeldBy = 20

// Blocker is an unresolved event a drain did not select, or did not
// replay because a legal hold holds it, that holds the later selected
// events of its ordering key.
type Blocker struct {
	DLQID string `json:"dlq_id"`
	// Reason is why it is not selected (the filter member that excluded
	// it, its class, poison, ...), or ReasonLegalHold.
	Reason string `json:"reason"`
	// HoldID and CaseID name the legal hold that holds it (Reason
	// ReasonLegalHold; one of them when several do).
	HoldID string `json:"hold_id,omitempty"`
	CaseID string `json:"case_id,omitempty"`
	// PartyID is the blocker's party (registrant, owning party,
	// supplier), when known: where a domain's order crosses parties (a
	// DSCSA serial), the events it holds may be another party's.
	PartyID string `json:"party_id,omitempty"`
	// Holds counts the selected events it holds.
	Holds int `json:"holds"`
}

// ReasonLegalHold is the reason of an event a drain does not replay
// because a legal hold holds it (Blocker.Reason, DrainPlan.Excluded).
const ReasonLegalHold = "legal_hold"

// KeyCount is the number of selected events of one ordering key.
type KeyCount struct {
	OrderingKey string `json:"ordering_key"`
	Events      int    `json:"events"`
}

// DrainCounts are a drain's progress counters.
type DrainCounts struct {
	// Selected events; Replayed = replays published; Committed = replays
	// observed committed.
	Selected  int `json:"selected"`
	Replayed  int `json:"replayed"`
	Committed int `json:"committed"`
	// SkippedDuplicate, ReplayFailed and Poisoned are outcomes.
	SkippedDuplicate int `json:"skipped_duplicate"`
	ReplayFailed     int `json:"replay_failed"`
	Poisoned         int `json:"poisoned"`
	// Held: not replayed because an earlier event of the same ordering
	// key failed or is unresolved.
	Held int `json:"held"`
	// HeldByEarlier: those of Held held by an unselected earlier event of
	// their key (see DrainState.HeldBy), not by a failure in the drain.
	HeldByEarlier int `json:"held_by_earlier"`
	// HeldByHold: those of Held under a legal hold themselves (package
	// hold), found so at the selection or at their turn (see
	// DrainState.UnderHold); they hold the later events of their key,
	// even when the drain ignores order.
	HeldByHold int `json:"held_by_hold"`
	// Pending: replayed without an outcome observed in time (redriving).
	Pending int `json:"pending"`
	// Skipped: not redrivable any more when their turn came (resolved by
	// someone else, released state changed, unreadable chain).
	Skipped int `json:"skipped"`
	// Errors: store errors that left an event untouched.
	Errors int `json:"errors"`
}

// Done is how many selected events have a final count.
func (c DrainCounts) Done() int {
	return c.Committed + c.SkippedDuplicate + c.ReplayFailed + c.Poisoned + c.Held + c.Pending + c.Skipped + c.Errors
}

// DrainState is a drain's state (drain.status, drain.list), as stored in
// the DRAINS bucket.
type DrainState struct {
	DrainID string `json:"drain_id"`
	Status  string `json:"status"`
	// Request is the drain's filter and controls.
	Request DrainStartRequest `json:"request"`
	DrainCounts
	// Remaining is Selected minus the events with a final count.
	Remaining int `json:"remaining"`
	// HeldBy names the unselected events holding HeldByEarlier (at most
	// MaxHeldBy); one under a legal hold with Reason ReasonLegalHold, its
	// hold and case.
	HeldBy []Blocker `json:"held_by,omitempty"`
	// UnderHold names the events of HeldByHold (at most MaxHeldBy), with
	// their hold and case.
	UnderHold []Blocker `json:"under_hold,omitempty"`
	// CurrentRate is replays per second over the last few seconds.
	CurrentRate float64 `json:"current_rate"`
	// MaxInFlight is the most replays ever in flight at once (never above
	// the drain's max_concurrency).
	MaxInFlight int `json:"max_in_flight"`
	// Owner is the redriver instance running it; Heartbeat its last
	// checkpoint.
	Owner     string    `json:"owner"`
	Heartbeat time.Time `json:"heartbeat"`
	// Resumed counts how often another run took the drain over.
	Resumed    int        `json:"resumed,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Error      string     `json:"error,omitempty"`
	// StartedBy is the authenticated user who started the drain;
	// CancelledBy the one who cancelled it, if anyone did.
	StartedBy   string `json:"started_by,omitempty"`
	CancelledBy string `json:"cancelled_by,omitempty"`
	// CanaryDone is set once the canary has its outcomes (passed or
	// paused the drain): a resumed drain does not run it again.
	CanaryDone bool `json:"canary_done,omitempty"`
	// Events are the drain's pauses, resumes and cancellation, in order.
	Events []DrainEvent `json:"events,omitempty"`
	// Outcome says what a completed drain achieved (DrainOutcome*: all
	// resolved, partial, nothing committed); OutcomeReason lists, for the
	// last two, the non-zero counts of what was not committed (held by a
	// legal hold, held by an earlier event, failed, poisoned, pending,
	// skipped, errors), or "nothing selected". Empty before completion.
	Outcome       string `json:"outcome,omitempty"`
	OutcomeReason string `json:"outcome_reason,omitempty"`
	// Holds counts the selected events under a legal hold by hold, with
	// the hold's case (as found at the selection).
	Holds []HoldCount `json:"holds,omitempty"`
}

// WithOutcome returns st with Outcome and OutcomeReason set when it is
// completed (cleared otherwise).
func (st DrainState) WithOutcome() DrainState {
	st.Outcome, st.OutcomeReason = "", ""
	if st.Status != DrainCompleted {
		return st
	}
	resolved := st.Committed + st.SkippedDuplicate
	var why []string
	add := func(n int, what string) {
		if n > 0 {
			why = append(why, strconv.Itoa(n)+" "+what)
		}
	}
	add(st.HeldByHold, "held by a legal hold")
	add(st.HeldByEarlier, "held by an earlier unresolved event of their key")
	add(st.Held-st.HeldByHold-st.HeldByEarlier, "held behind a failed event of their key")
	add(st.ReplayFailed, "failed again")
	add(st.Poisoned, "poisoned")
	add(st.Pending, "pending (no outcome in time)")
	add(st.Skipped, "skipped (resolved elsewhere or no longer redrivable)")
	add(st.Errors, "errors")
	switch {
	case st.Selected == 0:
		st.Outcome, st.OutcomeReason = DrainOutcomeNothingCommitted, "nothing selected"
	case resolved == 0:
		st.Outcome, st.OutcomeReason = DrainOutcomeNothingCommitted, strings.Join(why, ", ")
	case len(why) == 0:
		st.Outcome = DrainOutcomeAllResolved
	default:
		st.Outcome, st.OutcomeReason = DrainOutcomePartial, strings.Join(why, ", ")
	}
	return st
}

// DrainIDRequest names a drain (drain.status, drain.cancel).
type DrainIDRequest struct {
	DrainID string `json:"drain_id"`
}

// DrainListReply lists the drains in the DRAINS bucket.
type DrainListReply struct {
	Drains []DrainState `json:"drains"`
}

// RedriveRequest replays one quarantined event (redrive), optionally with a
// corrected payload.
type RedriveRequest struct {
	DLQID string `json:"dlq_id"`
	// Payload, when set, is the corrected event (a JSON value, stored
	// byte for byte as a corrected record; the original stays in the
	// chain). Reason is then required.
	Payload json.RawMessage `json:"payload,omitempty"`
	// IncludeValidation replays a validation-class event without a
	// correction.
	IncludeValidation bool `json:"include_validation,omitempty"`
	// Actor is ignored (kept for compatibility): the records name the
	// authenticated caller (see DrainStartRequest.Actor).
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// DryRun checks the redrive as it would run and changes nothing: no
	// record is written, no approval is created, nothing is published.
	// The reply's Check says on which subject the replay would be checked
	// (the one the corrected payload names), what the gate answers there,
	// and whether a second person's approval would be needed. A request
	// the redrive would refuse (held, poison, in flight, resolved, not
	// redrivable) is refused the same way.
	DryRun bool `json:"dry_run,omitempty"`
}

// RedriveCheck is a redrive's dry run (RedriveRequest.DryRun).
type RedriveCheck struct {
	// Subject is the events subject the replay is checked on, as a
	// publisher would publish it: events.<domain>.<event_type>, the event
	// type the effective payload names (a DSCSA bizStep, an FSMA CTE type,
	// a pharmacy event type) when it is a correction that names one, else
	// the original's. The replay itself is published on
	// redriven.<domain>.<event_type>.<dlq_id>.<n> of the same domain and
	// type.
	Subject   string `json:"subject"`
	Domain    string `json:"domain"`
	EventType string `json:"event_type"`
	// OriginalEventType is the event type of the original's subject:
	// another than EventType when the correction changes what selects the
	// event's subject.
	OriginalEventType string `json:"original_event_type"`
	// OK: the gate accepts the payload on Subject. Otherwise Code and
	// Detail are its refusal, as the replay would be quarantined again.
	OK     bool   `json:"ok"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Document: the payload is a whole EPCIS document, checked event by
	// event (Code and Detail name the first event refused, by position).
	Document bool `json:"document,omitempty"`
	// IdentityChanges names the identity fields a correction changes
	// (idempotency_key, ordering_key, domain, event_type: names only).
	IdentityChanges []string `json:"identity_changes,omitempty"`
	// ApprovalRequired: under the policy in force the redrive would wait
	// for a second person (answered APPROVAL_REQUIRED with a pending
	// approval); ApprovalReasons name the rules that matched.
	ApprovalRequired bool     `json:"approval_required"`
	ApprovalReasons  []string `json:"approval_reasons,omitempty"`
}

// RedriveReply is the outcome of a redrive (OutcomePending when it was not
// observed before the reply; the redriver keeps observing).
type RedriveReply struct {
	DLQID        string `json:"dlq_id"`
	Outcome      string `json:"outcome"`
	Status       string `json:"status"`
	Class        string `json:"class"`
	RedriveCount int    `json:"redrive_count"`
	// Corrected is the index of the corrected record written, if any.
	Corrected *int `json:"corrected_index,omitempty"`
	// EventsSeq is the EVENTS sequence of the replay the validator
	// committed (outcome replayed); zero otherwise (a replay is published
	// into EVENTS directly, and this is its sequence there).
	EventsSeq uint64 `json:"events_seq,omitempty"`
	// Check is a dry run's answer (RedriveRequest.DryRun); Outcome is then
	// empty and Status and Class are the chain's as it stands.
	Check *RedriveCheck `json:"check,omitempty"`
}

// DismissRequest closes a chain for good without committing its event
// (dismiss): it is never replayed and holds no later event of its
// ordering key.
type DismissRequest struct {
	DLQID string `json:"dlq_id"`
	// Actor is ignored: the dismissed record names the authenticated
	// caller. Reason is required.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason"`
	// Signed is the decision signed by its person (issue #38).
	Signed *SignedDecision `json:"signed,omitempty"`
}

// ReleaseRequest moves a poison event back to redrivable (release).
type ReleaseRequest struct {
	DLQID string `json:"dlq_id"`
	// Class is the class restored: validation or exhausted; default the
	// class the event had before it was poisoned.
	Class string `json:"class,omitempty"`
	// Actor is ignored (kept for compatibility): the released record names
	// the authenticated caller (see DrainStartRequest.Actor). Reason is
	// required.
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
	// Signed is the decision signed by its person (issue #38).
	Signed *SignedDecision `json:"signed,omitempty"`
}
