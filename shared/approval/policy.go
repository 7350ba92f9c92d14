package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Policy says which actions need a second person's approval. It is the
// wire type of policy.get and policy.set.
type Policy = api.Policy

// Corrections settings of a Policy.
const (
	// CorrectionsIdentity: only corrections that change the event's
	// identity need approval (those always do, whatever the policy).
	CorrectionsIdentity = "identity"
	// CorrectionsAll: every correction needs approval.
	CorrectionsAll = "all"
	// CorrectionsControlled: the identity rule, and, for a pharmacy
	// event, every correction of a controlled substance (a DEA schedule
	// in the record's payload or the corrected one) and every change of
	// its quantity, NDC, lot or registrant (Needs). Other domains keep
	// the identity rule. The default since issue #40.
	CorrectionsControlled = "controlled"
)

// DefaultPendingTTL is how long a pending approval stays open unless the
// policy says otherwise.
const DefaultPendingTTL = 72 * time.Hour

// Bounds of Policy.PendingTTL.
const (
	MinPendingTTL = time.Minute
	MaxPendingTTL = 30 * 24 * time.Hour
)

// DefaultPolicy is the policy in force while none was ever set (a store
// with a policy record keeps it): identity-changing corrections, every
// correction of a pharmacy event of a controlled substance and every
// change of a pharmacy event's quantity, NDC, lot or registrant
// (CorrectionsControlled), every release of a poison event, every
// dismissal and every lift of a legal hold need a second person; drains and ignore_order do
// not; a pending approval expires after 72 hours.
func DefaultPolicy() Policy {
	return Policy{
		Corrections:   CorrectionsControlled,
		ReleasePoison: true,
		HoldLift:      true,
		PendingTTL:    DefaultPendingTTL.String(),
	}
}

// CorrectionsSettings are the values Policy.Corrections may take.
func CorrectionsSettings() []string {
	return []string{CorrectionsIdentity, CorrectionsControlled, CorrectionsAll}
}

// CheckPolicy reports the first invalid member of p (an error wrapping
// ErrBadRequest that names it).
func CheckPolicy(p Policy) error {
	switch {
	case !slices.Contains(CorrectionsSettings(), p.Corrections):
		return badField("policy.corrections", "must be one of "+strings.Join(CorrectionsSettings(), ", "))
	case p.DrainMaxSelected < 0:
		return badField("policy.drain_max_selected", "must not be negative")
	}
	if _, err := PendingTTL(p); err != nil {
		return err
	}
	return nil
}

// PendingTTL returns p's pending TTL (DefaultPendingTTL when empty), or an
// ErrBadRequest when it is not a duration within MinPendingTTL and
// MaxPendingTTL.
func PendingTTL(p Policy) (time.Duration, error) {
	if p.PendingTTL == "" {
		return DefaultPendingTTL, nil
	}
	d, err := time.ParseDuration(p.PendingTTL)
	if err != nil || d < MinPendingTTL || d > MaxPendingTTL {
		return 0, badField("policy.pending_ttl", fmt.Sprintf("must be a duration from %s to %s", MinPendingTTL, MaxPendingTTL))
	}
	return d, nil
}

// policyObjectID is the AUDIT object id of the approval policy.
const policyObjectID = "approval"

// policyObject is the AUDIT object kind of a policy change.
const policyObject = "policy"

// PolicySubject is the AUDIT subject of the approval policy's changes; its
// last message is the policy in force.
var PolicySubject = subjects.AuditAction(policyObject, policyObjectID)

// PolicyStore reads and changes the approval policy, kept in AUDIT (see
// the package doc). It needs a connection that may read AUDIT and publish
// audit.actions.> (the redriver's, package access).
type PolicyStore struct {
	js  jetstream.JetStream
	now func() time.Time

	mu     sync.Mutex
	stream jetstream.Stream
}

// NewPolicyStore returns the policy store of js; now is the clock (nil:
// time.Now).
func NewPolicyStore(js jetstream.JetStream, now func() time.Time) *PolicyStore {
	if now == nil {
		now = time.Now
	}
	return &PolicyStore{js: js, now: now}
}

// audit returns the AUDIT stream handle (looked up once).
func (s *PolicyStore) audit(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		return s.stream, nil
	}
	st, err := s.js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, subjects.AuditStream, err)
	}
	s.stream = st
	return st, nil
}

// Get returns the policy in force: the last one set, or DefaultPolicy
// (Default true, Revision 0) when none ever was.
func (s *PolicyStore) Get(ctx context.Context) (api.PolicyReply, error) {
	st, err := s.audit(ctx)
	if err != nil {
		return api.PolicyReply{}, err
	}
	m, err := st.GetLastMsgForSubject(ctx, PolicySubject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return api.PolicyReply{Policy: DefaultPolicy(), Default: true}, nil
	}
	if err != nil {
		return api.PolicyReply{}, fmt.Errorf("%w: read policy: %w", ErrUnavailable, err)
	}
	var act api.AuditAction
	var p Policy
	if err := json.Unmarshal(m.Data, &act); err != nil {
		return api.PolicyReply{}, fmt.Errorf("policy at AUDIT sequence %d is not an audit action: %w", m.Sequence, err)
	}
	if err := json.Unmarshal(act.Detail, &p); err != nil {
		return api.PolicyReply{}, fmt.Errorf("policy at AUDIT sequence %d: %w", m.Sequence, err)
	}
	at := act.At
	return api.PolicyReply{Policy: p, SetBy: act.Actor, SetAt: &at, Revision: m.Sequence}, nil
}

// Set replaces the policy, as caller (who must have the policy role) for
// the stated reason. The change is conditional on the policy in force
// being req.ExpectedRevision when set, else the one Set reads first:
// another change in between is ErrConflict. It returns the policy stored.
func (s *PolicyStore) Set(ctx context.Context, caller access.Identity, req api.PolicySetRequest) (api.PolicyReply, error) {
	if !access.Allowed(api.PolicySet, caller.Role) {
		return api.PolicyReply{}, fmt.Errorf("%w: changing the approval policy takes the role %v (the endpoint table)", ErrForbidden, access.EndpointRoles(api.PolicySet))
	}
	if strings.TrimSpace(req.Reason) == "" {
		return api.PolicyReply{}, badField("reason", "is required")
	}
	p := req.Policy
	if p.PendingTTL == "" {
		p.PendingTTL = DefaultPendingTTL.String()
	}
	if err := CheckPolicy(p); err != nil {
		return api.PolicyReply{}, err
	}
	var rev uint64
	if req.ExpectedRevision != nil {
		rev = *req.ExpectedRevision
	} else {
		cur, err := s.Get(ctx)
		if err != nil {
			return api.PolicyReply{}, err
		}
		rev = cur.Revision
	}
	detail, err := json.Marshal(p)
	if err != nil {
		return api.PolicyReply{}, fmt.Errorf("encode policy: %w", err)
	}
	at := s.now().UTC()
	body, err := json.Marshal(api.AuditAction{
		Action: "set", Object: policyObject, ObjectID: policyObjectID,
		Actor: caller.User, Role: string(caller.Role), At: at, Reason: req.Reason, Detail: detail,
	})
	if err != nil {
		return api.PolicyReply{}, fmt.Errorf("encode policy action: %w", err)
	}
	m := nats.NewMsg(PolicySubject)
	m.Data = body
	m.Header.Set(envelope.ExpectedLastSubjectSeq, fmt.Sprint(rev))
	ack, err := s.js.PublishMsg(ctx, m)
	if isWrongLastSeq(err) {
		return api.PolicyReply{}, fmt.Errorf("%w: the policy changed since revision %d", ErrConflict, rev)
	}
	if err != nil {
		return api.PolicyReply{}, fmt.Errorf("%w: store policy: %w", ErrUnavailable, err)
	}
	return api.PolicyReply{Policy: p, SetBy: caller.User, SetAt: &at, Revision: ack.Sequence}, nil
}

// isWrongLastSeq reports a refused conditional publish (10071, or 10164 on
// a replicated stream).
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
