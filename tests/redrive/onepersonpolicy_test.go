package redrive

import (
	"context"
	"testing"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
)

// identityCorrections sets the store's approval policy to the former
// default, corrections: identity, for a test of the redrive mechanics
// that corrects a Schedule II dispense at once: the default since issue
// #40 sends such a correction to a second person (tests/approval).
func (e *env) identityCorrections(t *testing.T) {
	t.Helper()
	p := approval.DefaultPolicy()
	p.Corrections = approval.CorrectionsIdentity
	if _, err := approval.NewPolicyStore(e.js, nil).Set(context.Background(), access.Identity{User: "policy", Role: access.RolePolicy},
		api.PolicySetRequest{Policy: p, Reason: "this test corrects controlled-substance events without a second person"}); err != nil {
		t.Fatal(err)
	}
}
