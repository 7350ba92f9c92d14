package gate

import "github.com/deadletter/deadletter/shared/domain"

// Decode parses a payload as exactly one UTF-8 JSON object, as the gate
// does before any rule: it is domain.Decode (see there for its codes),
// named here for the callers that check events.
func Decode(data []byte) (domain.Doc, error) { return domain.Decode(data) }
