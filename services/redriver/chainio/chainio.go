// Package chainio is what the redriver's parts (approvals, single
// redrives, drains, the replay engine) need of quarantine chains: reads
// of a chain and the conditional appends they ask of the quarantiner
// (quarantiner.append, the only writer of QUARANTINE). The redriver's
// Service owns the client (its chains) and hands it to each part as a
// Chains or an Appender; it also owns parsing a dlq id's domain here.
package chainio

import (
	"context"
	"errors"

	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Appender asks the quarantiner to append a lifecycle record to a chain.
// A refused append's error carries its reply code (CodeOf).
type Appender interface {
	Append(ctx context.Context, req api.AppendRequest) (api.AppendReply, error)
}

// Chains reads quarantine chains (seals verified) and asks for appends.
// Read and Last return chain.ErrNotFound and chain.ErrUnreadable as
// themselves (wrapped or not).
type Chains interface {
	Appender
	// Read returns a chain, seals verified, folded.
	Read(ctx context.Context, domain, id string) (chain.Chain, error)
	// Last returns the last record of a chain, seal verified.
	Last(ctx context.Context, domain, id string) (record.Record, error)
}

// CodeOf returns the api error code of a refused append ("" for any
// other error): chain.CodeOf.
func CodeOf(err error) string { return chain.CodeOf(err) }

// Origin is what the span of a step on chain ch links to: the chain and
// the trace its first record names (its redrive count as it stands).
func Origin(ch chain.Chain) telemetry.Redrive {
	return telemetry.Redrive{DLQID: ch.DLQID, Domain: ch.Domain, Count: ch.State.RedriveCount,
		OriginalTraceID: ch.State.TraceID, OriginalSpanID: ch.State.SpanID}
}

// ErrBadDLQID: the dlq id is not "<domain>_<token>" with safe characters.
var ErrBadDLQID = errors.New("redriver: malformed dlq id")

// DomainOf returns the domain prefix of a dlq id ("<domain>_<hex>", as
// record.DLQIDFor builds them), checking the id is a safe subject token
// (selection.DomainOf); else ErrBadDLQID.
func DomainOf(id string) (string, error) {
	dom, ok := selection.DomainOf(id)
	if !ok {
		return "", ErrBadDLQID
	}
	return dom, nil
}
