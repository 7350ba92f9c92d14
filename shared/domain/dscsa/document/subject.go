package document

import (
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/subjects"
)

// EventSubject is the subject a publisher would have used for one event
// of a document: its bizStep's word (or, when it has none, a valid token,
// so that the gate reports the bizStep's own fault), under the
// document's publisher (subjects.Published; none: subjects.Event). The
// validator checks each event of a document on it, and the auditor
// reconciles it on it.
func EventSubject(publisher string, ev []byte) string {
	token := "other"
	if doc, err := domain.Decode(ev); err == nil {
		if et, err := (dscsa.Checker{}).EventType(doc); err == nil {
			token = et
		}
	}
	if publisher == "" {
		return subjects.Event(dscsa.Name, token)
	}
	return subjects.Published(publisher, dscsa.Name, token)
}
