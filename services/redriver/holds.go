package redriver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/record"
)

// Legal holds (package hold): the redriver never drains, redrives or
// releases an event a hold holds, and such an event holds the later events
// of its ordering key in a drain, even one that ignores order. The check
// is made on the chain as read just before the action (hold.Refuse: the
// holds its chain carries, and the active holds of HOLDS that match it, so
// a dynamic hold placed a moment ago holds an event whose hold record the
// auditor has not appended yet). A drain reads the active holds once for
// its selection and again when they are older than holdsRefresh; a
// redrive or a release reads them for itself.

// holdsRefresh bounds the age of the active holds a drain's replay is
// checked against.
const holdsRefresh = time.Second

// holdsFn returns the active legal holds.
type holdsFn func(ctx context.Context) ([]api.Hold, error)

// holdCache is a drain's view of the active legal holds.
type holdCache struct {
	store *hold.Store

	mu    sync.Mutex
	at    time.Time
	holds []api.Hold
}

// get returns the active holds, read again when older than holdsRefresh.
// A failed read is an error (the caller refuses to act: fail closed).
func (c *holdCache) get(ctx context.Context) ([]api.Hold, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < holdsRefresh {
		return c.holds, nil
	}
	hs, err := c.store.Active(ctx)
	if err != nil {
		return nil, err
	}
	c.holds, c.at = hs, time.Now()
	return hs, nil
}

// heldBy returns the hold holding st (and its case), one of them when
// several do; "" when none does.
func heldBy(st record.State, holds []api.Hold) (holdID, caseID string) {
	ids := hold.Holding(st, hold.FromState(st), holds)
	if len(ids) == 0 {
		return "", ""
	}
	holdID = ids[0]
	for _, h := range st.Holds {
		if h.HoldID == holdID {
			return holdID, h.CaseID
		}
	}
	for _, h := range holds {
		if h.ID == holdID {
			return holdID, h.CaseID
		}
	}
	return holdID, ""
}

// refuseHeld returns the coded HELD error when a legal hold holds ch (read
// just before), after reading the active holds; UNAVAILABLE when they
// cannot be read (nothing is done without knowing).
func (s *Service) refuseHeld(ctx context.Context, ch chain.Chain) error {
	holds, err := s.holdStore.Active(ctx)
	if err != nil {
		return api.Wrap(api.ErrUnavailable, err, fmt.Sprintf("the legal holds could not be read: %v", err))
	}
	return hold.Refuse(ch.State, holds)
}
