// Package chains reads quarantine chains for end-to-end tests, through
// shared/chain's reader (every seal checked), and folds them.
package chains

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/record"
)

// ErrNoChain: nothing is stored for the dlq id yet (a test polls).
var ErrNoChain = errors.New("no chain yet")

// Read returns the records of the chain dlqID (its domain is the id's
// prefix) and their folded state; ErrNoChain when none is stored yet. A
// chain that does not fold fails the test.
func Read(tb testing.TB, js jetstream.JetStream, dlqID string) ([]record.Record, record.State, error) {
	tb.Helper()
	ch, err := chain.NewReader(js).Read(context.Background(), domain.DomainOfID(dlqID), dlqID)
	if errors.Is(err, chain.ErrNotFound) {
		return nil, record.State{}, ErrNoChain
	}
	if err != nil {
		return nil, record.State{}, err
	}
	if ch.FoldErr != nil {
		tb.Fatalf("chain %s does not fold: %v", dlqID, ch.FoldErr)
	}
	return ch.Records, ch.State, nil
}
