package redriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
)

// Errors of chain access.
var (
	// ErrNoChain: no quarantine chain has the dlq id.
	ErrNoChain = chain.ErrNotFound
	// ErrBadDLQID: the dlq id is not "<domain>_<token>" with safe characters.
	ErrBadDLQID = chainio.ErrBadDLQID
	// ErrUnreadableChain: a stored record fails its seal or does not parse.
	ErrUnreadableChain = chain.ErrUnreadable
)

// chains reads quarantine chains (chain.Reader) and asks for appends. The
// quarantiner is the only writer: every change the redriver makes is a
// request to quarantiner.append.
type chains struct {
	reader *chain.Reader
	app    *chain.Appender
}

// last returns the last record of a chain, seal verified.
func (c *chains) last(ctx context.Context, domain, id string) (record.Record, error) {
	r, _, err := c.reader.LastRecord(ctx, domain, id)
	return r, chainErr(err)
}

// read returns a chain, seals verified, folded.
func (c *chains) read(ctx context.Context, domain, id string) (chain.Chain, error) {
	ch, err := c.reader.Read(ctx, domain, id)
	return ch, chainErr(err)
}

// chainErr wraps an error of chain.Reader other than its sentinels.
func chainErr(err error) error {
	if err == nil || errors.Is(err, chain.ErrNotFound) || errors.Is(err, chain.ErrUnreadable) {
		return err
	}
	return fmt.Errorf("redriver: read chain: %w", err)
}

// append asks the quarantiner to append a lifecycle record (the shared
// client, chain.Appender: a refusal is a *chain.AppendError with its code).
// The record the quarantiner writes names the trace of this request (a
// redrive's own trace), so the redrive is found from the dlq id.
func (c *chains) append(ctx context.Context, req api.AppendRequest) (api.AppendReply, error) {
	return c.app.Append(ctx, req)
}
