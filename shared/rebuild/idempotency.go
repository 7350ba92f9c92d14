package rebuild

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// MaxClaimLease is the longest claim lease taken for a live claim over a
// committed key (the validator's DEADLETTER_CLAIM_LEASE is 30 s by
// default): a claim leased further ahead is altered, not in flight.
const MaxClaimLease = 10 * time.Minute

// ledgerBatch is how many LEDGER messages one direct-get request asks
// for. LEDGER holds only ledger.> subjects: it is read without a subject
// filter (cheaper for the server, see read).
const ledgerBatch = 1024

// each reads LEDGER in order and hands each commit to fn as it comes:
// LEDGER is the largest source (one message per committed event) and is
// never held whole.
func (idempotencyIndex) each(ctx context.Context, r *Rebuilder, fn func(Entry)) error {
	err := scanAll(ctx, r.js, subjects.LedgerStream, streams.DirectRequest{Seq: 1, Batch: ledgerBatch},
		func(m *jetstream.RawStreamMsg) error {
			if key, st, ok := idempotency.FromLedger(m); ok {
				fn(Entry{Key: key, Value: st})
			}
			return nil
		})
	if err != nil && !errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w: read %s: %w", ErrUnavailable, subjects.LedgerStream, err)
	}
	return nil
}

// one is old: LEDGER's message of a key never changes.
func (idempotencyIndex) one(_ context.Context, _ *Rebuilder, old Entry) (Entry, bool, error) {
	return old, true, nil
}

func (idempotencyIndex) decode(_ string, b []byte) (any, error) {
	st, err := idempotency.Decode(b)
	if err != nil {
		return nil, err
	}
	return compactState(st), nil
}

// keyState is a stored key state as Compare keeps it: IDEMPOTENCY holds
// one entry per committed event (a million and more), so what is kept of
// each is small (the hash as bytes, times as integers, the domain, event
// type and identity shared).
type keyState struct {
	sourceSeq, ledgerSeq    uint64
	leaseUntil, committedAt int64 // Unix nanoseconds (0: none)
	hash                    [sha256Size]byte
	// rawHash is a hash that is not 64 hex digits, as stored.
	rawHash                  string
	state, domain, eventType string
	identity, dlqID          string
}

// sha256Size is the size of a content hash.
const sha256Size = 32

// interned shares the few distinct states, domains, event types and
// identities between entries.
var interned sync.Map

// intern returns the shared copy of s.
func intern(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := interned.Load(s); ok {
		return v.(string)
	}
	if len(s) > 64 {
		return s // not one of the few: not shared
	}
	v, _ := interned.LoadOrStore(s, s)
	return v.(string)
}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// compactState is st as Compare keeps it.
func compactState(st idempotency.KeyState) *keyState {
	k := &keyState{sourceSeq: st.SourceSeq, ledgerSeq: st.LedgerSeq, leaseUntil: unixNano(st.LeaseUntil), committedAt: unixNano(st.CommittedAt),
		state: intern(st.State), domain: intern(st.Domain), eventType: intern(st.EventType), identity: intern(st.ContentIdentity), dlqID: st.DLQID}
	if n, err := hex.Decode(k.hash[:], []byte(st.ContentHash)); err != nil || n != sha256Size || len(st.ContentHash) != 2*sha256Size {
		k.hash, k.rawHash = [sha256Size]byte{}, st.ContentHash
	}
	return k
}

// contentHash is the stored hash as written.
func (k *keyState) contentHash() string {
	if k.rawHash != "" || k.hash == ([sha256Size]byte{}) {
		return k.rawHash
	}
	return hex.EncodeToString(k.hash[:])
}

func (idempotencyIndex) missing(r *Rebuilder, w Entry, _ stored) (verdict, string) {
	st := w.Value.(idempotency.KeyState)
	if r.recent(st.CommittedAt) {
		return inFlight, "" // written to LEDGER, about to be marked
	}
	return lost, fmt.Sprintf("LEDGER holds the key committed at sequence %d", st.LedgerSeq)
}

func (idempotencyIndex) diff(r *Rebuilder, s any, w Entry) []string {
	st, want := s.(*keyState), w.Value.(idempotency.KeyState)
	if st.state != idempotency.StateCommitted {
		if now := r.now(); st.state == idempotency.StateClaimed && now.UnixNano() < st.leaseUntil && st.leaseUntil < now.Add(MaxClaimLease).UnixNano() {
			return nil // a live claim: its validator marks it committed next
		}
		if r.recent(want.CommittedAt) {
			return nil
		}
		return []string{"state (" + safeState(st.state) + ", LEDGER: committed)"}
	}
	var d []string
	add := func(differs bool, field string) {
		if differs {
			d = append(d, field)
		}
	}
	add(st.domain != want.Domain, "domain")
	add(st.ledgerSeq != want.LedgerSeq, "ledger_seq")
	add(st.sourceSeq != want.SourceSeq, "source_seq")
	add(st.dlqID != want.DLQID, "dlq_id")
	add(st.eventType != "" && st.eventType != want.EventType, "event_type")
	// A state written before hashes were recorded has none: LEDGER's is
	// read then (idempotency.CommittedHash).
	h := st.contentHash()
	add(h != "" && (h != want.ContentHash || st.identity != want.ContentIdentity), "content_hash")
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
	st := s.(*keyState)
	return st.state == idempotency.StateCommitted && (st.committedAt == 0 || !r.recent(time.Unix(0, st.committedAt)))
}

func (idempotencyIndex) restore(_ *Rebuilder, w Entry, _ any) ([]byte, error) {
	return marshalState(w.Value.(idempotency.KeyState))
}

// marshalState encodes a key state as the validator does (encoding/json).
func marshalState(st idempotency.KeyState) ([]byte, error) { return json.Marshal(st) }
