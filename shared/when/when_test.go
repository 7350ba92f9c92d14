package when

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, in string
		want     time.Time
		bad      bool
	}{
		{name: "empty", in: ""},
		{name: "rfc3339", in: "2026-12-05T14:30:00Z", want: time.Date(2026, 12, 5, 14, 30, 0, 0, time.UTC)},
		{name: "offset to utc", in: "2026-12-05T10:00:00-05:00", want: time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC)},
		{name: "date", in: "2026-12-05", want: time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)},
		{name: "datetime-local", in: "2026-12-05T14:30", want: time.Date(2026, 12, 5, 14, 30, 0, 0, time.UTC)},
		{name: "datetime-local seconds", in: "2026-12-05T14:30:15", want: time.Date(2026, 12, 5, 14, 30, 15, 0, time.UTC)},
		{name: "minutes", in: "90m", want: now.Add(-90 * time.Minute)},
		{name: "hours ago", in: "2h ago", want: now.Add(-2 * time.Hour)},
		{name: "days", in: "7d", want: now.Add(-7 * 24 * time.Hour)},
		{name: "days ago", in: "7d ago", want: now.Add(-7 * 24 * time.Hour)},
		{name: "surrounding space", in: " 2026-12-05 ", want: time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)},
		{name: "negative", in: "-1h", bad: true},
		{name: "word", in: "yesterday", bad: true},
		{name: "us date", in: "12/05/2026", bad: true},
		{name: "markup", in: "<b>2026</b> & Söhne", bad: true},
		{name: "ago alone", in: "ago", bad: true},
		{name: "huge days", in: "99999999999999d", bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in, now)
			if (err != nil) != c.bad || !got.Equal(c.want) {
				t.Fatalf("Parse(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.bad)
			}
			if c.bad && !errors.Is(err, ErrNotATime) {
				t.Errorf("error %v is not ErrNotATime", err)
			}
		})
	}
}

// TestMessage: the error speaks people's words, not Go layouts.
func TestMessage(t *testing.T) {
	_, err := Parse("yesterday", time.Now())
	msg := err.Error()
	for _, bad := range []string{"2006", "15:04", "RFC"} {
		if strings.Contains(msg, bad) {
			t.Errorf("message %q leaks %q", msg, bad)
		}
	}
	if want := `"yesterday" is not a time: use 2026-12-05, 2026-12-05T14:30:00Z or 2h ago`; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
}
