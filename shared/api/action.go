package api

import (
	"encoding/json"
	"time"
)

// AuditAction is one governance action as the AUDIT stream keeps it, on
// subjects.AuditAction(Object, ObjectID): a drain paused, resumed or
// cancelled, an approval requested, signed or refused, a policy changed,
// a hold placed or lifted. The actor is an authenticated identity (a
// person's user name and role), or the service's name for what a service
// did on its own (an automatic pause). No payload value goes in.
type AuditAction struct {
	// Action is what happened ("paused", "resumed", "cancelled",
	// "approved", ...).
	Action string `json:"action"`
	// Object is the kind of thing acted on ("drain", "approval",
	// "policy", "hold") and ObjectID its id.
	Object   string `json:"object"`
	ObjectID string `json:"object_id"`
	// Actor and Role name who did it; Role is empty for a service.
	Actor string `json:"actor"`
	Role  string `json:"role,omitempty"`
	// At is when it happened.
	At time.Time `json:"at"`
	// Reason is the stated reason (a person's, or the rule that fired).
	Reason string `json:"reason,omitempty"`
	// Detail is the action's own facts (figures, codes, ids), JSON.
	Detail json.RawMessage `json:"detail,omitempty"`
}
