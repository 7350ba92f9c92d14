// Package when reads the times people type: in dlqctl's --since and
// --until, in the console's date and datetime fields. It is the one parser
// of user time input; its error says in people's words what it accepts.
package when

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrNotATime is the error of a value Parse cannot read. Its text is the
// message shown to people, with examples of every accepted form.
var ErrNotATime = errors.New("not a time: use 2026-12-05, 2026-12-05T14:30:00Z or 2h ago")

// Layouts accepted besides RFC 3339 and a duration ago: a browser's
// datetime-local value and a date, both read as UTC.
var layouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// Parse reads s as a time in UTC: RFC 3339 ("2026-12-05T14:30:00Z", any
// offset), a date or a date and minute without offset (UTC), or a duration
// before now ("90m", "2h", "7d", optionally followed by "ago"). An empty s
// is the zero time. Anything else is ErrNotATime, naming the value.
func Parse(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	for _, l := range layouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	if d, ok := ago(s); ok {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is %w", s, ErrNotATime)
}

var daysRe = regexp.MustCompile(`^(\d{1,5})d$`)

// ago reads a non-negative duration ("90m", "1h30m", "7d"), optionally
// followed by "ago".
func ago(s string) (time.Duration, bool) {
	s = strings.TrimSpace(strings.TrimSuffix(s, "ago"))
	if m := daysRe.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		return time.Duration(n) * 24 * time.Hour, err == nil
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}
