package redriver

import (
	"context"

	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
)

// The parts of the redriver (packages approvals, replay, single, drains)
// reach quarantine chains through chainio.Chains: the chains client
// (chain.go) seen through that interface.
var _ chainio.Chains = (*chains)(nil)

// Append is chains.append (chainio.Appender).
func (c *chains) Append(ctx context.Context, req api.AppendRequest) (api.AppendReply, error) {
	return c.append(ctx, req)
}

// Read is chains.read (chainio.Chains).
func (c *chains) Read(ctx context.Context, domain, id string) (chain.Chain, error) {
	return c.read(ctx, domain, id)
}

// Last is chains.last (chainio.Chains).
func (c *chains) Last(ctx context.Context, domain, id string) (record.Record, error) {
	return c.last(ctx, domain, id)
}
