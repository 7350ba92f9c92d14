package drains

import (
	"context"
	"sync"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/hold"
)

// Legal holds (package hold): the redriver never drains, redrives or
// releases an event a hold holds, and such an event holds the later events
// of its ordering key in a drain, even one that ignores order. The check
// is made on the chain as read just before the action (hold.Refuse: the
// holds its chain carries, and the active holds of HOLDS that match it, so
// a dynamic hold placed a moment ago holds an event whose hold record the
// auditor has not appended yet). A drain reads the active holds once for
// its selection and again when they are older than holdsRefresh; a
// redrive or a release reads them for itself (package single).

// holdsRefresh bounds the age of the active holds a drain's replay is
// checked against.
const holdsRefresh = time.Second

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
