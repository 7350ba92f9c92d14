package validator

import (
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// delivery is one EVENTS message being handled: the message, its
// metadata, its publisher and, for a replay, the chain it replays and how
// many redrives that chain had.
type delivery struct {
	m         jetstream.Msg
	meta      *jetstream.MsgMetadata
	publisher string
	dlqID     string
	redrives  int
}

// candidate is one event a delivery yields: the delivery's own payload
// for a single event, or one event of a document (its subject as the
// gate checked it, its bytes, and its place in the document on env). Its
// domain is the one its failure report names; dlqID and redrives name the
// chain a single event replays (an event of a document carries none).
type candidate struct {
	subject  string
	domain   string
	data     []byte
	env      *envelope.Envelope
	dlqID    string
	redrives int
}

// single is the candidate of a delivery of one event.
func (d delivery) single(domain string, env *envelope.Envelope) candidate {
	return candidate{subject: d.m.Subject(), domain: domain, data: d.m.Data(), env: env, dlqID: d.dlqID, redrives: d.redrives}
}

// result is what a commit attempt of a candidate comes to.
type result int

const (
	// resultCommitted: LEDGER holds the event, written by this attempt.
	resultCommitted result = iota
	// resultDuplicate: the same content was committed before.
	resultDuplicate
	// resultRetry: a transient failure with deliveries left.
	resultRetry
	// resultExhausted: a transient failure on the last delivery.
	resultExhausted
	// resultRejected: a failure no retry mends (quarantined).
	resultRejected
)

// classify is the one place a commit attempt's error becomes its result;
// last reports the delivery is the last one that tries the event.
func classify(err error, last bool) result {
	switch {
	case err == nil:
		return resultCommitted
	case errors.Is(err, ErrAlreadyCommitted):
		return resultDuplicate
	case codes.Of(err).Transient() && last:
		return resultExhausted
	case codes.Of(err).Transient():
		return resultRetry
	}
	return resultRejected
}

// cause is what a failure report says of why: the code, its detail and,
// for an IDEMPOTENCY_CONFLICT, the conflict.
type cause struct {
	code     codes.Code
	detail   string
	conflict *record.Conflict
}

// causeOf is the cause of err.
func causeOf(err error) cause {
	return cause{code: codes.Of(err), detail: codes.DetailOf(err), conflict: conflictOf(err)}
}

// attempt is the attempt of delivery d at stage that failed with c, at now.
func (d delivery) attempt(stage string, c cause, now time.Time) record.Attempt {
	return record.Attempt{At: now, Stage: stage, Code: c.code, Reason: c.detail, Delivery: d.meta.NumDelivered}
}

// report is the part of every report to FAILURES a delivery gives: where
// the message is stored, when it was published, how often delivered, and
// the time of the report.
func (d delivery) report(now time.Time) record.Failure {
	return record.Failure{
		Stream: d.meta.Stream, Seq: d.meta.Sequence.Stream, Deliveries: d.meta.NumDelivered,
		Published: d.meta.Timestamp.UTC(), FailedAt: now,
	}
}

// failureOf is the one builder of a candidate's failure report: the
// delivery's part (report), the candidate's subject, domain, verbatim
// bytes, envelope and replayed chain, the message's headers, and the
// failure's class, cause and attempts.
func failureOf(d delivery, c candidate, class record.Class, why cause, attempts []record.Attempt, now time.Time) record.Failure {
	f := d.report(now)
	f.Class, f.Code, f.Detail, f.Conflict = class, why.code, why.detail, why.conflict
	f.Domain, f.Subject, f.Headers, f.Payload, f.Envelope = c.domain, c.subject, d.m.Headers(), c.data, c.env
	f.DLQID, f.RedriveCount, f.Attempts = c.dlqID, c.redrives, attempts
	return f
}

// settlement is how a delivery ends: acknowledged (every event it holds
// committed, found committed, or reported), redelivered after a delay
// (a retry), or terminated with the code its stored failure report names.
type settlement struct {
	kind  settleKind
	delay time.Duration
	code  codes.Code
}

type settleKind int

const (
	settleAck settleKind = iota
	settleRetry
	settleTerm
)

// acked, retryAfter and terminated are the three settlements.
func acked() settlement                     { return settlement{kind: settleAck} }
func retryAfter(d time.Duration) settlement { return settlement{kind: settleRetry, delay: d} }
func terminated(code codes.Code) settlement { return settlement{kind: settleTerm, code: code} }

// settle is the one place a delivery is settled with the server. A
// settlement the server does not get is logged: an unacknowledged event
// is redelivered and then found committed or reported (a duplicate, or
// its report de-duplicated), a lost nak or term waits for AckWait.
func (s *Service) settle(d delivery, how settlement) {
	var err error
	switch how.kind {
	case settleAck:
		err = d.m.Ack()
	case settleRetry:
		err = d.m.NakWithDelay(how.delay)
	case settleTerm:
		// The code as the reason: the quarantiner's terminated-advisory
		// listener skips what a stored report already covers.
		err = d.m.TermWithReason(string(how.code))
	}
	if err != nil {
		s.log.Warn("delivery not settled; the server redelivers it", "seq", d.meta.Sequence.Stream, "settlement", how.kind.String(), "err", err)
	}
}

func (k settleKind) String() string {
	switch k {
	case settleAck:
		return "ack"
	case settleRetry:
		return "retry"
	}
	return "term"
}
