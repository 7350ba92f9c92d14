package dscsa

import (
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
)

// localLayout is an RFC 3339 date-time without a UTC offset.
const localLayout = "2006-01-02T15:04:05.999999999"

// eventTime returns the event's time in UTC. An eventTime with an offset
// is taken as is; one without an offset is read in eventTimeZoneOffset;
// with neither the instant is ambiguous. A present eventTimeZoneOffset must
// have the EPCIS form ±hh:mm (-14:00 to +14:00) even when eventTime
// carries its own offset (EPCIS records the local offset separately).
func eventTime(doc domain.Doc) (time.Time, error) {
	s, ok := domain.String(doc, "eventTime")
	if !ok {
		return time.Time{}, codes.Errorf(codes.UnparseableEventTime, "eventTime is missing")
	}
	off, hasOff := domain.String(doc, "eventTimeZoneOffset")
	var offset time.Duration
	if hasOff {
		if offset, ok = parseOffset(off); !ok {
			return time.Time{}, codes.Errorf(codes.UnparseableEventTime,
				"eventTimeZoneOffset must be ±hh:mm between -14:00 and +14:00")
		}
	}
	if t, err := domain.ParseTime("eventTime", s); err == nil {
		return t, nil
	}
	local, err := time.Parse(localLayout, s)
	if err != nil {
		return time.Time{}, codes.Errorf(codes.UnparseableEventTime,
			"eventTime is not an RFC 3339 date-time")
	}
	if !hasOff {
		return time.Time{}, codes.Errorf(codes.UnparseableEventTime,
			"eventTime has no UTC offset and eventTimeZoneOffset is absent")
	}
	return local.Add(-offset).UTC(), nil
}

// parseOffset reads an EPCIS eventTimeZoneOffset: ±hh:mm with hh 00 to 13
// and any minutes, or ±14:00.
func parseOffset(s string) (time.Duration, bool) {
	if len(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' ||
		!allDigits(s[1:3]) || !allDigits(s[4:6]) {
		return 0, false
	}
	h := int(s[1]-'0')*10 + int(s[2]-'0')
	m := int(s[4]-'0')*10 + int(s[5]-'0')
	if m > 59 || h > 14 || (h == 14 && m != 0) {
		return 0, false
	}
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	if s[0] == '-' {
		d = -d
	}
	return d, true
}

// declarationTime returns errorDeclaration.declarationTime in UTC; ok is
// false when the event carries no errorDeclaration.
func declarationTime(doc domain.Doc) (t time.Time, ok bool, err error) {
	ed, ok := domain.Object(doc, "errorDeclaration")
	if !ok {
		return time.Time{}, false, nil
	}
	s, present := domain.String(ed, "declarationTime")
	if !present {
		return time.Time{}, true, codes.Errorf(codes.UnparseableEventTime,
			"errorDeclaration.declarationTime is missing")
	}
	t, err = domain.ParseTime("errorDeclaration.declarationTime", s)
	return t, true, err
}
