package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// Role is what a person may do. Each role is a NATS account of its own
// (RoleAccount; each publisher has one of its own, PublisherAccount), so the server itself says which role a request comes
// from: it writes the requesting account into Nats-Request-Info on the
// service import, and a client cannot choose it.
type Role string

// Roles.
const (
	// RolePublisher publishes events (and may dry-run them).
	RolePublisher Role = "publisher"
	// RoleViewer reads groups, lists, records without payloads, drains,
	// verification and reconciliation results.
	RoleViewer Role = "viewer"
	// RoleOperator is a viewer who also drains, redrives, releases and
	// reads payloads.
	RoleOperator Role = "operator"
	// RoleInspector is a viewer who also reads payloads (inspections,
	// exports).
	RoleInspector Role = "inspector"
	// RoleApprover gives the second signature of a two-person approval.
	RoleApprover Role = "approver"
	// RolePolicy changes approval and retention policy, without any
	// break-glass right.
	RolePolicy Role = "policy"
)

// Roles lists every person role, in the order of the documentation.
var Roles = []Role{RolePublisher, RoleViewer, RoleOperator, RoleInspector, RoleApprover, RolePolicy}

// ReadsPayloads reports whether the role may read payload bytes (PHI).
func (r Role) ReadsPayloads() bool { return r == RoleOperator || r == RoleInspector }

// Identity is an authenticated caller of a service endpoint, as the server
// attached it to the request.
type Identity struct {
	// User is the NATS user the caller authenticated as.
	User string `json:"user"`
	// Role is the caller's role (its account).
	Role Role `json:"role"`
}

// String is "user (role)".
func (id Identity) String() string { return fmt.Sprintf("%s (%s)", id.User, id.Role) }

// RequestInfoHeader is the header the server writes on a request that
// crosses a service import (it overwrites any the client sent).
const RequestInfoHeader = "Nats-Request-Info"

// ErrNoCaller is returned for a request that carries no identity the server
// attached: it did not come through a person's service import.
var ErrNoCaller = errors.New("access: the request carries no authenticated caller")

// requestInfo is the part of the server's Nats-Request-Info deadletter reads.
type requestInfo struct {
	Account string `json:"acc"`
	User    string `json:"user"`
}

// CallerOf returns the identity the server attached to a request's
// headers. Only the accounts of the person roles count: within the
// services' account nothing checks the header, so a request from there
// (or one without the header) is refused with ErrNoCaller.
func CallerOf(h nats.Header) (Identity, error) {
	raw := h.Get(RequestInfoHeader)
	if raw == "" {
		return Identity{}, ErrNoCaller
	}
	var ri requestInfo
	if err := json.Unmarshal([]byte(raw), &ri); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrNoCaller, err)
	}
	role, ok := RoleOfAccount(ri.Account)
	if !ok || ri.User == "" {
		return Identity{}, fmt.Errorf("%w: account %q", ErrNoCaller, ri.Account)
	}
	return Identity{User: ri.User, Role: role}, nil
}

// RoleAccount returns the NATS account of a role.
func RoleAccount(r Role) string { return "DEADLETTER_" + strings.ToUpper(string(r)) }

// RoleOfAccount returns the role whose account is acc: a publisher's
// account (PublisherAccount) is of RolePublisher.
func RoleOfAccount(acc string) (Role, bool) {
	if strings.HasPrefix(acc, publisherAccountPrefix) {
		return RolePublisher, true
	}
	for _, r := range Roles {
		if RoleAccount(r) == acc {
			return r, true
		}
	}
	return "", false
}
