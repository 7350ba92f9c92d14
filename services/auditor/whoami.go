package auditor

import (
	"context"

	"github.com/deadletter/deadletter/shared/api"
)

// Whoami answers who the caller is, as the server attached it to the
// request (Nats-Request-Info of the role account's import): a console
// made of one connection per person learns that person's role from it,
// and holds no table of its own. A request from inside the services'
// account carries no such identity and is refused UNAUTHENTICATED.
func (s *Service) Whoami(ctx context.Context, _ struct{}) (api.WhoamiReply, error) {
	id, err := callerOf(ctx)
	if err != nil {
		return api.WhoamiReply{}, api.Wrap(api.ErrUnauthenticated, err, "no authenticated person made this request")
	}
	return api.WhoamiReply{User: id.User, Role: string(id.Role), ReadsPayloads: id.Role.ReadsPayloads()}, nil
}
