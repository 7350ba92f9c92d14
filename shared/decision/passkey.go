package decision

import "github.com/deadletter/deadletter/shared/api"

// verifyPasskey checks a WebAuthn assertion whose challenge is the
// decision's digest.
func verifyPasskey(k api.DecisionKey, s api.SignedDecision) error {
	_ = k
	_ = s
	return ErrBadSignature // TODO(#38): the WebAuthn check
}
