package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// auditState is what AUDIT and QUARANTINE hold: the number of checkpoints,
// the newest one and QUARANTINE's last sequence.
type auditState struct {
	checkpoints uint64
	newest      api.Checkpoint
	storeLast   uint64
}

func (e *env) auditState(tb testing.TB) auditState {
	tb.Helper()
	ctx := context.Background()
	var st auditState
	q, err := e.js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		tb.Fatal(err)
	}
	qi, err := q.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	st.storeLast = qi.State.LastSeq
	a, err := e.js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		tb.Fatal(err)
	}
	ai, err := a.Info(ctx, jetstream.WithSubjectFilter(subjects.AuditCheckpoints))
	if err != nil {
		tb.Fatal(err)
	}
	st.checkpoints = ai.State.Subjects[subjects.AuditCheckpoints]
	m, err := a.GetLastMsgForSubject(ctx, subjects.AuditCheckpoints)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		tb.Fatal(err)
	default:
		if err := json.Unmarshal(m.Data, &st.newest); err != nil {
			tb.Fatal(err)
		}
	}
	return st
}

// TestCheckpointsAcrossRestarts is the regression test of issue 15 bug 6:
// an auditor restarted more often than its checkpoint interval wrote no
// checkpoint. Each step stores records while the auditor is down and
// while it runs, then stops it: every stop leaves a checkpoint covering
// the whole store, a start after records arrived while it was down writes
// one before it stops, and a restart with nothing new writes none.
func TestCheckpointsAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.CheckpointInterval = time.Hour // never reached: only start-up and shutdown write
	n := 0
	store := func(k int) {
		for range k {
			e.chainOf(t, fixture{id: id(n), domain: "pharmacy", class: record.ClassExhausted,
				code: codes.DownstreamUnavailable, firstSeen: t0, quarantined: t0})
			n++
		}
	}
	steps := []struct {
		name               string
		whileDown, whileUp int
		wantNew            bool // a checkpoint is written during the step
	}{
		{"records stored before the first start", 3, 0, true},
		{"records stored while running", 0, 2, true},
		{"restart with nothing new", 0, 0, false},
		{"records stored while down", 1, 0, true},
		{"records stored while down and running", 2, 2, true},
		{"another restart with nothing new", 0, 0, false},
	}
	var before auditState
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			store(st.whileDown)
			a := e.startAuditor(t, cfg, nil)
			if st.whileDown > 0 {
				// The start-up checkpoint, written once the auditor caught up.
				natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
					if got := e.auditState(t); got.newest.LastSeq != got.storeLast {
						return fmt.Errorf("newest checkpoint covers up to %d, the store holds up to %d", got.newest.LastSeq, got.storeLast)
					}
					return nil
				})
			}
			store(st.whileUp)
			e.waitApplied(t, a)
			a.stop()
			got := e.auditState(t)
			if got.newest.LastSeq != got.storeLast || got.storeLast == 0 {
				t.Fatalf("after stop: newest checkpoint covers up to %d, the store holds up to %d", got.newest.LastSeq, got.storeLast)
			}
			if isNew := got.checkpoints > before.checkpoints; isNew != st.wantNew {
				t.Errorf("checkpoints %d → %d; want a new one: %v", before.checkpoints, got.checkpoints, st.wantNew)
			}
			before = got
		})
	}
	e.startAuditor(t, testConfig(), nil)
	var rep api.VerifyReply
	request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &rep)
	if !rep.OK || rep.Checkpoints < 1 || uint64(rep.Checkpoints) != before.checkpoints {
		t.Fatalf("verify: ok %v, checkpoints %d (AUDIT holds %d), problems %+v", rep.OK, rep.Checkpoints, before.checkpoints, rep.Problems)
	}
	if rep.NewestCheckpointAt == nil || rep.NewestCheckpointAgeSeconds < 0 || rep.NewestCheckpointAgeSeconds > 60 ||
		rep.NewestCheckpointLastSeq != before.storeLast {
		t.Fatalf("verify: newest checkpoint at %v, age %.1f s, last seq %d; want one, a few seconds old, covering %d",
			rep.NewestCheckpointAt, rep.NewestCheckpointAgeSeconds, rep.NewestCheckpointLastSeq, before.storeLast)
	}
}

// clock is a settable clock for an auditor.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// TestCheckpointAgeMetric checks deadletter_audit_checkpoint_age_seconds
// and verify's age of the newest checkpoint with a fixed clock.
func TestCheckpointAgeMetric(t *testing.T) {
	type step struct {
		name       string
		at         time.Duration // the clock, from t0
		store      int           // records stored first
		checkpoint bool          // audit.checkpoint first
		want       float64       // the gauge
	}
	cases := []struct {
		name  string
		store int // records stored before the start (at t0)
		steps []step
	}{
		{"empty store", 0, []step{
			{name: "nothing to cover", at: time.Hour, want: 0},
		}},
		{"no checkpoint yet", 2, []step{
			{name: "uncovered since the start", at: 2 * time.Minute, want: 120},
			{name: "checkpoint written", at: 3 * time.Minute, checkpoint: true, want: 0},
		}},
		{"checkpoint behind", 2, []step{
			{name: "covered", checkpoint: true, want: 0},
			{name: "still covered an hour later", at: time.Hour, want: 0},
			{name: "a record uncovered", at: time.Hour + 10*time.Minute, store: 1, want: 600},
			{name: "covered again", at: time.Hour + 11*time.Minute, checkpoint: true, want: 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			n := 0
			store := func(k int) {
				for range k {
					e.chainOf(t, fixture{id: id(n), domain: "pharmacy", class: record.ClassExhausted,
						code: codes.DownstreamUnavailable, firstSeen: t0, quarantined: t0})
					n++
				}
			}
			store(tc.store)
			c := &clock{t: t0}
			a := e.startAuditor(t, testConfig(), c.now)
			for _, s := range tc.steps {
				store(s.store)
				e.waitApplied(t, a)
				c.set(t0.Add(s.at))
				if s.checkpoint {
					var rep api.CheckpointReply
					request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &rep)
				}
				if got := testutil.ToFloat64(a.metrics.checkpointAge); got != s.want {
					t.Errorf("%s: deadletter_audit_checkpoint_age_seconds %v, want %v", s.name, got, s.want)
				}
			}
			var rep api.VerifyReply
			c.set(c.now().Add(time.Minute))
			request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &rep)
			if rep.Checkpoints == 0 {
				if rep.NewestCheckpointAt != nil {
					t.Errorf("verify: no checkpoint, newest at %v", rep.NewestCheckpointAt)
				}
				return
			}
			if rep.NewestCheckpointAt == nil || rep.NewestCheckpointAgeSeconds != 60 {
				t.Errorf("verify: newest checkpoint at %v, age %v s; want a minute old", rep.NewestCheckpointAt, rep.NewestCheckpointAgeSeconds)
			}
		})
	}
}

// TestVerifyAmongOtherAuditRecords: AUDIT holds governance actions and the
// access audit between its checkpoints; verify counts their sequences as
// present, not as a gap in the checkpoints (it reported "AUDIT sequences
// 2..3 hold no checkpoint" once a payload had been read).
func TestVerifyAmongOtherAuditRecords(t *testing.T) {
	e := newEnv(t)
	f := fixture{id: id(1), domain: "pharmacy", class: record.ClassValidation, code: "SCHEMA_VALIDATION",
		firstSeen: time.Now().UTC(), quarantined: time.Now().UTC()}
	e.publish(t, first(t, f))
	cfg := testConfig()
	cfg.AllowAnonymous = true
	a := e.startAuditor(t, cfg, nil)
	e.waitApplied(t, a)
	var ck api.CheckpointReply
	request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &ck)
	// A payload read (an access record) and a governance action, then a
	// second checkpoint.
	var got api.GetReply
	request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: f.id, IncludePayload: true, Reason: "inspection"}, &got)
	action, _ := json.Marshal(api.AuditAction{Action: "paused", Object: "drain", ObjectID: "d1", Actor: "redriver", At: time.Now().UTC()})
	if _, err := e.js.Publish(context.Background(), subjects.AuditAction("drain", "d1"), action); err != nil {
		t.Fatal(err)
	}
	e.publish(t, next(t, first(t, f), record.KindResolved, time.Now().UTC()))
	e.waitApplied(t, a)
	request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &ck)
	var rep api.VerifyReply
	request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &rep)
	if !rep.OK || rep.Checkpoints != 2 {
		t.Fatalf("verify: ok %v, checkpoints %d, problems %+v; want ok with 2", rep.OK, rep.Checkpoints, rep.Problems)
	}
}
