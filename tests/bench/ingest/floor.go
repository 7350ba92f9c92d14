package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// floor measures the store-bound ceiling of the ingest path: the same
// payloads published, consumed and committed with the validator's stores
// and settings (a durable pull consumer with its MaxAckPending, pull batch
// and worker count; per event a LEDGER write conditional on its key's
// subject, an IDEMPOTENCY create, an ack) but with no validation, no
// idempotency-key derivation and no tracing: what no validator code can
// beat on this machine. It runs on its own streams (FLOOR_EVENTS,
// FLOOR_LEDGER, KV FLOOR_IDEMPOTENCY) configured like EVENTS, LEDGER and
// IDEMPOTENCY, and returns events per second.
func floor(ctx context.Context, url string, js jetstream.JetStream, o streams.Options, events []event) (float64, error) {
	in := streams.Events(o)
	in.Sources = nil // the floor's intake: no replays
	in.Name, in.Subjects = "FLOOR_EVENTS", []string{"floor.events.>"}
	led := streams.Ledger(o)
	led.Name, led.Subjects = "FLOOR_LEDGER", []string{"floor.ledger.>"}
	idem := streams.Idempotency(o)
	idem.Bucket = "FLOOR_IDEMPOTENCY"
	if _, err := js.CreateStream(ctx, in); err != nil {
		return 0, err
	}
	if _, err := js.CreateStream(ctx, led); err != nil {
		return 0, err
	}
	if _, err := js.CreateKeyValue(ctx, idem); err != nil {
		return 0, err
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, in.Name, benchenv.ValidatorConsumer("floor")); err != nil {
		return 0, err
	}
	var (
		mu   sync.Mutex
		done = make(chan struct{})
		left = len(events)
	)
	fc, err := benchenv.StartFloorCommitter(ctx, benchenv.FloorCommit{
		URL: url, Stream: in.Name, Consumer: "floor", Bucket: idem.Bucket,
		Ledger:  func(key string) string { return "floor.ledger." + key },
		Workers: validator.DefaultConfig().Workers,
		Key: func(m jetstream.Msg) (string, error) {
			meta, err := m.Metadata()
			if err != nil {
				return "", err
			}
			return "k" + strconv.FormatUint(meta.Sequence.Stream, 10), nil
		},
		Done: func(error) {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				close(done)
			}
		},
	})
	if err != nil {
		return 0, err
	}
	defer fc.Stop()
	start := time.Now()
	if err := publishAll(ctx, js, events, func(e event) string { return "floor." + e.subject }); err != nil {
		return 0, err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("floor: stalled")
	}
	rate := float64(len(events)) / time.Since(start).Seconds()
	if err := fc.Err(); err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	return rate, nil
}
