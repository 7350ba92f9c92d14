package legalhold

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxPlacers bounds the people whose hold placements are tracked at once:
// a person's bucket is dropped once full again, and when the map is full
// the fullest buckets go first, so no sequence of names grows it.
const maxPlacers = 4096

// personLimiter is a token bucket per person (x/time/rate) in a bounded
// map. A person's name comes from the server (Nats-Request-Info), but the
// map is bounded all the same.
type personLimiter struct {
	mu      sync.Mutex
	every   rate.Limit
	burst   int
	max     int
	buckets map[string]*rate.Limiter
	now     func() time.Time
}

// newPersonLimiter allows perMinute per person with burst, tracking at
// most max people.
func newPersonLimiter(perMinute, burst, max int) *personLimiter {
	return &personLimiter{every: rate.Limit(float64(perMinute) / 60), burst: burst, max: max,
		buckets: map[string]*rate.Limiter{}, now: time.Now}
}

// allow takes one token of user's bucket; false when it is empty.
func (l *personLimiter) allow(user string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[user]
	if !ok {
		if len(l.buckets) >= l.max {
			l.prune(now)
		}
		b = rate.NewLimiter(l.every, l.burst)
		l.buckets[user] = b
	}
	return b.AllowN(now, 1)
}

// prune drops the buckets that are full again (their owners are as if
// new); if none is, it drops one arbitrary bucket, whose owner then starts
// full: a bounded map costs at most that.
func (l *personLimiter) prune(now time.Time) {
	for u, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, u)
		}
	}
	if len(l.buckets) < l.max {
		return
	}
	for u := range l.buckets {
		delete(l.buckets, u)
		return
	}
}

// size is the number of people tracked.
func (l *personLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
