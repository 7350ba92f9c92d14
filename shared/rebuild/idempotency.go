package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// IDEMPOTENCY is rebuilt from LEDGER: the validator writes an event's
// LEDGER message (one per key, server-enforced) before it marks the key
// committed, and the message names everything the committed state holds
// (its key, event type, source sequence, replayed chain, content hash and
// identity; its own sequence is the state's LEDGER sequence). A committed
// key whose state is lost is restored committed, so a resent event is a
// duplicate again, never committed as new. A claim or a release without a
// LEDGER message is a commit in flight or given up, not a problem; a key
// marked committed that LEDGER does not hold is extra (a forged mark
// would make a real event be dropped as a duplicate).

type idempotencyIndex struct{}

// ledgerBatch is how many LEDGER messages one direct-get request asks
// for. LEDGER holds only ledger.> subjects: it is read without a subject
// filter (cheaper for the server, see read).
const ledgerBatch = 1024

func (idempotencyIndex) expected(ctx context.Context, r *Rebuilder) (map[string]Entry, error) {
	out := map[string]Entry{}
	err := streams.DirectGetAll(ctx, r.js, subjects.LedgerStream, streams.DirectRequest{Seq: 1, Batch: ledgerBatch},
		func(m *jetstream.RawStreamMsg) error {
			rest, ok := strings.CutPrefix(m.Subject, "ledger.")
			if !ok {
				return nil
			}
			dom, subjKey, ok := strings.Cut(rest, ".")
			if !ok {
				return nil
			}
			key := m.Header.Get(envelope.IdempotencyKey)
			if key == "" {
				key = subjKey
			}
			if _, seen := out[key]; seen {
				return nil // LEDGER takes one message per key: the first is the commit
			}
			src, _ := strconv.ParseUint(m.Header.Get(envelope.SourceSeq), 10, 64)
			out[key] = Entry{Key: key, Value: idempotency.KeyState{
				State: idempotency.StateCommitted, Domain: dom, EventType: m.Header.Get(envelope.EventType), SourceSeq: src,
				LedgerSeq: m.Sequence, CommittedAt: m.Time.UTC(), DLQID: m.Header.Get(envelope.DLQID),
				ContentHash: m.Header.Get(envelope.ContentHash), ContentIdentity: m.Header.Get(envelope.ContentIdentity)}}
			return nil
		})
	if errors.Is(err, nats.ErrNoResponders) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrUnavailable, subjects.LedgerStream, err)
	}
	return out, nil
}

func (idempotencyIndex) decode(_ string, b []byte) (any, error) { return idempotency.Decode(b) }

func (idempotencyIndex) missing(r *Rebuilder, w Entry) (bool, string) {
	st := w.Value.(idempotency.KeyState)
	if r.recent(st.CommittedAt) {
		return false, "" // written to LEDGER, about to be marked
	}
	return true, fmt.Sprintf("LEDGER holds the key committed at sequence %d", st.LedgerSeq)
}

func (idempotencyIndex) diff(r *Rebuilder, s any, w Entry) []string {
	st, want := s.(idempotency.KeyState), w.Value.(idempotency.KeyState)
	if !st.Committed() {
		if st.State == idempotency.StateClaimed && r.now().Before(st.LeaseUntil) {
			return nil // a live claim: its validator marks it committed next
		}
		if r.recent(want.CommittedAt) {
			return nil
		}
		return []string{"state (" + safeState(st.State) + ", LEDGER: committed)"}
	}
	var d []string
	add := func(differs bool, field string) {
		if differs {
			d = append(d, field)
		}
	}
	add(st.Domain != want.Domain, "domain")
	add(st.LedgerSeq != want.LedgerSeq, "ledger_seq")
	add(st.SourceSeq != want.SourceSeq, "source_seq")
	add(st.DLQID != want.DLQID, "dlq_id")
	add(st.EventType != "" && st.EventType != want.EventType, "event_type")
	// A state written before hashes were recorded has none: LEDGER's is
	// read then (idempotency.CommittedHash).
	add(st.ContentHash != "" && (st.ContentHash != want.ContentHash || st.ContentIdentity != want.ContentIdentity), "content_hash")
	return d
}

// safeState names a state for a detail: one of the three, else "unknown"
// (a forged value is never echoed).
func safeState(s string) string {
	switch s {
	case idempotency.StateClaimed, idempotency.StateReleased, idempotency.StateCommitted:
		return s
	}
	return "unknown"
}

func (idempotencyIndex) extra(r *Rebuilder, s any) bool {
	st := s.(idempotency.KeyState)
	return st.Committed() && !r.recent(st.CommittedAt)
}

func (idempotencyIndex) restore(_ *Rebuilder, w Entry, _ any) ([]byte, error) {
	return marshalState(w.Value.(idempotency.KeyState))
}

// marshalState encodes a key state as the validator does (encoding/json).
func marshalState(st idempotency.KeyState) ([]byte, error) { return json.Marshal(st) }
