package drains

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
)

// A drain's start and end are written once to REQUESTS (ADR 0024): its
// start (b, the entry's first value: filter, controls, starter, owner)
// before its DRAINS entry is created, its end (the final status and
// counts) before DRAINS says it. They are what package rebuild restores a
// lost or altered entry from: AUDIT holds a drain's pauses, resumes and
// cancellation, QUARANTINE its replays, neither its filter.

// writeStart writes drain st's start (b) to REQUESTS. An approved drain
// executed again finds its start there: the same request by the same
// person goes on; any other (a start written under its id by someone
// else) is refused.
func writeStart(ctx context.Context, js jetstream.JetStream, st api.DrainState, b []byte) error {
	return streams.WriteOnce(ctx, js, streams.RequestsStream, streams.DrainStartSubject(st.DrainID), "drain-start-"+st.DrainID, b,
		func(stored, _ []byte) bool {
			var had api.DrainState
			if json.Unmarshal(stored, &had) != nil {
				return false
			}
			x, _ := json.Marshal(had.Request)
			y, _ := json.Marshal(st.Request)
			return had.DrainID == st.DrainID && had.StartedBy == st.StartedBy && string(x) == string(y)
		})
}

// writeEnd writes drain st's end to REQUESTS (its final status, counts
// and events). An end there already with the same status is this one
// (a retry).
func (r *Runner) writeEnd(st api.DrainState) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return streams.WriteOnce(ctx, r.cfg.JS, streams.RequestsStream, streams.DrainEndSubject(st.DrainID), "drain-end-"+st.DrainID, b,
		func(stored, _ []byte) bool {
			var had api.DrainState
			return json.Unmarshal(stored, &had) == nil && had.DrainID == st.DrainID && had.Status == st.Status
		})
}

// errStartUnrecorded: REQUESTS does not hold the drain's start as its
// DRAINS entry says it (none, or another filter or starter): an entry
// written by someone else than the redriver that started it. Such a
// drain is never resumed.
var errStartUnrecorded = errors.New("redriver: REQUESTS does not hold the drain's start as DRAINS says it")

// recordedStart checks that REQUESTS holds drain st's start with the
// filter, controls and starter its entry says (a drain of an earlier
// store was adopted into REQUESTS when REQUESTS was created:
// streams.AdoptDrains). A store without REQUESTS (not provisioned since
// the upgrade) has nothing to check against.
func recordedStart(ctx context.Context, js jetstream.JetStream, st api.DrainState) error {
	b, found, err := streams.ReadOnce(ctx, js, streams.RequestsStream, streams.DrainStartSubject(st.DrainID))
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: none", errStartUnrecorded)
	}
	var had api.DrainState
	if json.Unmarshal(b, &had) != nil || had.DrainID != st.DrainID {
		return fmt.Errorf("%w: it does not decode", errStartUnrecorded)
	}
	x, _ := json.Marshal(had.Request)
	y, _ := json.Marshal(st.Request)
	if had.StartedBy != st.StartedBy || string(x) != string(y) {
		return fmt.Errorf("%w: another filter or starter", errStartUnrecorded)
	}
	return nil
}
