package redriver

import (
	"errors"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// Error codes of refused callers (shared/api).
const (
	// CodeUnauthenticated is api.ErrUnauthenticated.
	CodeUnauthenticated = api.ErrUnauthenticated
	// CodeForbidden is api.ErrForbidden.
	CodeForbidden = api.ErrForbidden
)

// anonymousActor is the actor of an anonymous request that names none.
const anonymousActor = "anonymous"

// caller returns the identity a request is served as: the caller the
// server attached to it (access.CallerOf), whose role the endpoint table
// allows on the request's endpoint (access.Allowed).
// Without one, with Config.AllowAnonymous, the request is served as an
// operator named by the request's free-text actor (or "anonymous"); else
// it is refused UNAUTHENTICATED (an *api.Error).
func (s *Service) caller(m endpoint.Meta, actor string) (access.Identity, error) {
	id, err := m.Caller()
	switch {
	case err == nil:
	case errors.Is(err, access.ErrNoCaller) && s.cfg.AllowAnonymous:
		if actor == "" {
			actor = anonymousActor
		}
		return access.Identity{User: actor, Role: access.RoleOperator}, nil
	default:
		return access.Identity{}, api.Wrap(CodeUnauthenticated, err, "the request carries no authenticated caller: call through a person's account")
	}
	if !access.Allowed(m.Subject, id.Role) {
		s.log.Warn("request refused", "endpoint", m.Subject, "code", CodeForbidden, "user", id.User, "role", string(id.Role))
		return access.Identity{}, api.Errorf(CodeForbidden, "role %s may not call %s", id.Role, m.Subject)
	}
	return id, nil
}
