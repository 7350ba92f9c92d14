// Package trail writes governance actions to the AUDIT stream, the WORM
// audit trail: one api.AuditAction per action, on
// subjects.AuditAction(object, id), de-duplicated by a message id the
// writer chooses, so a retried write is stored once. Drains (pauses,
// resumes, cancels), approvals and legal holds all write through it.
package trail

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Publish stores act in AUDIT on subjects.AuditAction(act.Object,
// act.ObjectID) with Nats-Msg-Id msgID and waits for the server's
// acknowledgement; it returns the stored sequence (that of the first
// copy, for a duplicate).
func Publish(ctx context.Context, js jetstream.JetStream, act api.AuditAction, msgID string) (uint64, error) {
	b, err := json.Marshal(act)
	if err != nil {
		return 0, fmt.Errorf("trail: encode %s of %s %s: %w", act.Action, act.Object, act.ObjectID, err)
	}
	m := nats.NewMsg(subjects.AuditAction(act.Object, act.ObjectID))
	m.Data = b
	m.Header.Set(envelope.MsgID, msgID)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("trail: store %s of %s %s: %w", act.Action, act.Object, act.ObjectID, err)
	}
	return ack.Sequence, nil
}
