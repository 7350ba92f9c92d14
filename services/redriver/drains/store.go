package drains

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// The DRAINS bucket's stream and key subjects. The redriver lists the
// bucket with direct gets on its stream (kv.ListKeys would create an
// ordered consumer, a right the redriver does not have).
const (
	drainsStream   = "KV_" + subjects.DrainsBucket
	drainsPrefix   = "$KV." + subjects.DrainsBucket + "."
	drainsAll      = drainsPrefix + ">"
	kvMarkerReason = "Nats-Marker-Reason"
	// kvOperation is the header marking a key-value delete or purge.
	kvOperation = "KV-Operation"
)

// storedDrain is one drain as stored in DRAINS, with its revision.
type storedDrain struct {
	key   string
	rev   uint64
	state api.DrainState
	// err is set when the value does not decode.
	err error
}

// listDrains returns every drain stored in DRAINS, skipping delete and
// purge markers. It asks for the last message of every key in one
// multi-last direct get (continued when max_bytes cuts the reply short);
// a bucket with more keys than one multi-last get may name is read by a
// batch scan of the whole stream instead, the last message per key
// winning.
func listDrains(ctx context.Context, js jetstream.JetStream) ([]storedDrain, error) {
	last := map[string]storedDrain{}
	var order []string
	keep := func(raw *jetstream.RawStreamMsg) error {
		key, ok := strings.CutPrefix(raw.Subject, drainsPrefix)
		if !ok {
			return nil
		}
		if _, seen := last[key]; !seen {
			order = append(order, key)
		}
		if raw.Header.Get(kvOperation) != "" || raw.Header.Get(kvMarkerReason) != "" {
			last[key] = storedDrain{key: key} // deleted, purged or expired
			return nil
		}
		d := storedDrain{key: key, rev: raw.Sequence}
		d.err = json.Unmarshal(raw.Data, &d.state)
		last[key] = d
		return nil
	}
	err := multiLast(ctx, js, keep)
	if errors.Is(err, errTooManyKeys) {
		clear(last)
		order = order[:0]
		err = scanDrains(ctx, js, keep)
	}
	if err != nil {
		return nil, fmt.Errorf("redriver: list drains: %w", err)
	}
	out := make([]storedDrain, 0, len(order))
	for _, k := range order {
		if d := last[k]; d.rev != 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// errTooManyKeys: the bucket has more keys than one multi-last get may
// return.
var errTooManyKeys = errors.New("redriver: more drains than one multi-last get returns")

// multiLast reads the last message of every DRAINS key, as of the stream's
// last sequence when the first reply was sent.
func multiLast(ctx context.Context, js jetstream.JetStream, fn func(*jetstream.RawStreamMsg) error) error {
	err := streams.DirectGetAll(ctx, js, drainsStream,
		streams.DirectRequest{MultiLast: []string{drainsAll}, Batch: streams.MaxMultiLast, MaxBytes: selection.ScanMaxBytes}, fn)
	// The server answers 413 Too Many Results when the filter matches more
	// subjects than it sends in one reply.
	if err != nil && strings.Contains(err.Error(), "status 413") {
		return fmt.Errorf("%w: %w", errTooManyKeys, err)
	}
	return err
}

// scanDrains reads every message of DRAINS in stream order.
func scanDrains(ctx context.Context, js jetstream.JetStream, fn func(*jetstream.RawStreamMsg) error) error {
	return streams.DirectGetAll(ctx, js, drainsStream,
		streams.DirectRequest{Seq: 1, NextFor: drainsAll, Batch: selection.ScanBatch, MaxBytes: selection.ScanMaxBytes}, fn)
}
