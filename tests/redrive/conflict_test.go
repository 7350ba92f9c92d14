package redrive

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestRedriveOfCommittedKey: a quarantined event whose key got committed
// meanwhile (by another copy) is skipped as a duplicate on redrive only
// when the committed content equals its own (canonical JSON); a redrive of
// other content goes through the validator's gate like any event and is
// recorded on the chain as a failed replay IDEMPOTENCY_CONFLICT naming the
// committed LEDGER entry and both hashes, and LEDGER keeps the committed
// entry alone.
func TestRedriveOfCommittedKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		// committed returns the copy committed while the chain is open.
		committed   func(doc map[string]any) map[string]any
		wantOutcome string
	}{
		{"same content, another member order", func(doc map[string]any) map[string]any { return doc }, api.OutcomeSkippedDuplicate},
		{"other content: -300 where the quarantined says -30", func(doc map[string]any) map[string]any {
			doc["quantity_delta"] = "-300"
			return doc
		}, api.OutcomeReplayFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.startRedriver(t, redriverConfig())
			doc := map[string]any{
				"transaction_id": "TX-X", "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
				"lot": "L24A0917", "expiry": "2026-09-30", "quantity_delta": "-30", "unit": "EA",
				"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2025-03-14T15:42:10Z",
				"actor_id": "RPH-0412 Pharmacie Saint-Étienne",
			}
			quarantined := e.mustEvent(t, "events.pharmacy.dispense", doc)
			e.quarantineOutage(t, []event{quarantined})
			e.down.down.Store(false)
			other := tc.committed(doc)
			otherBytes, err := json.MarshalIndent(other, "", "   ") // whitespace differs in every row
			if err != nil {
				t.Fatal(err)
			}
			committed := event{subject: quarantined.subject, data: otherBytes, key: quarantined.key}
			e.publish(t, committed)
			var st idempotency.KeyState
			e.waitCommitted(t, quarantined.key, &st)

			var rep api.RedriveReply
			e.requestJSON(t, api.Redrive, api.RedriveRequest{DLQID: quarantined.key, Reason: "test"}, &rep)
			if rep.Outcome != tc.wantOutcome {
				t.Fatalf("redrive %+v, want %s", rep, tc.wantOutcome)
			}
			if n := ledgerEntries(t, e, quarantined.key); n != 1 {
				t.Fatalf("LEDGER holds %d entries of the key, want 1", n)
			}
			recs, _, err := e.chain(t, quarantined.key)
			if err != nil {
				t.Fatal(err)
			}
			last := recs[len(recs)-1]
			if tc.wantOutcome == api.OutcomeSkippedDuplicate {
				if last.Kind != record.KindSkippedDuplicate {
					t.Fatalf("last record %s, want skipped_duplicate", last.Kind)
				}
				return
			}
			want := record.Conflict{LedgerStream: subjects.LedgerStream, LedgerSeq: st.LedgerSeq,
				CommittedHash: idempotency.ContentHash("pharmacy", otherBytes), ContentHash: idempotency.ContentHash("pharmacy", quarantined.data)}
			if last.Kind != record.KindReplayFailed || last.ErrorCode != codes.IdempotencyConflict || last.Conflict == nil || *last.Conflict != want {
				t.Fatalf("last record %s %s %+v, want replay_failed %s %+v", last.Kind, last.ErrorCode, last.Conflict, codes.IdempotencyConflict, want)
			}
		})
	}
}

// waitCommitted polls until key is committed and returns its state in st.
func (e *env) waitCommitted(tb testing.TB, key string, st *idempotency.KeyState) {
	tb.Helper()
	natstest.CheckFor(tb, 30*time.Second, 20*time.Millisecond, func() error {
		s, found, err := idempotency.Lookup(context.Background(), e.kv, key)
		if err != nil || !found || !s.Committed() {
			return fmt.Errorf("key %s: %+v found %v err %v, want committed", key, s, found, err)
		}
		*st = s
		return nil
	})
}

// ledgerEntries counts the LEDGER messages of a key.
func ledgerEntries(tb testing.TB, e *env, key string) uint64 {
	tb.Helper()
	ls, err := e.js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		tb.Fatal(err)
	}
	subj := subjects.Ledger("pharmacy", key)
	info, err := ls.Info(context.Background(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Subjects[subj]
}
