// Package redrive tests the redriver against the real pipeline: an embedded
// NATS server, the validator (with a downstream the test makes fail), the
// quarantiner and the redriver, started as `make run` starts them.
package redrive

import (
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
)

// TestOutageDrainCommitsEachOnce: the downstream answers 503, events exhaust
// and are quarantined; it recovers; a drain commits every one exactly once
// and resolves its record.
func TestOutageDrainCommitsEachOnce(t *testing.T) {
	e := newEnv(t)
	var events []event
	for i := range 30 {
		events = append(events, e.pharmacyEvent(t, i))
	}
	e.quarantineOutage(t, events)
	e.startRedriver(t, redriverConfig())
	e.down.down.Store(false)

	id := e.startDrain(t, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, RatePerSecond: ptr(0.0), MaxConcurrency: 8})
	st := e.waitDrain(t, id, 60*time.Second)
	if st.Status != api.DrainCompleted || st.Selected != 30 || st.Committed != 30 || st.Replayed != 30 || st.Remaining != 0 {
		t.Fatalf("drain %+v", st)
	}
	e.committedOnce(t, events)
	recs, _, _ := e.chain(t, events[0].key)
	kinds := []string{}
	for _, r := range recs {
		kinds = append(kinds, string(r.Kind))
	}
	if len(recs) != 3 || recs[1].Kind != record.KindRedriveRequested || recs[2].Kind != record.KindReplayed || recs[1].DrainID != id {
		t.Errorf("chain kinds %v (drain %q)", kinds, recs[1].DrainID)
	}
	// A second drain finds nothing left to do.
	id2 := e.startDrain(t, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}})
	if st := e.waitDrain(t, id2, 30*time.Second); st.Selected != 0 || st.Replayed != 0 {
		t.Errorf("second drain %+v", st)
	}
}
