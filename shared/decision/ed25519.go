package decision

import "github.com/deadletter/deadletter/shared/api"

// verifyEd25519 checks an ed25519 signature over the decision's digest.
func verifyEd25519(k api.DecisionKey, s api.SignedDecision) error {
	_ = k
	_ = s
	return ErrBadSignature // TODO(#38): the ed25519 check
}
