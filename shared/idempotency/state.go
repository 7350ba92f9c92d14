// Package idempotency defines the commit state of an idempotency key, as the
// validator stores it in the IDEMPOTENCY bucket and as the redriver and the
// auditor read it.
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

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
