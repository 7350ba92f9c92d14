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
	subject, _, _ := DecodeEvent(publisher, ev)
	return subject
}

// DecodeEvent decodes one event of a document once (domain.Decode) and
// returns its subject (EventSubject), its event type (the subject's last
// token) and its decoded form (nil when the bytes are not a JSON object
// the strict decoder takes: the gate then reports why).
func DecodeEvent(publisher string, ev []byte) (subject, eventType string, doc domain.Doc) {
	eventType = "other"
	if d, err := domain.Decode(ev); err == nil {
		doc = d
		if et, err := (dscsa.Checker{}).EventType(d); err == nil {
			eventType = et
		}
	}
	if publisher == "" {
		return subjects.Event(dscsa.Name, eventType), eventType, doc
	}
	return subjects.Published(publisher, dscsa.Name, eventType), eventType, doc
}
