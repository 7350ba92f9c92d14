package validator

import (
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
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
	// SHA256 is the hex SHA-256 of the document's bytes.
	SHA256 string `json:"sha256"`
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
	rep := documentReply{OK: true}
	info, err := document.Scan(r.Data(), func(ev document.Event) error {
		subject := document.EventSubject("", ev.Data)
		out := documentEvent{Index: ev.Index}
		_, env, err := s.check(subject, ev.Data)
		if err != nil {
			rep.OK = false
			out.Code, out.Error = codes.Of(err), codes.DetailOf(err)
			out.EventHashID = s.gate.Identify(subject, ev.Data).EventHashID
		} else {
			out.OK, out.EventHashID, out.Envelope = true, env.EventHashID, &env
		}
		rep.Events = append(rep.Events, out)
		return nil
	})
	if err != nil {
		_ = r.Error(string(codes.Of(err)), codes.DetailOf(err), nil)
		return
	}
	rep.Format, rep.SHA256 = info.Format, info.SHA256
	if rep.Events == nil {
		rep.Events = []documentEvent{}
	}
	_ = r.RespondJSON(rep)
}
