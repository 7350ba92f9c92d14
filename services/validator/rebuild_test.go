package validator

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestIdempotencyRestoredAtStart (issue 38, E4): a committed key's mark
// is delete-marked while no validator runs (the validator's credential
// can, a purge cannot). A validator started afterwards restores it from
// LEDGER in the background, ingest not waiting for it, and a resend of
// the event is a duplicate of the original, never a second commit nor a
// second POST. Left unrestored (a grace that spares it), the resend is a
// duplicate too: LEDGER holds the key committed from another EVENTS
// message, and the validator never adopts it as the resend's commit.
func TestIdempotencyRestoredAtStart(t *testing.T) {
	for _, tc := range []struct {
		name       string
		downstream bool
		// grace is the restore's (negative: none; an hour spares the
		// key, committed a moment ago).
		grace    time.Duration
		restored bool
		// restoring: the resend comes while the validator is (taken to
		// be) still restoring: its claim looks LEDGER up before the POST.
		restoring bool
	}{
		{"LEDGER only, restored", false, -1, true, false},
		{"downstream, restored", true, -1, true, false},
		{"LEDGER only, not restored: the resend is a duplicate still", false, time.Hour, false, false},
		{"downstream, not restored: the resend is a duplicate still", true, time.Hour, false, false},
		{"downstream, resent while restoring: never posted again", true, time.Hour, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			cfg := testConfig()
			var down *fakeDownstream
			if tc.downstream {
				down = newDownstream(t, func(int64) int { return 200 })
				cfg.DownstreamURL = down.URL
			}
			subject, data := example(t, "pharmacy", "valid", "dispense-schedule-ii.json")
			key := keyOf(t, subject, data)

			first := startValidator(t, srv, cfg, nil)
			original := publish(t, js, subject, data, "")
			var committed KeyState
			natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
				st, err := lookupKey(js, key)
				if err != nil || st.State != StateCommitted {
					return fmt.Errorf("not committed yet: %+v %v", st, err)
				}
				committed = st
				return nil
			})
			first.stop()
			kv, err := js.KeyValue(context.Background(), subjects.IdempotencyBucket)
			if err != nil {
				t.Fatal(err)
			}
			if err := kv.Delete(context.Background(), key); err != nil {
				t.Fatal(err)
			}

			second := startValidator(t, srv, cfg, &testHooks{restoreGrace: tc.grace})
			if tc.restored {
				natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
					st, err := lookupKey(js, key)
					if err != nil || st.State != StateCommitted || st.SourceSeq != original || st.LedgerSeq != committed.LedgerSeq {
						return fmt.Errorf("not restored yet: %+v %v", st, err)
					}
					return nil
				})
			} else {
				// The restore is over (it spared the key) before the
				// resend.
				natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
					if second.commit.restoring.Load() {
						return errors.New("still restoring")
					}
					return nil
				})
			}
			if tc.restoring {
				second.commit.restoring.Store(true)
			}
			publish(t, js, subject, data, "")
			natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
				if st := second.Stats(); st.Duplicates != 1 || st.Committed != 0 {
					return fmt.Errorf("the resend: %d committed, %d duplicates; want a duplicate", st.Committed, st.Duplicates)
				}
				return nil
			})
			if n := ledgerCount(t, js, "pharmacy", key); n != 1 {
				t.Errorf("LEDGER holds %d messages of the key, want 1", n)
			}
			// Restored or not, the key ends marked as LEDGER names it: the
			// original's source, never the resend's.
			if st, err := lookupKey(js, key); err != nil || st.State != StateCommitted || st.SourceSeq != original {
				t.Errorf("after the resend the key is %+v (%v), want committed as the original's (EVENTS %d)", st, err, original)
			}
			if down != nil && (tc.restored || tc.restoring) {
				down.mu.Lock()
				n := down.accepted[key]
				down.mu.Unlock()
				if n != 1 {
					t.Errorf("the downstream accepted the event %d times, want 1", n)
				}
			}
		})
	}
}
