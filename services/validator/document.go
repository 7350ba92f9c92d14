package validator

import (
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

// documentCheckSubject dry-runs an EPCIS document ("document" is no CBV
// business step, so it names no single-event check).
const documentCheckSubject = "validator.check." + dscsa.Name + ".document"

// documentReply is the answer of validator.check.dscsa.document.
type documentReply struct {
	// OK is true when every event passed the gate.
	OK bool `json:"ok"`
	// Format is "json" or "xml".
	Format string `json:"format"`
	// Events are the document's events in document order.
	Events []documentEvent `json:"events"`
}

// documentEvent is the gate's answer for one event of a document.
type documentEvent struct {
	Index       int                `json:"index"`
	OK          bool               `json:"ok"`
	EventHashID string             `json:"event_hash_id,omitempty"`
	Envelope    *envelope.Envelope `json:"envelope,omitempty"`
	Code        codes.Code         `json:"code,omitempty"`
	Error       string             `json:"error,omitempty"`
}

// handleCheckDocument reads an EPCIS document (JSON, or EPCIS 1.2 / 2.0
// XML) and runs each of its events through the gate on its own, on the
// subject its bizStep names. A document that cannot be read is answered
// with MALFORMED_DOCUMENT.
func (s *Service) handleCheckDocument(r micro.Request) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("document check panicked")
			_ = r.Error(string(codes.Internal), "document check panicked", nil)
		}
	}()
	doc, err := document.Read(r.Data())
	if err != nil {
		_ = r.Error(string(codes.Of(err)), codes.DetailOf(err), nil)
		return
	}
	rep := documentReply{OK: true, Format: doc.Format, Events: make([]documentEvent, len(doc.Events))}
	for i, ev := range doc.Events {
		subject := eventSubject(ev)
		out := documentEvent{Index: i}
		env, err := s.check(subject, ev)
		if err != nil {
			rep.OK = false
			out.Code, out.Error = codes.Of(err), codes.DetailOf(err)
			out.EventHashID = s.gate.Identify(subject, ev).EventHashID
		} else {
			out.OK, out.EventHashID, out.Envelope = true, env.EventHashID, &env
		}
		rep.Events[i] = out
	}
	_ = r.RespondJSON(rep)
}

// eventSubject is the subject a publisher would use for one DSCSA event:
// its bizStep's word, or (when it has none) a valid token, so that the
// gate reports the bizStep's own fault.
func eventSubject(ev []byte) string {
	token := "other"
	if doc, err := gate.Decode(ev); err == nil {
		if et, err := (dscsa.Checker{}).EventType(doc); err == nil {
			token = et
		}
	}
	return subjects.Event(dscsa.Name, token)
}
