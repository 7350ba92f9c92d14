package drains

import (
	"context"
	"encoding/json"
	"time"

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
