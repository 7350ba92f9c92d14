package stack

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// TestEndpointsAreTheTable: every service of a running stack lists in its
// $SRV.INFO exactly the endpoints the endpoint table gives it
// (access.ServiceEndpoints): an endpoint a service registers that the
// table lacks would escape the access configuration and the role checks
// that derive from the table, and one the table lists that no service
// serves would be imported for nothing.
func TestEndpointsAreTheTable(t *testing.T) {
	s, _ := startStack(t, t.TempDir())
	// Discovery as a person sees it ($SRV.> is imported by every role's
	// account; a service answers no inbox of the services' account but
	// its own).
	nc, err := s.ConnectAs(access.DefaultPerson(access.RoleViewer))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, name := range []string{access.Validator, access.Quarantiner, access.Redriver, access.Auditor} {
		t.Run(name, func(t *testing.T) {
			want := access.ServiceEndpoints(name)
			if len(want) == 0 {
				t.Fatalf("the endpoint table gives %s no endpoint", name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := endpoint.Served(ctx, nc, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, sub := range got {
				if !slices.Contains(want, sub) {
					t.Errorf("%s serves %s, which the endpoint table lacks", name, sub)
				}
			}
			for _, sub := range want {
				if !slices.Contains(got, sub) {
					t.Errorf("the endpoint table gives %s to %s, which does not serve it", sub, name)
				}
			}
		})
	}
}
