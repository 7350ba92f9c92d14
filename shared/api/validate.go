package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/record"
)

// Bounds of request members.
const (
	// MaxLimit is the largest page of audit.list.
	MaxLimit = 1000
	// MaxSamples is the largest number of samples per triage group.
	MaxSamples = 1000
	// MaxFilterCodes and MaxFilterIDs bound a drain filter's lists.
	MaxFilterCodes = 100
	MaxFilterIDs   = 10000
	// MaxActor and MaxReason bound a person's free text.
	MaxActor  = 256
	MaxReason = 2048
)

// Domains lists the event domains a request may name: the one reference
// of the endpoints' requests to the domain list.
func Domains() []string { return registry.Names() }

// knownDomain reports whether d is a domain of Domains or
// record.UnknownDomain (the domain of events whose subject names none).
func knownDomain(d string) bool { return d == record.UnknownDomain || slices.Contains(Domains(), d) }

// checkDomain refuses a domain that is set and unknown.
func checkDomain(field, d string) error {
	if d != "" && !knownDomain(d) {
		return BadField(field, "not a known domain: use %s", orList(append(Domains(), record.UnknownDomain)))
	}
	return nil
}

// checkClass refuses a class that is set and none of classes.
func checkClass(field, c string, classes ...record.Class) error {
	if c != "" && !slices.Contains(classes, record.Class(c)) {
		names := make([]string, len(classes))
		for i, c := range classes {
			names[i] = string(c)
		}
		return BadField(field, "not a known class: use %s", orList(names))
	}
	return nil
}

// orList lists choices for people: "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// checkCode refuses an error code that is set and unknown (codes.IsKnown).
func checkCode(field, c string) error {
	if c != "" && !codes.IsKnown(codes.Code(c)) {
		return BadField(field, "not a known error code")
	}
	return nil
}

// checkRange refuses from after to (both set).
func checkRange(fromField, toField string, from, to time.Time) error {
	if !from.IsZero() && !to.IsZero() && from.After(to) {
		return BadField(toField, "must not be before %s", fromField)
	}
	return nil
}

// Validate checks a reconcile request's domain, range, grace and max_ids.
func (r ReconcileRequest) Validate() error {
	if err := checkDomain("domain", r.Domain); err != nil {
		return err
	}
	if err := checkRange("from", "to", r.From, r.To); err != nil {
		return err
	}
	if r.Grace != "" {
		if d, err := time.ParseDuration(r.Grace); err != nil || d < 0 {
			return BadField("grace", "not a duration: use 30s, 5m or 1h")
		}
	}
	if r.MaxIDs < 0 {
		return BadField("max_ids", "must not be negative")
	}
	return nil
}

// Validate checks a list request's enums and ranges.
func (r ListRequest) Validate() error {
	if err := checkDomain("domain", r.Domain); err != nil {
		return err
	}
	if err := checkClass("class", r.Class, record.ClassValidation, record.ClassExhausted, record.ClassPoison); err != nil {
		return err
	}
	if err := checkCode("code", r.Code); err != nil {
		return err
	}
	switch r.Status {
	case "", string(record.StatusOpen), string(record.StatusRedriving), string(record.StatusResolved), string(record.StatusPoison):
	default:
		return BadField("status", "not a status (open, redriving, resolved or poison)")
	}
	if err := checkRange("from", "to", r.From, r.To); err != nil {
		return err
	}
	if r.Limit < 0 || r.Limit > MaxLimit {
		return BadField("limit", "must be 1..%d (0: the default)", MaxLimit)
	}
	if r.Document != "" && !validSHA256(r.Document) {
		return BadField("document", "is not a document's SHA-256 (64 lowercase hex digits)")
	}
	return checkIdentifiers("", r.IdentifierFilters())
}

// validSHA256 reports whether s is a lowercase hex SHA-256.
func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Validate checks a get request's domain, and that a payload read says
// why.
func (r GetRequest) Validate() error {
	if err := checkDomain("domain", r.Domain); err != nil {
		return err
	}
	if r.IncludePayload && strings.TrimSpace(r.Reason) == "" {
		return BadField("reason", "is required to read payloads")
	}
	return checkText("", r.Reason)
}

// Validate checks an export filter's domain, status and time range.
func (f ExportFilter) Validate() error {
	if err := checkDomain("filter.domain", f.Domain); err != nil {
		return err
	}
	switch f.Status {
	case "", string(record.StatusOpen), string(record.StatusRedriving), string(record.StatusResolved), string(record.StatusPoison):
	default:
		return BadField("filter.status", "not a status (open, redriving, resolved or poison)")
	}
	if err := checkIdentifiers("filter", f.Search().IdentifierFilters()); err != nil {
		return err
	}
	return checkRange("filter.from", "filter.to", f.From, f.To)
}

// Validate checks an export request's filter, reason and bounds.
func (r ExportRequest) Validate() error {
	if err := r.Filter.Validate(); err != nil {
		return err
	}
	if strings.TrimSpace(r.Reason) == "" {
		return BadField("reason", "is required: an export reads payloads")
	}
	if r.Limit < 0 || r.Limit > MaxLimit {
		return BadField("limit", "must be 1..%d (0: the default)", MaxLimit)
	}
	return checkText("", r.Reason)
}

// Validate checks an access listing's range and page size.
func (r AccessRequest) Validate() error {
	if err := checkRange("since", "until", r.Since, r.Until); err != nil {
		return err
	}
	if r.Limit < 0 || r.Limit > MaxLimit {
		return BadField("limit", "must be 1..%d (0: the default)", MaxLimit)
	}
	return checkText(r.User, "")
}

// Validate checks a groups request's domain and sample count.
func (r GroupsRequest) Validate() error {
	if err := checkDomain("domain", r.Domain); err != nil {
		return err
	}
	if r.Samples < 0 || r.Samples > MaxSamples {
		return BadField("samples", "must be 0..%d", MaxSamples)
	}
	if r.By != "" && r.By != GroupByDocument {
		return BadField("by", "groups are by fingerprint (absent) or by %q", GroupByDocument)
	}
	return nil
}

// Validate checks a verify request's bounds and its anchor's pairing.
func (r VerifyRequest) Validate() error {
	switch {
	case r.MaxProblems < 0:
		return BadField("max_problems", "must not be negative")
	case r.Anchor != "" && r.PubKey == "":
		return BadField("pubkey", "is required with an anchor")
	case r.Anchor == "" && r.PubKey != "":
		return BadField("anchor", "is required with a pubkey")
	}
	return nil
}

// Validate checks a drain filter's domain, classes, error codes, time
// range and bounds (the dlq ids' form is the redriver's to check).
func (f DrainFilter) Validate() error {
	if err := checkDomain("filter.domain", f.Domain); err != nil {
		return err
	}
	for _, c := range f.Classes {
		if record.Class(c) == record.ClassPoison {
			return BadField("filter.classes", "poison events are never drained: release them first")
		}
		if err := checkClass("filter.classes", c, record.ClassExhausted, record.ClassValidation); err != nil {
			return err
		}
	}
	if len(f.ErrorCodes) > MaxFilterCodes {
		return BadField("filter.error_codes", "at most %d error codes", MaxFilterCodes)
	}
	for _, c := range f.ErrorCodes {
		if err := checkCode("filter.error_codes", c); err != nil {
			return err
		}
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		return BadField("filter.until", "must be after filter.since")
	}
	if len(f.DLQIDs) > MaxFilterIDs {
		return BadField("filter.dlq_ids", "at most %d dlq ids", MaxFilterIDs)
	}
	if f.Limit < 0 {
		return BadField("filter.limit", "must not be negative")
	}
	return nil
}

// Validate checks a drain.start request's filter and bounds (the
// redriver checks max_concurrency against its own ceiling).
func (r DrainStartRequest) Validate() error {
	if err := r.Filter.Validate(); err != nil {
		return err
	}
	switch {
	case r.RatePerSecond != nil && *r.RatePerSecond < 0:
		return BadField("rate_per_second", "must not be negative (0: no ceiling)")
	case r.RatePerSecond != nil && *r.RatePerSecond > 1e6:
		return BadField("rate_per_second", "is at most 1000000 (0: no ceiling)")
	case r.Burst < 0 || r.Burst > 100000:
		return BadField("burst", "must be 0..100000")
	case r.MaxConcurrency < 0:
		return BadField("max_concurrency", "must not be negative")
	case r.Canary < 0 || r.Canary > MaxCanary:
		return BadField("canary", "must be 0..%d", MaxCanary)
	case r.MaxFailureRate != nil && !(*r.MaxFailureRate >= 0 && *r.MaxFailureRate <= 1):
		return BadField("max_failure_rate", "must be in [0, 1]")
	case r.PauseWindow < 0 || r.PauseWindow > MaxPauseWindow:
		return BadField("pause_window", "must be 0..%d", MaxPauseWindow)
	case len(r.Ramp) > MaxRampSteps:
		return BadField("ramp", "at most %d steps", MaxRampSteps)
	case len(r.Ramp) > 0 && !(r.RampHoldSeconds > 0 && r.RampHoldSeconds <= 3600):
		return BadField("ramp_hold_seconds", "must be above 0 and at most 3600 with a ramp")
	case len(r.Ramp) == 0 && r.RampHoldSeconds != 0:
		return BadField("ramp_hold_seconds", "is only for a ramp")
	case r.NoGuard && (r.Canary > 0 || r.PauseWindow > 0 || r.MaxFailureRate != nil):
		return BadField("no_guard", "turns the failure guard off: not with canary, max_failure_rate or pause_window")
	}
	for i, v := range r.Ramp {
		if !(v > 0 && v <= 1e6) || i > 0 && v < r.Ramp[i-1] {
			return BadField(fmt.Sprintf("ramp[%d]", i), "steps must be above 0, at most 1000000 and ascending")
		}
	}
	return checkText(r.Actor, r.Reason)
}

// Validate checks a drain.resume request's reason (the redriver checks
// the id).
func (r DrainResumeRequest) Validate() error { return checkText("", r.Reason) }

// checkText bounds a person's actor and reason.
func checkText(actor, reason string) error {
	switch {
	case len(actor) > MaxActor:
		return BadField("actor", "at most %d bytes", MaxActor)
	case len(reason) > MaxReason:
		return BadField("reason", "at most %d bytes", MaxReason)
	}
	return nil
}

// Validate checks a redrive request: a dlq id, and a corrected payload, if
// any, that is a JSON object with a reason.
func (r RedriveRequest) Validate() error {
	switch {
	case r.DLQID == "":
		return BadField("dlq_id", "is required")
	case len(r.Payload) > 0 && !isObject(r.Payload):
		return BadField("payload", "a correction must be a JSON object")
	case len(r.Payload) > 0 && r.Reason == "":
		return BadField("reason", "a corrected payload needs a reason")
	}
	return checkText(r.Actor, r.Reason)
}

// isObject reports whether raw is one JSON object.
func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// Validate checks a release request's dlq id, reason and class.
func (r ReleaseRequest) Validate() error {
	switch {
	case r.DLQID == "":
		return BadField("dlq_id", "is required")
	case r.Reason == "":
		return BadField("reason", "is required")
	}
	if err := checkClass("class", r.Class, record.ClassExhausted, record.ClassValidation); err != nil {
		return err
	}
	return checkText(r.Actor, r.Reason)
}
