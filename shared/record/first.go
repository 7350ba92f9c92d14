package record

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

// UnknownDomain is the domain of an event whose domain is not known.
const UnknownDomain = subjects.UnknownDomain

// FromFailure builds the unsealed first record (Index 0, KindQuarantined) of
// the chain of the failed event f, written at now. The record owns its
// data: headers and attempts are copied, and every time is in UTC. Seal it
// before storing.
func FromFailure(f Failure, now time.Time) Record {
	r := Record{
		SchemaVersion: SchemaVersion,
		DLQID:         DLQIDFor(f),
		Index:         0,
		Kind:          KindQuarantined,
		Domain:        domainOf(f),
		Class:         f.Class,
		ErrorCode:     f.Code,
		ErrorDetail:   f.Detail,
		Headers:       cloneHeaders(f.Headers),
		SourceSubject: f.Subject,
		SourceStream:  f.Stream,
		SourceSeq:     f.Seq,
		Attempts:      utcAttempts(f.Attempts),
		DeliveryCount: f.Deliveries,
		RedriveCount:  f.RedriveCount,
		FirstSeen:     f.Published.UTC(),
		QuarantinedAt: now.UTC(),
	}
	if e := f.Envelope; e != nil {
		r.IdempotencyKey, r.OrderingKey, r.PartyID = e.IdempotencyKey, e.OrderingKey, e.PartyID
		r.EventHashID = e.EventHashID
		if e.Document != nil {
			d := *e.Document
			r.Document = &d
		}
		r.Identifiers = ListedIdentifiers(r.Domain, e)
		if !e.EventTime.IsZero() {
			t := e.EventTime.UTC()
			r.EventTime = &t
		}
	}
	r.Publisher = envelope.PublisherOf(f.Subject, f.Headers)
	r.TraceID, r.SpanID = ParseTraceparent(header(f.Headers, envelope.Traceparent))
	if f.Conflict != nil {
		c := *f.Conflict
		r.Conflict = &c
	}
	if f.Payload != nil {
		// An original that could not be fetched has no payload, not an empty one.
		r.Payload = NewPayload(f.Payload)
	}
	return r
}

// MaxListedIdentifier bounds the length in bytes of one value of
// Record.Identifiers: a longer one (never a valid identifier) is left
// out.
const MaxListedIdentifier = 256

// ListedIdentifiers returns the identifiers of e that the first record of
// an event of domain dom keeps (Record.Identifiers): the members of the
// domain's allow-list (domain.Spec.Listed) that e's Identifiers (or, for "event_type", its
// EventType) give, non-empty, valid UTF-8 and at most
// MaxListedIdentifier bytes; nil when none.
func ListedIdentifiers(dom string, e *envelope.Envelope) map[string]string {
	if e == nil {
		return nil
	}
	spec, _ := registry.Lookup(dom)
	var out map[string]string
	for _, name := range spec.Listed {
		v := e.Identifiers[name]
		if name == "event_type" {
			v = e.EventType
		}
		if v == "" || len(v) > MaxListedIdentifier || !utf8.ValidString(v) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(spec.Listed))
		}
		out[name] = v
	}
	return out
}

// DLQIDFor returns the dlq id of the failed event f: f.DLQID when set (a
// failed redrive stays in its chain); for an event that failed validation
// (a partial envelope), domain.Key(domain, "payload", subject, SHA-256 of
// the bytes), so the same bytes published again land in the same chain;
// for an idempotency conflict, ConflictDLQID; else the event's idempotency key when it passed the gate; else a key derived from the source stream and sequence,
// domain.Key(domain, "source", stream, seq), safe as a NATS subject token.
func DLQIDFor(f Failure) string {
	switch {
	case f.DLQID != "":
		return f.DLQID
	case f.Envelope != nil && f.Envelope.Partial:
		return PayloadDLQID(domainOf(f), f.Subject, f.Payload)
	case f.Conflict != nil && f.Envelope != nil && f.Envelope.IdempotencyKey != "":
		return ConflictDLQID(domainOf(f), f.Envelope.IdempotencyKey, f.Conflict.ContentHash)
	case f.Envelope != nil && f.Envelope.IdempotencyKey != "":
		return f.Envelope.IdempotencyKey
	}
	return domain.Key(domainOf(f), "source", f.Stream, strconv.FormatUint(f.Seq, 10))
}

// ConflictDLQID is the dlq id of an event whose idempotency key is
// committed with other content (IDEMPOTENCY_CONFLICT):
// domain.Key(domain, "conflict", key, content hash). Not the key itself,
// which may name a chain of the committed event already: each conflicting
// content gets a chain of its own, and a retry of the same content lands
// in the same one.
func ConflictDLQID(dom, key, contentHash string) string {
	return domain.Key(dom, "conflict", key, contentHash)
}

// PayloadDLQID is the dlq id of an event that failed validation, published
// on subject with the given bytes: domain.Key(domain, "payload", subject,
// hex SHA-256 of the bytes). The same bytes published again land in the
// same chain; different bytes never share one.
func PayloadDLQID(dom, subject string, payload []byte) string {
	sum := sha256.Sum256(payload)
	return domain.Key(dom, "payload", subject, hex.EncodeToString(sum[:]))
}

// domainOf returns f's domain, falling back to the envelope's and then to
// UnknownDomain.
func domainOf(f Failure) string {
	switch {
	case f.Domain != "":
		return f.Domain
	case f.Envelope != nil && f.Envelope.Domain != "":
		return f.Envelope.Domain
	}
	return UnknownDomain
}

// cloneHeaders deep-copies h (nil stays nil).
func cloneHeaders(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	c := maps.Clone(h)
	for k, v := range c {
		c[k] = slices.Clone(v)
	}
	return c
}

// utcAttempts copies attempts with their times in UTC (nil stays nil).
func utcAttempts(attempts []Attempt) []Attempt {
	if attempts == nil {
		return nil
	}
	c := slices.Clone(attempts)
	for i := range c {
		c[i].At = c[i].At.UTC()
	}
	return c
}

// header returns the first value of header key in h, matching the exact
// key first and then case-insensitively.
func header(h map[string][]string, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if strings.EqualFold(k, key) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// ParseTraceparent returns the trace id and parent (span) id of a W3C
// trace-context traceparent value "version-traceid-spanid-flags", or two
// empty strings when it is absent or malformed: lowercase hex fields of
// 2-32-16-2 digits, version not "ff", ids not all zeros, version 00 with
// nothing after the flags and later versions with only "-..." after them.
func ParseTraceparent(v string) (traceID, spanID string) {
	v = strings.TrimSpace(v)
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return "", ""
	}
	version, trace, span, flags := v[0:2], v[3:35], v[36:52], v[53:55]
	if !lowerHex(version) || version == "ff" || !lowerHex(flags) ||
		!lowerHex(trace) || allZero(trace) || !lowerHex(span) || allZero(span) {
		return "", ""
	}
	if rest := v[55:]; (version == "00" && rest != "") || (rest != "" && rest[0] != '-') {
		return "", ""
	}
	return trace, span
}

// lowerHex reports whether s is made of lowercase hex digits only.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// allZero reports whether s is made of '0' only.
func allZero(s string) bool {
	return strings.Trim(s, "0") == ""
}
