// Package idempotency defines the commit state of an idempotency key, as the
// validator stores it in the IDEMPOTENCY bucket and as the redriver and the
// auditor read it.
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Commit states.
const (
	// StateClaimed: a validator is committing the event; the claim expires
	// at LeaseUntil.
	StateClaimed = "claimed"
	// StateReleased: the last claimer gave up after a transient failure;
	// anyone may claim again.
	StateReleased = "released"
	// StateCommitted: the event is in LEDGER (and downstream, when set).
	StateCommitted = "committed"
)

// KeyState is the value of an IDEMPOTENCY entry.
type KeyState struct {
	State       string    `json:"state"`
	Owner       string    `json:"owner,omitempty"`
	LeaseUntil  time.Time `json:"lease_until,omitzero"`
	Domain      string    `json:"domain"`
	EventType   string    `json:"event_type,omitempty"`
	SourceSeq   uint64    `json:"source_seq,omitempty"`
	LedgerSeq   uint64    `json:"ledger_seq,omitempty"`
	CommittedAt time.Time `json:"committed_at,omitzero"`
	// DLQID is set when the committed event was a replay of a quarantined
	// event.
	DLQID string `json:"dlq_id,omitempty"`
	// ContentHash is the committed event's ContentHash (absent in states
	// written before it was recorded: read the LEDGER entry then), and
	// ContentIdentity how it was derived (absent in states written before
	// it was recorded: IdentityJCS).
	ContentHash     string `json:"content_hash,omitempty"`
	ContentIdentity string `json:"content_identity,omitempty"`
	// FromLedger marks a committed state written from the key's LEDGER
	// message (FromLedger: by the rebuild, or by the validator of another
	// copy of the event), not by the delivery that committed it: that
	// delivery, when it comes, adopts the state as its commit (Adopts).
	FromLedger bool `json:"from_ledger,omitempty"`
}

// Adopts reports whether the delivery of the EVENTS message at sourceSeq
// takes the committed state s as its own commit: s was written from
// LEDGER's message, and that message names sourceSeq as its source.
func (s KeyState) Adopts(sourceSeq uint64) bool {
	return s.State == StateCommitted && s.FromLedger && s.SourceSeq != 0 && s.SourceSeq == sourceSeq
}

// Committed reports whether the state is committed.
func (s KeyState) Committed() bool { return s.State == StateCommitted }

// Lookup reads a key's state from the IDEMPOTENCY bucket; found is false when
// the key was never claimed nor committed.
func Lookup(ctx context.Context, kv jetstream.KeyValue, key string) (st KeyState, found bool, err error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return KeyState{}, false, nil
	}
	if err != nil {
		return KeyState{}, false, fmt.Errorf("ledger: %w", err)
	}
	if st, err = Decode(e.Value()); err != nil {
		return KeyState{}, false, fmt.Errorf("ledger: state of %s unreadable: %w", key, err)
	}
	return st, true, nil
}

// Decode decodes an IDEMPOTENCY entry's value. It uses
// go-json-experiment/json (member names match exactly, as the validator
// writes them), several times cheaper than encoding/json: the redriver
// decodes one per replay.
func Decode(b []byte) (KeyState, error) {
	var st KeyState
	if err := jsonv2.Unmarshal(b, &st); err != nil {
		return KeyState{}, err
	}
	return st, nil
}

// CommittedHash returns the content hash, in the current identity of its
// domain (ContentHash), of the event a committed key state names: recorded
// in the state when the state records it in that identity, else (a state
// written before the hash or its identity was recorded, or before the
// domain's identity changed) the hash of the payload of its LEDGER entry
// (on subject, the key's LEDGER subject). So a key committed under an
// older identity is compared by the current one, never taken for a
// conflict because the rule changed.
func CommittedHash(ctx context.Context, js jetstream.JetStream, st KeyState, subject string) (string, error) {
	if st.ContentHash != "" && RecordedIdentity(st.ContentIdentity) == Identity(st.Domain) {
		return st.ContentHash, nil
	}
	s, err := js.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return "", fmt.Errorf("ledger: entry of a committed key: %w", err)
	}
	return ContentHash(st.Domain, raw.Data), nil
}

// FromLedger is the committed state LEDGER's message m of a key names:
// the validator writes an event's LEDGER message (one per key) before it
// marks the key, and the message carries everything the mark holds (key,
// event type, source sequence, replayed chain, content hash and
// identity; its own sequence is the state's LEDGER sequence). ok is false
// for a message on no ledger.<domain>.<key> subject. Both the validator
// (marking a key whose LEDGER message another delivery wrote) and the
// rebuild of IDEMPOTENCY read it here.
func FromLedger(m *jetstream.RawStreamMsg) (key string, st KeyState, ok bool) {
	rest, ok := strings.CutPrefix(m.Subject, "ledger.")
	if !ok {
		return "", KeyState{}, false
	}
	dom, subjKey, ok := strings.Cut(rest, ".")
	if !ok {
		return "", KeyState{}, false
	}
	key = m.Header.Get(envelope.IdempotencyKey)
	if key == "" {
		key = subjKey
	}
	src, _ := strconv.ParseUint(m.Header.Get(envelope.SourceSeq), 10, 64)
	return key, KeyState{
		State: StateCommitted, Domain: dom, EventType: m.Header.Get(envelope.EventType), SourceSeq: src,
		LedgerSeq: m.Sequence, CommittedAt: m.Time.UTC(), DLQID: m.Header.Get(envelope.DLQID),
		ContentHash: m.Header.Get(envelope.ContentHash), ContentIdentity: m.Header.Get(envelope.ContentIdentity),
		FromLedger: true,
	}, true
}
