// Package ledger defines the commit state of an idempotency key, as the
// validator stores it in the IDEMPOTENCY bucket and as the redriver and the
// auditor read it.
package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/record"
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
	// written before it was recorded: read the LEDGER entry then).
	ContentHash string `json:"content_hash,omitempty"`
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

// ContentHash is what two events with one idempotency key must share to be
// duplicates of each other: the lowercase hex SHA-256 of the RFC 8785
// canonical form of the payload (record.Canonical), so that a copy that
// differs only in member order or whitespace is the same content. Bytes
// that are no JSON document (never an event that passed the gate, but
// possibly a LEDGER entry someone else wrote) are hashed as they are.
func ContentHash(data []byte) string {
	if c, err := record.Canonical(data); err == nil {
		data = c
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// CommittedHash returns the ContentHash of the event a committed key state
// names: recorded in the state, or, for a state written before it was
// recorded, the hash of the payload of its LEDGER entry (on subject, the
// key's LEDGER subject).
func CommittedHash(ctx context.Context, js jetstream.JetStream, st KeyState, subject string) (string, error) {
	if st.ContentHash != "" {
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
	return ContentHash(raw.Data), nil
}
