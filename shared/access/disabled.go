package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// A disabled person (`deadletter people disable`) keeps a user in the
// server configuration, in an account of its own, DisabledAccount, with
// no import, no JetStream and permission to ask one question only: the
// server's own "who am I" (UserInfoSubject). Their password still
// authenticates, so a client that a disabled person runs can learn, from
// the server and nothing else, that the person is disabled (Disabled),
// and say so instead of "needs credentials". Nobody else learns anything
// new: a wrong password is refused as for any user, and the server
// answers UserInfoSubject about the asking connection only
// (docs/security.md, "Disabled people").

// DisabledAccount is the account of disabled people's users: empty of
// services, streams and imports.
const DisabledAccount = "DEADLETTER_DISABLED"

// UserInfoSubject is the server's answer to who the asking connection is
// (its user, account and permissions, and nothing of anyone else's),
// which every account imports from the system account.
const UserInfoSubject = "$SYS.REQ.USER.INFO"

// ErrDisabled: the server authenticated the person, who is disabled.
var ErrDisabled = errors.New("this person is disabled")

// disabledPermissions are what a disabled person's user may do: ask
// UserInfoSubject, and receive the answer in its own inbox.
func disabledPermissions(user string) *permissions {
	return &permissions{Publish: Rule{Allow: []string{UserInfoSubject}}, Subscribe: Rule{Allow: []string{inboxAll(user)}}}
}

// userInfoReply is the part of the server's UserInfoSubject answer read.
type userInfoReply struct {
	Data *struct {
		User    string `json:"user"`
		Account string `json:"account"`
	} `json:"data"`
	Error *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// Disabled asks the server who nc's user is (UserInfoSubject) and reports
// whether it is a disabled person's (in DisabledAccount). A client calls
// it when the server refused it something, to tell a disabled person so;
// ctx bounds the question (an enabled person's role may not be allowed
// to ask it: cancel ctx on the permission violation).
func Disabled(ctx context.Context, nc *nats.Conn) (bool, error) {
	msg, err := nc.RequestWithContext(ctx, UserInfoSubject, nil)
	if err != nil {
		return false, fmt.Errorf("access: who am I: %w", err)
	}
	var r userInfoReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return false, fmt.Errorf("access: who am I: %w", err)
	}
	if r.Error != nil || r.Data == nil {
		return false, fmt.Errorf("access: who am I: the server answered no user")
	}
	return r.Data.Account == DisabledAccount, nil
}
