package access_test

import (
	"testing"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// TestEndpointTable: the rows decide who may call what; one row per
// subject, each served by a service and reachable by a person or a
// service. A new rule is one row.
func TestEndpointTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subject string
		role    access.Role
		want    bool
	}{
		{"publisher dry-runs", api.ValidatorCheckAll, access.RolePublisher, true},
		{"publisher reads no drain", api.DrainStatus, access.RolePublisher, false},
		{"viewer reads drains", api.DrainList, access.RoleViewer, true},
		{"viewer starts no drain", api.DrainStart, access.RoleViewer, false},
		{"operator redrives", api.Redrive, access.RoleOperator, true},
		{"operator approves nothing", api.ApprovalApprove, access.RoleOperator, false},
		{"approver approves", api.ApprovalApprove, access.RoleApprover, true},
		{"approver rejects", api.ApprovalReject, access.RoleApprover, true},
		{"policy sets the policy", api.PolicySet, access.RolePolicy, true},
		{"approver sets no policy", api.PolicySet, access.RoleApprover, false},
		{"inspector places holds", api.HoldPlace, access.RoleInspector, true},
		{"operator lifts holds", api.HoldLift, access.RoleOperator, true},
		{"viewer places no hold", api.HoldPlace, access.RoleViewer, false},
		{"no person stores a hold lift's approval", api.ApprovalHoldLift, access.RoleApprover, false},
		{"no person executes an approved lift", api.HoldLiftApproved, access.RoleOperator, false},
		{"no person appends to a chain", api.QuarantinerAppend, access.RoleOperator, false},
		{"a subject the table lacks", "audit.verify.Müller & Söhne <Großhandel>", access.RoleOperator, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := access.Allowed(tc.subject, tc.role); got != tc.want {
				t.Errorf("Allowed(%q, %s) = %v, want %v", tc.subject, tc.role, got, tc.want)
			}
		})
	}

	seen := map[string]bool{}
	for _, e := range access.Endpoints() {
		switch {
		case seen[e.Subject]:
			t.Errorf("%s: two rows", e.Subject)
		case e.Name == "" || e.Description == "":
			t.Errorf("%s: no name or description", e.Subject)
		case len(e.Roles) == 0 && len(e.Callers) == 0:
			t.Errorf("%s: no role and no service may call it", e.Subject)
		}
		seen[e.Subject] = true
		if _, ok := access.Lookup(e.Service); !ok || e.Service == access.Admin {
			t.Errorf("%s: served by %q, no service", e.Subject, e.Service)
		}
		for _, c := range e.Callers {
			if _, ok := access.Lookup(c); !ok {
				t.Errorf("%s: caller %q is no service", e.Subject, c)
			}
		}
	}
}
