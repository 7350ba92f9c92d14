package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
)

// Decisions signed by their person (issue #38). Approve, reject, release,
// dismiss and the lift of a legal hold are executed only with an
// api.SignedDecision: the executor rebuilds the decision it expects from
// its own state (ForApproval, ForRecord, ForHold), and accepts the signed
// one only when it is that decision except its Meaning and At, At is
// within MaxSkew of now, and a Checker (the registry of people's public
// keys kept in AUDIT) finds the signature made by a key of the person,
// who was enabled and held the role at that time. No service holds a key
// that can sign a decision.

// MaxSkew is how far a decision's signing time may be from the
// executor's clock when it is asked (either way).
const MaxSkew = 5 * time.Minute

// ErrStale: the decision was signed too long before (or after) now.
var ErrStale = errors.New("approval: the decision was not signed now")

// Checker checks a signed decision against the registry of people: the
// signature verifies with a key the person held at the decision's time
// (registered, not revoked), and the person was enabled and held the
// decision's role then. decision.Registry is the one every service is
// given; AuditRegistry reads the same records.
type Checker interface {
	Check(ctx context.Context, sd api.SignedDecision) error
}

// ForApproval is the decision a person signs to approve or reject
// approval a (decision.ForApproval, the one owner of what a decision
// holds, which clients call too).
func ForApproval(a api.Approval, action, meaning, person, role string, at time.Time) api.Decision {
	return decision.ForApproval(a, action, meaning, person, role, at)
}

// ForRecord is the decision a person signs to release or dismiss the
// event dlqID (decision.ForRecord).
func ForRecord(action, dlqID, requestDigest, chainHead, meaning, person, role string, at time.Time) api.Decision {
	return decision.ForRecord(action, dlqID, requestDigest, chainHead, meaning, person, role, at)
}

// DirectDigest is the SHA-256 (hex) of a direct request as decided on (a
// release, a dismissal, a hold lift), without its Actor and Signed
// members (decision.ReleaseDigest, DismissDigest, HoldLiftDigest).
func DirectDigest(req any) string {
	switch r := req.(type) {
	case api.ReleaseRequest:
		return decision.ReleaseDigest(r)
	case api.DismissRequest:
		return decision.DismissDigest(r)
	case api.HoldLiftRequest:
		return decision.HoldLiftDigest(r)
	}
	panic(fmt.Sprintf("approval: no direct request digest of %T", req))
}

// AsOfChecker is a Checker that can also check a decision against the
// registry as of another time than its own: CheckSigned asks it as of
// the later of the decision's time and now, so that a person disabled (or
// a key revoked) within MaxSkew cannot sign with an earlier time.
type AsOfChecker interface {
	Checker
	CheckAt(ctx context.Context, sd api.SignedDecision, at time.Time) error
}

// CheckSigned checks sd against the decision the executor expects
// (want, whose Meaning and At are ignored) at now: present, the same
// action, target, request, chain, person and role, a meaning, signed
// within MaxSkew of now, and accepted by c. Every refusal wraps a
// decision.Err* sentinel (or ErrStale): Code maps them to
// api.ErrDecisionUnsigned.
func CheckSigned(ctx context.Context, c Checker, want api.Decision, sd *api.SignedDecision, now time.Time) error {
	if err := matches(want, sd); err != nil {
		return err
	}
	if d := now.Sub(sd.Decision.At); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w: %s of %s signed at %s, %s from now", ErrStale, want.Action, want.Target,
			sd.Decision.At.UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	if err := check(ctx, c, *sd); err != nil {
		return err
	}
	if ac, ok := c.(AsOfChecker); ok && now.After(sd.Decision.At) {
		return ac.CheckAt(ctx, *sd, now)
	}
	return nil
}

// CheckRecorded checks a decision recorded earlier (an approval's, read
// again by the executor or a sweep): as CheckSigned without the time
// window, the person's keys, role and state as of the decision's time.
func CheckRecorded(ctx context.Context, c Checker, want api.Decision, sd *api.SignedDecision) error {
	if err := matches(want, sd); err != nil {
		return err
	}
	return check(ctx, c, *sd)
}

// matches compares sd's decision with want but for Meaning and At.
func matches(want api.Decision, sd *api.SignedDecision) error {
	if sd == nil {
		return fmt.Errorf("%w: %s of %s", decision.ErrUnsigned, want.Action, want.Target)
	}
	got := sd.Decision
	switch {
	case got.Action != want.Action || got.Target != want.Target:
		return fmt.Errorf("%w: it signs %s of %s, not %s of %s", decision.ErrMismatch, got.Action, got.Target, want.Action, want.Target)
	case got.Request != want.Request:
		return fmt.Errorf("%w: %s of %s: the request signed is not the one asked", decision.ErrMismatch, want.Action, want.Target)
	case got.Chain != want.Chain:
		return fmt.Errorf("%w: %s of %s: the chain signed is not the one as it stands", decision.ErrMismatch, want.Action, want.Target)
	case got.Person != want.Person || got.Role != want.Role:
		return fmt.Errorf("%w: signed by %s as %s, asked by %s as %s", decision.ErrMismatch, got.Person, got.Role, want.Person, want.Role)
	case got.Meaning == "":
		return fmt.Errorf("%w: %s of %s states no meaning", decision.ErrMismatch, want.Action, want.Target)
	case got.At.IsZero():
		return fmt.Errorf("%w: %s of %s has no time", decision.ErrMismatch, want.Action, want.Target)
	}
	return nil
}

// check asks c, failing closed without one.
func check(ctx context.Context, c Checker, sd api.SignedDecision) error {
	if c == nil {
		return fmt.Errorf("%w: no registry of people's keys is configured", decision.ErrUnknownKey)
	}
	return c.Check(ctx, sd)
}

// PersonRole returns the person and role a decision of who is signed
// as: access.PersonOf of the user and the role it acts in.
func PersonRole(who access.Identity) (person, role string) {
	return access.PersonOf(who.User), string(who.Role)
}

// Raw returns sd as a record carries it (record.Signature.Signed,
// record.Record.Decision): its JSON; nil for nil.
func Raw(sd *api.SignedDecision) json.RawMessage {
	if sd == nil {
		return nil
	}
	b, _ := json.Marshal(sd)
	return b
}

// FromRaw decodes a signed decision a record carries (nil for none).
func FromRaw(raw json.RawMessage) (*api.SignedDecision, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var sd api.SignedDecision
	if err := json.Unmarshal(raw, &sd); err != nil {
		return nil, fmt.Errorf("%w: the signed decision does not decode", decision.ErrUnsigned)
	}
	return &sd, nil
}

// unsigned reports whether err is a refused signature of a decision.
func unsigned(err error) bool {
	for _, e := range []error{decision.ErrUnsigned, decision.ErrBadSignature, decision.ErrUnknownKey, decision.ErrScheme,
		decision.ErrMismatch, decision.ErrPerson, ErrStale} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
