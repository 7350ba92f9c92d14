package redriver

import (
	"errors"
	"slices"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

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

// Roles allowed on the redriver's endpoints: changes (drains, cancels,
// redrives, corrections, releases) need an operator; reads of drain
// states any person role but a publisher.
var (
	changeRoles = []access.Role{access.RoleOperator}
	readRoles   = []access.Role{access.RoleViewer, access.RoleOperator, access.RoleInspector, access.RoleApprover, access.RolePolicy}
)

// anonymousActor is the actor of an anonymous request that names none.
const anonymousActor = "anonymous"

// caller returns the identity a request is served as: the caller the
// server attached to it (access.CallerOf), who must hold one of roles.
// Without one, with Config.AllowAnonymous, the request is served as an
// operator named by the request's free-text actor (or "anonymous"); else
// it is refused UNAUTHENTICATED. A refused request is answered here.
func (s *Service) caller(r micro.Request, actor string, roles []access.Role) (access.Identity, bool) {
	id, err := access.CallerOf(nats.Header(r.Headers()))
	switch {
	case err == nil:
	case errors.Is(err, access.ErrNoCaller) && s.cfg.AllowAnonymous:
		if actor == "" {
			actor = anonymousActor
		}
		return access.Identity{User: actor, Role: access.RoleOperator}, true
	default:
		s.log.Warn("request refused", "endpoint", r.Subject(), "code", CodeUnauthenticated)
		_ = r.Error(CodeUnauthenticated, "the request carries no authenticated caller: call through a person's account", nil)
		return access.Identity{}, false
	}
	if !slices.Contains(roles, id.Role) {
		s.log.Warn("request refused", "endpoint", r.Subject(), "code", CodeForbidden, "user", id.User, "role", string(id.Role))
		_ = r.Error(CodeForbidden, "role "+string(id.Role)+" may not call "+r.Subject(), nil)
		return access.Identity{}, false
	}
	return id, true
}

// guard refuses a request whose reply subject is no inbox
// (endpoint.CheckReply: none, $JS.ACK. of a consumer's delivery, or any
// subject a stream or service listens on) without answering it, since an
// answer would go where the requester chose, and counts and logs it with
// code BAD_REQUEST; it serves the others with h.
func (s *Service) guard(h micro.HandlerFunc) micro.HandlerFunc {
	return func(r micro.Request) {
		if err := endpoint.CheckReply(r.Reply()); err != nil {
			s.metrics.refused.WithLabelValues(api.ErrBadRequest).Inc()
			s.log.Warn("request refused", "endpoint", r.Subject(), "code", api.ErrBadRequest, "err", err)
			return
		}
		h(r)
	}
}
