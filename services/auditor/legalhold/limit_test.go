package legalhold

import (
	"fmt"
	"testing"
	"time"
)

// TestPersonLimiter: each person gets burst placements, then the rate;
// another person is not held by the first; no sequence of names grows the
// map past its bound.
func TestPersonLimiter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	l := newPersonLimiter(60, 3, 8)
	l.now = func() time.Time { return now }
	for _, tc := range []struct {
		name    string
		user    string
		advance time.Duration
		want    bool
	}{
		{"first", "Müller & Söhne <Großhandel>", 0, true},
		{"second", "Müller & Söhne <Großhandel>", 0, true},
		{"third", "Müller & Söhne <Großhandel>", 0, true},
		{"past the burst", "Müller & Söhne <Großhandel>", 0, false},
		{"another person", "Pharmacie Saint-Étienne", 0, true},
		{"a second later: one more", "Müller & Söhne <Großhandel>", time.Second, true},
		{"and no more", "Müller & Söhne <Großhandel>", 0, false},
	} {
		now = now.Add(tc.advance)
		if got := l.allow(tc.user); got != tc.want {
			t.Errorf("%s: allow = %v, want %v", tc.name, got, tc.want)
		}
	}
	for i := range 10_000 {
		l.allow(fmt.Sprintf("user-%d-%s", i, string(make([]byte, 64))))
		if n := l.size(); n > 8 {
			t.Fatalf("%d people tracked, bound 8", n)
		}
	}
}
