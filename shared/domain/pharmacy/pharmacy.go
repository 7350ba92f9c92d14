// Package pharmacy holds the pharmacy domain's rules. (Placeholder: replaced by the full rules.)
package pharmacy

import (
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/envelope"
)

// Checker implements the pharmacy rules.
type Checker struct{}

// Domain returns "pharmacy".
func (Checker) Domain() string { return "pharmacy" }

// Check validates a schema-valid document.
func (Checker) Check(eventType string, doc domain.Doc) (envelope.Envelope, error) {
	return envelope.Envelope{}, codes.Errorf(codes.Internal, "not implemented")
}

// EventType derives the event type from a document.
func (Checker) EventType(doc domain.Doc) (string, error) {
	return "", codes.Errorf(codes.Internal, "not implemented")
}
