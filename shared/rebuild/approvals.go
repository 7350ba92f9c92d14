package rebuild

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/streams"
)

// APPROVALS is checked against AUDIT's approval actions and REQUESTS:
// approval.Store writes the request whole to REQUESTS (ADR 0024), then to
// AUDIT with its digest (over the request body, payload and chain length
// among the facts), then the entry; every decision, execution and refusal
// after or before the entry's own compare-and-set. AUDIT holds every
// field of an approval but its request body, its corrected payload and
// its identity diff's values, which may carry a payload's values (PHI),
// and only their digest; REQUESTS holds them, and its message is taken
// as the approval's source only if it hashes to AUDIT's digest with
// AUDIT's requester. So:
//
//   - an entry whose status, requester, decider, meaning, times, reasons,
//     outcome or proof differ from AUDIT's is altered, and so is one whose
//     request, payload or chain length no longer hash to the digest AUDIT
//     recorded ("request"), or whose identity diff is not REQUESTS' ("diff");
//   - Restore writes a missing approval whole from REQUESTS and AUDIT, and
//     corrects an altered one (its request from REQUESTS). An approval of a
//     store before REQUESTS keeps its request when it still hashes to
//     AUDIT's digest; missing, or its request altered, it cannot be
//     restored (ErrUnrestorable). Such an approval is never executed all
//     the same: an executor checks the proof against AUDIT's digest
//     (approval.Store.Proven). The requester asks again.
//   - AUDIT records a request before the entry is created, and a create
//     refused by a limit afterwards leaves that request alone, its key
//     never written: a request with no later action is reported missing
//     only when its key was written and is now delete-marked or does not
//     decode (a delete marker is all a writer can leave: rollups and
//     purges are refused), and only while it could still be pending
//     (before its expiry).

// approvalObject is the AUDIT object kind of an approval's actions.
const approvalObject = "approval"

// approvalDetail is the detail of an approval's AUDIT action, as
// package approval writes it.
type approvalDetail = approval.AuditDetail

// approvalWant is an approval as AUDIT records it.
type approvalWant struct {
	api.Approval
	// digest is the request's digest AUDIT recorded (approval.RequestDigest).
	digest string
	// last is when AUDIT's last action of it happened.
	last time.Time
	// requestedOnly: AUDIT records the request and nothing after it.
	requestedOnly bool
	// raw is the approval as created, REQUESTS' message (nil: an
	// approval of a store before REQUESTS, or a message naming another
	// id or requester, which badSrc says); srcDiff its identity diff. It
	// is decoded whole and checked against AUDIT's digest only when an
	// entry is restored from it (source): a comparison reads the diff
	// alone.
	raw     []byte
	srcDiff []api.IdentityChange
	badSrc  bool
}

// requestHead is what a comparison reads of a REQUESTS message.
type requestHead struct {
	ID        string               `json:"id"`
	Requester string               `json:"requester"`
	Diff      []api.IdentityChange `json:"diff"`
}

// source returns the approval as created, from REQUESTS, when it hashes
// to the digest AUDIT recorded with AUDIT's requester (ok false
// otherwise, and badSrc set).
func (w *approvalWant) source() (api.Approval, bool) {
	if w.raw == nil {
		return api.Approval{}, false
	}
	var a api.Approval
	if json.Unmarshal(w.raw, &a) != nil || a.ID != w.ID || a.Requester != w.Requester || approval.RequestDigest(a) != w.digest {
		w.badSrc = true
		return api.Approval{}, false
	}
	return a, true
}

type approvalsIndex struct{}

func (ix approvalsIndex) each(ctx context.Context, r *Rebuilder, fn func(Entry)) error {
	m, err := ix.fold(ctx, r, "")
	return fromMap(m, err, fn)
}

func (ix approvalsIndex) one(ctx context.Context, r *Rebuilder, old Entry) (Entry, bool, error) {
	m, err := ix.fold(ctx, r, old.Key)
	e, ok := m[old.Key]
	return e, ok, err
}

// fold folds AUDIT's approval actions (of approval id; "": all) into the
// approvals they record.
func (approvalsIndex) fold(ctx context.Context, r *Rebuilder, id string) (map[string]Entry, error) {
	wants := map[string]*approvalWant{}
	err := auditActions(ctx, r.js, approvalObject, id, func(a api.AuditAction, _ *jetstream.RawStreamMsg) {
		var d approvalDetail
		if json.Unmarshal(a.Detail, &d) != nil {
			return
		}
		w := wants[a.ObjectID]
		if a.Action == approval.AuditRequested {
			if w != nil {
				return // the first request is the approval's
			}
			wants[a.ObjectID] = &approvalWant{Approval: api.Approval{ID: a.ObjectID, Action: d.Action, DLQID: d.DLQID, Domain: d.Domain,
				HoldID: d.HoldID, Status: api.ApprovalPending, Reasons: d.Reasons, DiffFields: d.DiffFields, Requester: a.Actor,
				RequesterRole: a.Role, RequestedAt: d.RequestedAt, Reason: a.Reason, ExpiresAt: d.ExpiresAt},
				digest: d.RequestDigest, last: a.At, requestedOnly: true}
			return
		}
		if w == nil {
			return // a decision on a request AUDIT never recorded: nothing to index
		}
		at := a.At
		switch a.Action {
		case approval.AuditApproved:
			w.Status, w.Decider, w.DecidedAt, w.Meaning = api.ApprovalApproved, a.Actor, &at, a.Reason
			w.Signed = d.Signed
		case approval.AuditRejected:
			w.Status, w.Decider, w.DecidedAt, w.Meaning = api.ApprovalRejected, a.Actor, &at, a.Reason
		case approval.AuditExecuted:
			w.Status, w.ExecutedAt, w.Outcome = api.ApprovalExecuted, &at, d.Outcome
		case approval.AuditRefused:
			w.Status, w.Refused = api.ApprovalRefused, d.Refused
			if d.Outcome != "" {
				w.Outcome = d.Outcome // a stale approval's
			}
		default:
			return
		}
		w.last, w.requestedOnly = a.At, false
	})
	if err != nil {
		return nil, err
	}
	// The requests as created (REQUESTS, written before AUDIT's): each
	// is the approval's source only if it names the approval and AUDIT's
	// requester (and, restored from, hashes to AUDIT's digest: source).
	filter, one := streams.ApprovalRequestsAll, ""
	if id != "" {
		if !validKey(id) {
			return map[string]Entry{}, nil
		}
		one = streams.ApprovalRequestSubject(id)
	}
	err = requests(ctx, r.js, filter, one, func(m *jetstream.RawStreamMsg) {
		key, ok := strings.CutPrefix(m.Subject, "requests.approval.")
		w := wants[key]
		if !ok || w == nil {
			return // a request AUDIT never took: no approval (its entry is never written)
		}
		var h requestHead
		if json.Unmarshal(m.Data, &h) != nil || h.ID != key || h.Requester != w.Requester {
			w.badSrc = true
			return
		}
		w.raw, w.srcDiff = m.Data, h.Diff
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]Entry, len(wants))
	for id, w := range wants {
		e := Entry{Key: id, Value: w.Approval, meta: w}
		if w.raw == nil {
			e.Lacks = "request body, corrected payload and identity diff values (AUDIT holds their digest; REQUESTS holds no matching request)"
		}
		out[id] = e
	}
	return out, nil
}

func (approvalsIndex) decode(key string, b []byte) (any, error) {
	var a api.Approval
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	if a.ID != key {
		return nil, fmt.Errorf("rebuild: approval entry %s names another id", key)
	}
	return a, nil
}

func (approvalsIndex) missing(r *Rebuilder, e Entry, s stored) (verdict, string) {
	w := e.meta.(*approvalWant)
	if w.requestedOnly {
		// A create refused by a limit after its request was recorded
		// leaves the request alone and the key never written: only a key
		// written once (now delete-marked or undecodable) was lost, however
		// lately (a create in flight has not written it). AUDIT takes the
		// request before the entry is created.
		if s.rev == 0 || !r.now().Before(w.ExpiresAt) {
			return inFlight, ""
		}
		return lost, fmt.Sprintf("AUDIT records approval %s requested and pending until %s", e.Key, w.ExpiresAt.UTC().Format(time.RFC3339))
	}
	detail := fmt.Sprintf("AUDIT records approval %s %s", e.Key, w.Status)
	if r.recent(w.last) {
		return recheck, detail // decided after APPROVALS was read?
	}
	return lost, detail
}

func (approvalsIndex) diff(r *Rebuilder, s any, e Entry) []string {
	a, w := s.(api.Approval), e.meta.(*approvalWant)
	var d []string
	add := func(differs bool, field string) {
		if differs {
			d = append(d, field)
		}
	}
	add(a.Action != w.Action || a.DLQID != w.DLQID || a.Domain != w.Domain || a.HoldID != w.HoldID, "target")
	add(a.Requester != w.Requester || a.RequesterRole != w.RequesterRole, "requester")
	add(!a.RequestedAt.Equal(w.RequestedAt) || !a.ExpiresAt.Equal(w.ExpiresAt), "requested_at")
	add(a.Reason != w.Reason, "reason")
	add(!slices.Equal(a.Reasons, w.Reasons) || !slices.Equal(a.DiffFields, w.DiffFields), "reasons")
	add(w.digest != "" && approval.RequestDigest(a) != w.digest, "request")
	add(w.raw != nil && !sameDiff(a.Diff, w.srcDiff), "diff")
	if a.Status != w.Status {
		// One side is written before the other: a difference younger than
		// the grace is the owner's write in flight.
		if r.recent(w.last) || (a.DecidedAt != nil && r.recent(*a.DecidedAt)) || (a.ExecutedAt != nil && r.recent(*a.ExecutedAt)) {
			return d
		}
		return append(d, "status ("+safeStatus(a.Status)+", AUDIT: "+w.Status+")")
	}
	if w.Status == api.ApprovalRefused {
		// A refused entry keeps what the forger wrote, visible: only the
		// refusal is compared.
		return d
	}
	decided := w.Status != api.ApprovalPending
	add(decided && (a.Decider != w.Decider || a.Meaning != w.Meaning || !sameTime(a.DecidedAt, w.DecidedAt)), "decision")
	add(w.Status == api.ApprovalExecuted && (a.Outcome != w.Outcome || !sameTime(a.ExecutedAt, w.ExecutedAt)), "outcome")
	add(w.Signed != nil && !sameSigned(a.Signed, w.Signed), "signed")
	return d
}

// sameDiff reports whether two identity diffs are the same (as JSON).
func sameDiff(a, b []api.IdentityChange) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// sameSigned reports whether two signed decisions are the same (as
// JSON: every member, the signature's bytes included).
func sameSigned(a, b *api.SignedDecision) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// sameTime reports whether two optional times are the same instant (both
// absent included).
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// safeStatus names a stored status for a detail: an approval status, else
// "unknown" (a forged value is never echoed).
func safeStatus(s string) string {
	switch s {
	case api.ApprovalPending, api.ApprovalApproved, api.ApprovalExecuted, api.ApprovalRejected, api.ApprovalExpired, api.ApprovalRefused:
		return s
	}
	return "unknown"
}

// srcState says why REQUESTS cannot restore an approval.
func srcState(w *approvalWant) string {
	if w.badSrc {
		return "holds a request that does not hash to AUDIT's digest"
	}
	return "holds none (an approval requested before REQUESTS existed)"
}

func (approvalsIndex) extra(r *Rebuilder, s any) bool {
	return !r.recent(s.(api.Approval).RequestedAt) // AUDIT takes the request first: no grace needed, but a skewed clock gets one
}

func (approvalsIndex) restore(_ *Rebuilder, e Entry, s any) ([]byte, error) {
	w := e.meta.(*approvalWant)
	a, fromSrc := w.source()
	switch {
	case fromSrc:
		// The request as created, from REQUESTS (it hashes to AUDIT's
		// digest): body, payload, diff, chain length and head.
		if s != nil && w.Status == api.ApprovalRefused {
			// A refused entry keeps the forged decision visible.
			cur := s.(api.Approval)
			a.Decider, a.DecidedAt, a.Meaning, a.Signed, a.ExecutedAt, a.Outcome = cur.Decider, cur.DecidedAt, cur.Meaning, cur.Signed, cur.ExecutedAt, cur.Outcome
		}
		if w.Status == api.ApprovalRefused && a.Outcome == "" {
			a.Outcome = w.Outcome
		}
	case s == nil:
		return nil, fmt.Errorf("%w: AUDIT holds approval %s's request only as a digest (no body, payload or diff) and REQUESTS %s: the requester asks again",
			ErrUnrestorable, e.Key, srcState(w))
	default:
		a = s.(api.Approval)
		if w.digest != "" && approval.RequestDigest(a) != w.digest {
			return nil, fmt.Errorf("%w: approval %s's request differs from the one AUDIT recorded, and REQUESTS %s: never executed (the proof is checked against AUDIT); the requester asks again",
				ErrUnrestorable, e.Key, srcState(w))
		}
	}
	// Everything AUDIT records is taken from AUDIT; the request, payload,
	// diff and chain length stay (they hash to AUDIT's digest).
	a.Action, a.DLQID, a.Domain, a.HoldID, a.Status = w.Action, w.DLQID, w.Domain, w.HoldID, w.Status
	a.Requester, a.RequesterRole, a.RequestedAt, a.ExpiresAt, a.Reason = w.Requester, w.RequesterRole, w.RequestedAt, w.ExpiresAt, w.Reason
	a.Reasons, a.DiffFields = w.Reasons, w.DiffFields
	a.Refused = w.Refused
	if w.Status == api.ApprovalRefused {
		// A refusal keeps the forged decision visible, as
		// approval.Store.Refuse does.
		a.Revision = 0
		return json.Marshal(a)
	}
	a.Decider, a.DecidedAt, a.Meaning, a.ExecutedAt, a.Outcome = w.Decider, w.DecidedAt, w.Meaning, w.ExecutedAt, w.Outcome
	a.Signed = w.Signed
	a.Revision = 0
	return json.Marshal(a)
}
