package replay

import (
	"errors"
	"fmt"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// ErrNoEventsSubject: a chain's original was not stored on an events
// subject, so no replay subject can be derived from it.
var ErrNoEventsSubject = errors.New("redriver: source subject is not an events subject")

// Target returns the domain and event type a replay of the chain of state
// st takes when its effective payload is payload (corrected: payload is a
// correction). An original replays on its own subject's domain and type.
// A correction replays on the event type its payload names, as the
// domain's checker reads it (a DSCSA bizStep, an FSMA CTE type, a pharmacy
// event type): a correction may change what selects the event's subject,
// and is then checked and replayed on the subject it names. A correction
// that names no type the checker reads keeps the original's (the gate
// then says why). ErrNoEventsSubject when the original's subject is no
// events subject.
func (r *Replayer) Target(st record.State, payload []byte, corrected bool) (domain, eventType string, err error) {
	dom, typ, ok := subjects.ParseEvent(st.SourceSubject)
	if !ok {
		return "", "", ErrNoEventsSubject
	}
	if !corrected {
		return dom, typ, nil
	}
	c, ok := r.checkers[st.Domain]
	if !ok {
		return dom, typ, nil
	}
	doc, err := gate.Decode(payload)
	if err != nil {
		return dom, typ, nil
	}
	if t, err := eventTypeOf(c, doc); err == nil && t != "" && subjects.ValidToken(t) {
		return st.Domain, t, nil
	}
	return dom, typ, nil
}

// eventTypeOf is c.EventType(doc), a panic in a domain's rules an error.
func eventTypeOf(c gate.Checker, doc domain.Doc) (t string, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = "", fmt.Errorf("redriver: event type rules panicked")
		}
	}()
	return c.EventType(doc)
}

// Check dry-runs a replay of the chain of state st whose effective payload
// is payload (corrected: a correction): the gate's verdict on the subject
// Target names, as the validator will check the replay. A whole EPCIS
// document is checked event by event, each on the subject its bizStep
// names (as the validator reads a document); the first event refused is
// the verdict. Only Subject, Domain, EventType, OriginalEventType, OK,
// Code, Detail and Document are set. It never panics on any payload.
func (r *Replayer) Check(st record.State, payload []byte, corrected bool) (api.RedriveCheck, error) {
	dom, typ, err := r.Target(st, payload, corrected)
	if err != nil {
		return api.RedriveCheck{}, err
	}
	_, orig, _ := subjects.ParseEvent(st.SourceSubject)
	out := api.RedriveCheck{Subject: subjects.Event(dom, typ), Domain: dom, EventType: typ, OriginalEventType: orig}
	verdict := func(err error) {
		out.OK = err == nil
		if err != nil {
			out.Code, out.Detail = string(codes.Of(err)), codes.DetailOf(err)
		}
	}
	if !subjects.IsDocument(out.Subject, dscsa.Name) {
		verdict(r.gateCheck(out.Subject, payload))
		return out, nil
	}
	out.Document = true
	var first error
	_, err = document.Scan(payload, func(ev document.Event) error {
		if first != nil {
			return nil
		}
		if err := r.gateCheck(document.EventSubject("", ev.Data), ev.Data); err != nil {
			first = codes.Wrap(codes.Of(err), err, fmt.Sprintf("the document's event at index %d: %s", ev.Index, codes.DetailOf(err)))
		}
		return nil
	})
	if err == nil {
		err = first
	}
	verdict(err)
	return out, nil
}

// gateCheck is the gate's check of data on subject, a panic in a domain's
// rules an INTERNAL error.
func (r *Replayer) gateCheck(subject string, data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = codes.Errorf(codes.Internal, "validation panicked")
		}
	}()
	_, err = r.cfg.Gate.Check(subject, data)
	return err
}
