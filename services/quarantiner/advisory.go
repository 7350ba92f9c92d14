package quarantiner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// advisory is the part of a JetStream consumer advisory deadletter reads
// (io.nats.jetstream.advisory.v1.max_deliver and .terminated).
type advisory struct {
	Type       string    `json:"type"`
	ID         string    `json:"id"`
	Timestamp  time.Time `json:"timestamp"`
	Stream     string    `json:"stream"`
	Consumer   string    `json:"consumer"`
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries uint64    `json:"deliveries"`
	Reason     string    `json:"reason"`
}

// limitsDeletion are the reasons nats-server gives when a message pending
// on a consumer is removed by the stream's limits (e.g. EVENTS' max age).
var limitsDeletion = map[string]bool{
	"Message deleted by stream limits":   true,
	"Unacknowledged message was deleted": true,
}

func decodeFailure(b []byte) (record.Failure, error) {
	var f record.Failure
	if err := json.Unmarshal(b, &f); err != nil {
		return record.Failure{}, fmt.Errorf("failure report: %w", err)
	}
	if f.Stream == "" || f.Code == "" && (f.Replayed == nil || f.DLQID == "" || f.RedriveCount == 0) {
		return record.Failure{}, errors.New("failure report lacks stream or code")
	}
	return f, nil
}

// fromMaxDeliveries builds the failure of an event that exhausted its
// deliveries: the original from EVENTS by sequence and its attempt history.
func (s *Service) fromMaxDeliveries(ctx context.Context, b []byte) (record.Failure, error) {
	var a advisory
	if err := json.Unmarshal(b, &a); err != nil {
		return record.Failure{}, fmt.Errorf("advisory: %w", err)
	}
	f, err := s.original(ctx, a)
	if err != nil {
		return record.Failure{}, err
	}
	f.Class = record.ClassExhausted
	switch n := len(f.Attempts); {
	case f.Code != "": // the original is gone, or no longer passes the gate
	case n > 0:
		f.Code, f.Detail = f.Attempts[n-1].Code, f.Attempts[n-1].Reason
	default:
		f.Code, f.Detail = codes.MaxDeliveriesExceeded, fmt.Sprintf("%d deliveries without an acknowledgement", a.Deliveries)
	}
	return f, nil
}

// fromTerminated examines a message-terminated advisory. The validator
// terminates an event only after storing its failure report, with the error
// code as reason: those are skipped. A message terminated by anyone else
// (another reason) is quarantined once the grace period has passed.
func (s *Service) fromTerminated(ctx context.Context, m jetstream.Msg) (f record.Failure, skip bool, delay time.Duration, err error) {
	var a advisory
	if err := json.Unmarshal(m.Data(), &a); err != nil {
		return record.Failure{}, false, 0, fmt.Errorf("advisory: %w", err)
	}
	if codes.IsKnown(codes.Code(a.Reason)) {
		return record.Failure{}, true, 0, nil
	}
	if limitsDeletion[a.Reason] {
		// The event was still being retried when the stream's limits
		// removed it: the pointer is all that is left, and it is evidence.
		f, err = s.original(ctx, a)
		if err != nil {
			return record.Failure{}, false, 0, err
		}
		f.Class = record.ClassExhausted
		if f.Code == "" {
			f.Code = codes.TerminatedExternally
			f.Detail = "terminated by the server: " + a.Reason
		}
		return f, false, 0, nil
	}
	if wait := s.cfg.TerminatedGrace - s.now().Sub(a.Timestamp); wait > 0 {
		return record.Failure{}, false, wait, nil
	}
	f, err = s.original(ctx, a)
	if err != nil {
		return record.Failure{}, false, 0, err
	}
	f.Class = record.ClassValidation
	f.Code = codes.TerminatedExternally
	f.Detail = "terminated by consumer " + a.Consumer + " without a failure report"
	return f, false, 0, nil
}

// original fetches the advisory's message from its stream. When it is gone,
// the failure still carries everything the advisory had, with code
// ORIGINAL_UNAVAILABLE, and the loss is raised loudly.
func (s *Service) original(ctx context.Context, a advisory) (record.Failure, error) {
	f := record.Failure{
		Stream:     a.Stream,
		Seq:        a.StreamSeq,
		Deliveries: a.Deliveries,
		FailedAt:   a.Timestamp.UTC(),
		Domain:     subjects.UnknownDomain,
	}
	if a.Stream != subjects.EventsStream {
		return record.Failure{}, fmt.Errorf("advisory for stream %q", a.Stream)
	}
	m, err := s.events.GetMsg(ctx, a.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		s.metrics.originalUnavailable.Inc()
		s.log.Error("ORIGINAL_UNAVAILABLE: exhausted event no longer in EVENTS; quarantining the pointer",
			"stream", a.Stream, "seq", a.StreamSeq, "consumer", a.Consumer, "deliveries", a.Deliveries)
		f.Code = codes.OriginalUnavailable
		f.Detail = fmt.Sprintf("event %s/%d expired before it was quarantined (consumer %s, %d deliveries)",
			a.Stream, a.StreamSeq, a.Consumer, a.Deliveries)
		if h := s.readHistory(ctx, a.StreamSeq); h.IdempotencyKey != "" {
			// The validator's history still names the lost event.
			f.Subject, f.Domain, f.Attempts = h.Subject, h.Domain, h.Attempts
			f.Envelope = &envelope.Envelope{Domain: h.Domain, IdempotencyKey: h.IdempotencyKey}
		}
		return f, nil
	}
	if err != nil {
		return record.Failure{}, fmt.Errorf("fetch original %d: %w", a.StreamSeq, err)
	}
	f.Subject = m.Subject
	f.Published = m.Time.UTC()
	f.Headers = m.Header
	f.Payload = m.Data
	f.Domain = subjects.DomainOf(m.Subject, s.gate.Domains())
	f.Attempts = s.readHistory(ctx, a.StreamSeq).Attempts
	f.DLQID, f.RedriveCount = envelope.RedriveOf(m.Subject, m.Header)
	if env, err := s.gate.Check(m.Subject, m.Data); err == nil {
		f.Envelope = &env
	} else {
		// It never passed the gate (the validator could not store its
		// failure report until its deliveries ran out), or the rules
		// changed since it was retried: say so, and name it as the
		// validator names an event that fails the gate, by its payload
		// (record.DLQIDFor), so that its report lands in the same chain.
		f.Code, f.Detail = codes.Of(err), codes.DetailOf(err)
		id := s.gate.Identify(m.Subject, m.Data)
		f.Envelope = &id
	}
	return f, nil
}

func (s *Service) readHistory(ctx context.Context, seq uint64) record.History {
	e, err := s.attempts.Get(ctx, strconv.FormatUint(seq, 10))
	if err != nil {
		return record.History{}
	}
	var h record.History
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		s.log.Warn("attempt history unreadable", "seq", seq)
		return record.History{}
	}
	return h
}
