package access

import (
	"errors"
	"fmt"
	"slices"
)

// Users outside the services' and the people's accounts, which only a
// cluster has.
const (
	// SystemAccount is the server's system account: server pings and
	// monitoring by request ($SYS.REQ.SERVER.PING.VARZ), nothing of the
	// services' account.
	SystemAccount = "SYS"
	// Monitor is the system account's user: it reads each server's /varz
	// by request (the configuration digest `provision --check` compares).
	// For monitoring and for the administrator's check, never for a
	// service.
	Monitor = "monitor"
	// RouteUser authenticates the cluster's routes: a node dials the
	// others with it and accepts only routes that present it.
	RouteUser = "route"
)

// ErrReservedName is returned when a person has the name of a cluster
// user (Monitor, RouteUser).
var ErrReservedName = errors.New("access: a person has a reserved user name")

// EnsureClusterUsers gives Monitor and RouteUser a password (and its bcrypt
// hash) when they have none, and reports whether it changed s. They are
// kept in s.Users like the others, so a secrets file keeps them across
// runs of the generator.
func (s *Secrets) EnsureClusterUsers(opts ...Option) (changed bool, err error) {
	for _, p := range s.People {
		if slices.Contains([]string{Monitor, RouteUser}, p.Name) {
			return false, fmt.Errorf("%w: %s", ErrReservedName, p.Name)
		}
	}
	if s.Users == nil {
		s.Users = map[string]Secret{}
	}
	o := options(opts)
	for _, name := range []string{Monitor, RouteUser} {
		if s.Users[name].Password != "" && s.Users[name].Bcrypt != "" {
			continue
		}
		sec, err := newPassword(o.cost)
		if err != nil {
			return changed, err
		}
		s.Users[name], changed = sec, true
	}
	return changed, nil
}

// Save writes s to path atomically, mode 0600 (the file LoadOrCreate
// reads).
func (s *Secrets) Save(path string) error { return s.save(path) }

// NATSContext is a natscli context file (the fields deadletter sets): what
// a person, the admin or the monitor user connects with (`nats --context
// FILE ...`).
type NATSContext struct {
	// Description says whose context it is.
	Description string `json:"description"`
	// URL is the server URL(s), comma separated.
	URL string `json:"url"`
	// User and Password are the credentials.
	User     string `json:"user"`
	Password string `json:"password"`
	// InboxPrefix is the user's private inbox prefix.
	InboxPrefix string `json:"inbox_prefix"`
	// CA is the CA file that verifies the servers' certificates.
	CA string `json:"ca,omitempty"`
}

// Context returns the natscli context of a password user (a person, the
// admin or Monitor) for the servers at url.
func (s *Secrets) Context(user, description, url, ca string) (NATSContext, error) {
	sec, ok := s.Users[user]
	if !ok || sec.Password == "" {
		return NATSContext{}, fmt.Errorf("access: no password for %s", user)
	}
	return NATSContext{
		Description: description, URL: url, User: user, Password: sec.Password,
		InboxPrefix: InboxPrefix(user), CA: ca,
	}, nil
}

// ContextDescription is the description of a person's natscli context:
// "deadletter amara.okafor, Amara Okafor (operator)".
func ContextDescription(p Person) string {
	if p.DisplayName != "" && p.DisplayName != p.Name {
		return fmt.Sprintf("deadletter %s, %s (%s)", p.Name, p.DisplayName, p.Role)
	}
	return fmt.Sprintf("deadletter %s (%s)", p.Name, p.Role)
}
