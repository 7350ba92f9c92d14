package rebuild

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/streams"
)

// requests hands fn every message of REQUESTS (ADR 0024) on filter (a
// prefix ending in ">"), in stream order, or the one message on subject
// one when set. A store
// provisioned before REQUESTS existed reads empty: its approvals and
// drains are restored as far as AUDIT and QUARANTINE know them.
func requests(ctx context.Context, js jetstream.JetStream, filter, one string, fn func(*jetstream.RawStreamMsg)) error {
	var err error
	if one != "" {
		_, err = streams.DirectGet(ctx, js, streams.RequestsStream, streams.DirectRequest{LastFor: one}, func(m *jetstream.RawStreamMsg) error {
			fn(m)
			return nil
		})
	} else {
		// The whole stream, unfiltered (a filtered batch costs the server
		// a pending count per message), its subjects matched here: it
		// holds approvals' requests and drains' starts and ends alone.
		prefix := strings.TrimSuffix(filter, ">")
		err = scanAll(ctx, js, streams.RequestsStream, streams.DirectRequest{Seq: 1, Batch: scanBatch},
			func(m *jetstream.RawStreamMsg) error {
				if strings.HasPrefix(m.Subject, prefix) {
					fn(m)
				}
				return nil
			})
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: read %s: %w", ErrUnavailable, streams.RequestsStream, err)
	}
	return nil
}
