package rebuild

import (
	"context"
	"encoding/json"
	"io/fs"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestWipedIdempotencyIsRestored (E4): the validator's credential, the
// one writer of IDEMPOTENCY, delete-marks committed keys. Compare names
// each committed key missing; Restore (as the validator) writes them back
// from LEDGER, and a resend of a committed event is a duplicate: its key
// state still names the original, LEDGER holds one message. Unrestored,
// the resend is a duplicate too (LEDGER holds the key committed from
// another EVENTS message: the validator never adopts it as the resend's
// commit), and the resend's delivery marks the key as LEDGER names it
// (the original's sequence, from_ledger; validator 830a271).
func TestWipedIdempotencyIsRestored(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	subject := subjects.Event("pharmacy", "dispense")
	kv, err := s.js(t, access.Validator).KeyValue(ctx, subjects.IdempotencyBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		restore bool
	}{
		{"restored: the resend is a duplicate", true},
		{"not restored: the resend is a duplicate, the key marked as LEDGER names it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, key := validEvent(t, subject, "Müller & Söhne <Großhandel> "+tc.name)
			first := s.publish(t, subject, data)
			var committed idempotency.KeyState
			natstest.CheckFor(t, waitFor, 20*time.Millisecond, func() error {
				st, found, err := idempotency.Lookup(ctx, kv, key)
				if err != nil || !found || !st.Committed() {
					return errorf("key %s not committed yet (%v)", key, err)
				}
				committed = st
				return nil
			})
			if committed.SourceSeq != first.Sequence {
				t.Fatalf("committed from EVENTS %d, published at %d", committed.SourceSeq, first.Sequence)
			}
			if ps := s.compare(t, access.Validator, subjects.IdempotencyBucket); len(ps) != 0 {
				t.Fatalf("a clean IDEMPOTENCY reports %+v", ps)
			}
			n := s.wipe(t, access.Validator, subjects.IdempotencyBucket)
			ps := s.compare(t, access.Validator, subjects.IdempotencyBucket)
			if k := kinds(ps, nil); k[rebuild.Missing] != n || len(ps) != n {
				t.Fatalf("compare after wiping %d keys: %v %+v", n, k, ps)
			}
			if tc.restore {
				rep := s.restore(t, access.Validator, subjects.IdempotencyBucket)
				if rep.Created != n || len(rep.Unrestorable) != 0 {
					t.Fatalf("restore: %+v", rep)
				}
				if ps := s.compare(t, access.Validator, subjects.IdempotencyBucket); len(ps) != 0 {
					t.Fatalf("compare after restore: %+v", ps)
				}
				st, _, err := idempotency.Lookup(ctx, kv, key)
				if err != nil || st.LedgerSeq != committed.LedgerSeq || st.SourceSeq != committed.SourceSeq || st.ContentHash != committed.ContentHash {
					t.Fatalf("restored state %+v (%v), committed %+v", st, err, committed)
				}
			}

			resend := s.publish(t, subject, data)
			s.settled(t, resend.Sequence)
			st, found, err := idempotency.Lookup(ctx, kv, key)
			switch {
			case err != nil:
				t.Fatalf("after the resend: %v", err)
			case !found || !st.Committed() || st.SourceSeq != first.Sequence || st.LedgerSeq != committed.LedgerSeq:
				// Restored, or not: the resend's delivery finds the key in
				// LEDGER and marks it as LEDGER names it (from_ledger),
				// never as the resend's own commit.
				t.Errorf("key state names EVENTS %d (LEDGER %d, found %v), want %d (LEDGER %d)", st.SourceSeq, st.LedgerSeq, found, first.Sequence, committed.LedgerSeq)
			}
			if !tc.restore {
				if ps := s.compare(t, access.Validator, subjects.IdempotencyBucket); kinds(ps, map[string]bool{key: true})[rebuild.Missing] != 0 {
					t.Errorf("compare after the resend of a key not restored: %+v, want it marked again", ps)
				}
			}
			if n := s.ledgerMessages(t, subjects.Ledger("pharmacy", key)); n != 1 {
				t.Errorf("LEDGER holds %d messages of the key, want 1", n)
			}
		})
	}
}

// validEvent returns the pharmacy example with a unique transaction id
// carrying marker, and its idempotency key as the gate derives it.
func validEvent(t *testing.T, subject, marker string) ([]byte, string) {
	t.Helper()
	b, err := fs.ReadFile(schemas.FS, "testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["transaction_id"] = "INV-REBUILD-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	doc["note"] = marker
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	env, err := g.Check(subject, b)
	if err != nil {
		delete(doc, "note")
		if b, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if env, err = g.Check(subject, b); err != nil {
			t.Fatalf("the example does not pass the gate: %v", err)
		}
	}
	return b, env.IdempotencyKey
}

// settled waits until the validator acknowledged EVENTS up to seq.
func (s *system) settled(t *testing.T, seq uint64) {
	t.Helper()
	js := s.js(t, access.Admin)
	natstest.CheckFor(t, waitFor, 20*time.Millisecond, func() error {
		c, err := js.Consumer(context.Background(), subjects.EventsStream, subjects.ValidatorConsumer)
		if err != nil {
			return err
		}
		in, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if in.AckFloor.Stream < seq {
			return errorf("validator acknowledged EVENTS up to %d, waiting for %d", in.AckFloor.Stream, seq)
		}
		return nil
	})
}

// ledgerMessages counts LEDGER's messages on subject.
func (s *system) ledgerMessages(t *testing.T, subject string) uint64 {
	t.Helper()
	st, err := s.js(t, access.Admin).Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	in, err := st.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return in.State.Subjects[subject]
}
