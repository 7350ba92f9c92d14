package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestLostDrainIsRestored (E4): a drain whose canary failed (paused, in
// AUDIT) and was cancelled (in AUDIT), its replay sealed in QUARANTINE.
// Delete-marked while paused, it is restored paused (its filter from
// REQUESTS, its pause from AUDIT), not failed. On a store where every
// index agrees with its source, Compare reports nothing for any of the
// four buckets. The redriver's credential then
// delete-marks the drain: Compare names it missing, Restore (as the
// redriver) writes it back cancelled, with its filter, events, starter
// and replay counts; drain.status reads it again. Altered
// afterwards (its cancellation dropped, status paused), it is reported
// altered and corrected.
func TestLostDrainIsRestored(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	dlqID := s.quarantine(t, "drain Müller & Söhne <Großhandel> 陈伟")
	zero := 0.0
	var started api.DrainStartReply
	s.mustCall(t, operator, api.DrainStart, api.DrainStartRequest{
		Filter: api.DrainFilter{DLQIDs: []string{dlqID}, Classes: []string{"validation"}, IncludeValidation: true},
		Canary: 1, MaxFailureRate: &zero, Reason: "downstream restored, Müller & Söhne <Nord>",
	}, &started)
	status := func() api.DrainState {
		t.Helper()
		var st api.DrainState
		s.mustCall(t, operator, api.DrainStatus, api.DrainIDRequest{DrainID: started.DrainID}, &st)
		return st
	}
	natstest.CheckFor(t, waitFor, 50*time.Millisecond, func() error {
		if st := status(); st.Status != api.DrainPaused {
			return errorf("drain %s, waiting for its canary to pause it", st.Status)
		}
		return nil
	})
	// Lost while paused: restored paused, with its filter (REQUESTS) and
	// its pause (AUDIT), not failed.
	natstest.CheckFor(t, waitFor, 50*time.Millisecond, func() error {
		if st := status(); slices.ContainsFunc(st.Events, func(e api.DrainEvent) bool { return e.Unrecorded }) {
			return errorf("waiting for the pause in AUDIT")
		}
		return nil
	})
	paused := status()
	s.wipe(t, access.Redriver, subjects.DrainsBucket)
	if rep := s.restore(t, access.Redriver, subjects.DrainsBucket); rep.Created != 1 {
		t.Fatalf("restore of the paused drain: %+v", rep)
	}
	if st := status(); st.Status != api.DrainPaused || !sameFilter(st.Request, paused.Request) || len(st.Events) != len(paused.Events) || st.Error != "" {
		t.Errorf("restored paused drain: %s, filter %+v, %d events, error %q; was paused, %+v, %d events", st.Status, st.Request.Filter,
			len(st.Events), st.Error, paused.Request.Filter, len(paused.Events))
	}
	s.mustCall(t, operator, api.DrainCancel, api.DrainIDRequest{DrainID: started.DrainID}, nil)
	var before api.DrainState
	natstest.CheckFor(t, waitFor, 50*time.Millisecond, func() error {
		before = status()
		if before.Status != api.DrainCancelled || len(before.Events) < 2 ||
			slices.ContainsFunc(before.Events, func(e api.DrainEvent) bool { return e.Unrecorded }) {
			return errorf("drain %s with %d events, waiting for it cancelled and recorded", before.Status, len(before.Events))
		}
		return nil
	})

	if before.Replayed < 1 || before.StartedBy != operator {
		t.Fatalf("drain replayed %d, started by %q: the sources would not name it", before.Replayed, before.StartedBy)
	}

	// A clean store: every index agrees with its source, compared by its
	// owner and by audit.verify's identity, the auditor, which reads every
	// index (DRAINS too).
	for _, c := range []struct {
		owner, bucket string
		auditorReads  bool
	}{
		{access.Auditor, subjects.HoldsBucket, true}, {access.Redriver, subjects.ApprovalsBucket, true},
		{access.Redriver, subjects.DrainsBucket, true}, {access.Validator, subjects.IdempotencyBucket, true},
	} {
		if ps := s.compare(t, c.owner, c.bucket); len(ps) != 0 {
			t.Errorf("a clean %s reports %+v", c.bucket, ps)
		}
		if c.auditorReads {
			if ps := s.compare(t, access.Auditor, c.bucket); len(ps) != 0 {
				t.Errorf("a clean %s, compared as the auditor, reports %+v", c.bucket, ps)
			}
			continue
		}
		began := time.Now()
		_, err := rebuild.Compare(ctx, s.js(t, access.Auditor), c.bucket)
		if err == nil || !strings.Contains(err.Error(), "no read access") || time.Since(began) > rebuild.ProbeTimeout+5*time.Second {
			t.Errorf("%s compared by a user who may not read it: %v after %s, want a prompt refusal", c.bucket, err, time.Since(began))
		}
	}

	s.wipe(t, access.Redriver, subjects.DrainsBucket)
	ps := s.compare(t, access.Redriver, subjects.DrainsBucket)
	if len(ps) != 1 || ps[0].Key != started.DrainID || ps[0].Kind != rebuild.Missing {
		t.Fatalf("compare after the wipe: %+v, want drain %s missing", ps, started.DrainID)
	}
	noValues(t, ps, "Müller", "陈伟")
	rep := s.restore(t, access.Redriver, subjects.DrainsBucket)
	if rep.Created != 1 || len(rep.Unrestorable) != 0 {
		t.Fatalf("restore: %+v", rep)
	}
	after := status()
	if after.Status != api.DrainCancelled || after.CancelledBy != before.CancelledBy || after.StartedBy != before.StartedBy ||
		after.Replayed != before.Replayed || len(after.Events) != len(before.Events) {
		t.Errorf("restored drain: %s by %q, started by %q, %d replayed, %d events; was %s by %q, %q, %d, %d", after.Status, after.CancelledBy,
			after.StartedBy, after.Replayed, len(after.Events), before.Status, before.CancelledBy, before.StartedBy, before.Replayed, len(before.Events))
	}
	for i, ev := range after.Events {
		if b := before.Events[i]; ev.Action != b.Action || ev.Actor != b.Actor || !ev.At.Equal(b.At) || ev.Reason != b.Reason {
			t.Errorf("restored event %d: %+v, was %+v", i+1, ev, b)
		}
	}
	if ps := s.compare(t, access.Redriver, subjects.DrainsBucket); len(ps) != 0 {
		t.Errorf("compare after restore: %+v", ps)
	}

	// Its cancellation dropped: altered, and corrected.
	kv, err := s.js(t, access.Redriver).KeyValue(ctx, subjects.DrainsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, started.DrainID)
	if err != nil {
		t.Fatal(err)
	}
	var forged api.DrainState
	if err := json.Unmarshal(e.Value(), &forged); err != nil {
		t.Fatal(err)
	}
	forged.Status, forged.CancelledBy, forged.Events = api.DrainPaused, "", forged.Events[:len(forged.Events)-1]
	b, _ := json.Marshal(forged)
	if _, err := kv.Update(ctx, started.DrainID, b, e.Revision()); err != nil {
		t.Fatal(err)
	}
	ps = s.compare(t, access.Redriver, subjects.DrainsBucket)
	if len(ps) != 1 || ps[0].Kind != rebuild.Altered || !slices.Contains(ps[0].Fields, "events") ||
		!slices.ContainsFunc(ps[0].Fields, func(f string) bool { return strings.HasPrefix(f, "status") }) {
		t.Fatalf("compare after the alteration: %+v, want events and status altered", ps)
	}
	if rep := s.restore(t, access.Redriver, subjects.DrainsBucket); rep.Updated != 1 {
		t.Fatalf("restore: %+v", rep)
	}
	if st := status(); st.Status != api.DrainCancelled || len(st.Events) != len(before.Events) {
		t.Errorf("corrected drain: %s, %d events", st.Status, len(st.Events))
	}
}

// TestRunningDrainIsRestored (E4, ADR 0024): a running drain (a slow
// rate, no guard) over four quarantined events. The redriver's credential
// delete-marks its DRAINS entry while it runs: Compare (as the auditor,
// audit.verify's identity) names it missing, Restore (as the redriver)
// writes it back running, with its filter, controls, starter and start
// time from REQUESTS (not cancelled), and the drain goes on to completion,
// each event replayed once. Overwritten afterwards with another filter
// (a plain put), it is reported altered ("filter") and corrected. Its
// start in REQUESTS can be neither replaced nor rolled up.
func TestRunningDrainIsRestored(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	var ids []string
	for _, m := range []string{"running Müller & Söhne <Großhandel>", "running 陈伟 \"2\"", "running A1&B<2>", "running Ünïcödé"} {
		ids = append(ids, s.quarantine(t, m))
	}
	rate := 0.5
	var started api.DrainStartReply
	s.mustCall(t, operator, api.DrainStart, api.DrainStartRequest{
		Filter:  api.DrainFilter{DLQIDs: ids, Classes: []string{"validation"}, IncludeValidation: true},
		NoGuard: true, RatePerSecond: &rate, Reason: "downstream restored, Müller & Söhne <Nord> \"Süd\"",
	}, &started)
	status := func() api.DrainState {
		t.Helper()
		var st api.DrainState
		s.mustCall(t, operator, api.DrainStatus, api.DrainIDRequest{DrainID: started.DrainID}, &st)
		return st
	}
	var before api.DrainState
	natstest.CheckFor(t, waitFor, 20*time.Millisecond, func() error {
		if before = status(); before.Status != api.DrainRunning || before.Replayed < 1 {
			return errorf("drain %s, %d replayed: waiting for it running", before.Status, before.Replayed)
		}
		return nil
	})
	if before.Replayed >= len(ids) {
		t.Fatalf("the drain replayed all %d events before it could be lost: the test tests nothing", before.Replayed)
	}

	s.wipe(t, access.Redriver, subjects.DrainsBucket)
	ps, err := rebuildCompare(t, s, access.Auditor, subjects.DrainsBucket)
	if err != nil || len(ps) != 1 || ps[0].Key != started.DrainID || ps[0].Kind != rebuild.Missing {
		t.Fatalf("compare after the wipe: %+v %v, want drain %s missing", ps, err, started.DrainID)
	}
	noValues(t, ps, "Müller", "陈伟", "validation")
	rep := s.restore(t, access.Redriver, subjects.DrainsBucket)
	if rep.Created != 1 || len(rep.Unrestorable) != 0 {
		t.Fatalf("restore: %+v", rep)
	}
	after := status()
	if after.Status == api.DrainCancelled || after.Status == api.DrainFailed || !sameFilter(after.Request, before.Request) ||
		after.StartedBy != before.StartedBy || !after.StartedAt.Equal(before.StartedAt) || after.Error != "" {
		t.Errorf("restored drain: %s, filter %+v, started by %q at %s, error %q; was %s, %+v, %q, %s", after.Status, after.Request.Filter,
			after.StartedBy, after.StartedAt, after.Error, before.Status, before.Request.Filter, before.StartedBy, before.StartedAt)
	}
	var done api.DrainState
	natstest.CheckFor(t, waitFor, 100*time.Millisecond, func() error {
		if done = status(); done.Status != api.DrainCompleted {
			return errorf("restored drain %s, %d replayed: waiting for it completed", done.Status, done.Replayed)
		}
		return nil
	})
	for _, id := range ids {
		if n := s.records(t, id, "redrive_requested"); n != 1 {
			t.Errorf("%s replayed %d times by the drain, want once", id, n)
		}
	}
	if ps, err := rebuildCompare(t, s, access.Auditor, subjects.DrainsBucket); err != nil || len(ps) != 0 {
		t.Errorf("compare after the drain completed: %+v %v", ps, err)
	}

	// Another filter written over the finished entry: altered, corrected.
	kv, err := s.js(t, access.Redriver).KeyValue(ctx, subjects.DrainsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, started.DrainID)
	if err != nil {
		t.Fatal(err)
	}
	var forged api.DrainState
	if err := json.Unmarshal(e.Value(), &forged); err != nil {
		t.Fatal(err)
	}
	forged.Request.Filter = api.DrainFilter{Domain: "pharmacy"}
	b, _ := json.Marshal(forged)
	putRawAs(t, s.js(t, access.Redriver), subjects.DrainsBucket, started.DrainID, b)
	ps, err = rebuildCompare(t, s, access.Auditor, subjects.DrainsBucket)
	if err != nil || len(ps) != 1 || ps[0].Kind != rebuild.Altered || !slices.Contains(ps[0].Fields, "filter") {
		t.Fatalf("compare after the filter was overwritten: %+v %v, want filter altered", ps, err)
	}
	if rep := s.restore(t, access.Redriver, subjects.DrainsBucket); rep.Updated != 1 {
		t.Fatalf("restore: %+v", rep)
	}
	if st := status(); !sameFilter(st.Request, before.Request) || st.Status != api.DrainCompleted {
		t.Errorf("corrected drain: %s, filter %+v", st.Status, st.Request.Filter)
	}

	// Its start is written once: the redriver's own credential can
	// neither replace it nor roll it up.
	rjs := s.js(t, access.Redriver)
	for _, tc := range []struct {
		name   string
		header string
		code   jetstream.ErrorCode
	}{
		{"a second start", "", streams.ErrCodeMaxMsgsPerSubject},
		{"a rollup of the subject", jetstream.MsgRollupSubject, 10111},
		{"a rollup of the stream", jetstream.MsgRollupAll, 10111},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := nats.NewMsg(streams.DrainStartSubject(started.DrainID))
			m.Data = b
			if tc.header != "" {
				m.Header.Set(jetstream.MsgRollup, tc.header)
			}
			_, err := rjs.PublishMsg(ctx, m)
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != tc.code {
				t.Errorf("%s: %v, want refused (%d)", tc.name, err, tc.code)
			}
		})
	}
	if ps, err := rebuildCompare(t, s, access.Auditor, subjects.DrainsBucket); err != nil || len(ps) != 0 {
		t.Errorf("compare at the end: %+v %v", ps, err)
	}
}

// sameFilter reports whether two drain requests have the same filter
// and controls (as JSON).
func sameFilter(a, b api.DrainStartRequest) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
