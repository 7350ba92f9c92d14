package console

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// Plan tokens: the drain plan page is bound to the dry run it shows. Its
// Start drain carries the plan's token, which the console accepts once,
// within planTTL, and only for the filter that was planned: a plan page
// brought back by Back, history or a restored tab cannot start a drain
// over a selection nobody looked at; the console dry-runs again and shows
// the fresh plan instead.

// Plan token limits.
const (
	// planTTL is how long a shown plan may start its drain.
	planTTL = 10 * time.Minute
	// maxPlans bounds the plans remembered per session.
	maxPlans = 20
)

// planToken is one plan shown to the person.
type planToken struct {
	at     time.Time
	filter string
}

// errStalePlan: a Start drain with a plan token that is unknown, used,
// too old or of another filter.
var errStalePlan = errors.New("console: stale drain plan")

// planKey is the identity of a drain filter (what a plan selected by).
func planKey(f api.DrainFilter) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// issuePlan remembers a plan of filter shown at now and returns its
// token (the oldest is forgotten beyond maxPlans).
func (s *session) issuePlan(filter api.DrainFilter, now time.Time) string {
	tok := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.plans == nil {
		s.plans = map[string]planToken{}
	}
	for len(s.plans) >= maxPlans {
		var oldest string
		for k, p := range s.plans {
			if oldest == "" || p.at.Before(s.plans[oldest].at) {
				oldest = k
			}
		}
		delete(s.plans, oldest)
	}
	s.plans[tok] = planToken{at: now, filter: planKey(filter)}
	return tok
}

// redeemPlan accepts the plan of tok for filter at now, once.
func (s *session) redeemPlan(tok string, filter api.DrainFilter, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.plans[tok]
	if !ok || tok == "" {
		return errStalePlan
	}
	delete(s.plans, tok)
	if now.Sub(p.at) > planTTL || p.filter != planKey(filter) {
		return errStalePlan
	}
	return nil
}
