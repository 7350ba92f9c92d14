package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
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
//
// With batch above 0 it commits the best way the design knows (atomic
// batches of the events ready together, up to batch; FloorCommit.Batch),
// on streams of its own (FLOORB_*), so both floors run in one process.
//
// With validate, each event also passes the validation gate (the schema
// and domain rules, and the idempotency key from the payload), which the
// design cannot drop: the floor of the best design that does the work a
// validator must.
func floor(ctx context.Context, url string, js jetstream.JetStream, o streams.Options, events []event, batch int, writes benchenv.FloorWrites, validate bool) (float64, phase, error) {
	rate, ph, _, err := floorAt(ctx, url, js, o, events, batch, writes, validate, 0)
	return rate, ph, err
}

// floorAt is floor; with openLoop above 0 the events are published open
// loop at that rate (events/s, as the latency phase publishes) on streams
// of their own, and it also returns the quantiles (p50, p90, p99, max) of
// the time from each publish to its LEDGER message's stored timestamp: the
// latency floor of the design at that load.
func floorAt(ctx context.Context, url string, js jetstream.JetStream, o streams.Options, events []event, batch int, writes benchenv.FloorWrites, validate bool, openLoop float64) (float64, phase, [4]time.Duration, error) {
	var q [4]time.Duration
	name, prefix := "FLOOR", "floor"
	if batch > 0 {
		name, prefix = fmt.Sprintf("FLOORB%d", writes), fmt.Sprintf("floorb%d", writes)
	}
	if openLoop > 0 {
		name, prefix = name+"L", prefix+"l"
	}
	var g *gate.Gate
	if validate {
		name, prefix = name+"V", prefix+"v"
		var err error
		if g, err = gate.New(0); err != nil {
			return 0, phase{}, q, err
		}
	}
	in := streams.Events(o)
	in.Sources = nil // the floor's intake: no replays
	in.Name, in.Subjects = name+"_EVENTS", []string{prefix + ".events.>"}
	in.MaxBytes = 1 << 30 // several floors in one run stay inside the server's store
	led := streams.Ledger(o)
	led.Name, led.Subjects = name+"_LEDGER", []string{prefix + ".ledger.>"}
	idem := streams.Idempotency(o)
	idem.Bucket = name + "_IDEMPOTENCY"
	if _, err := js.CreateStream(ctx, in); err != nil {
		return 0, phase{}, q, err
	}
	if _, err := js.CreateStream(ctx, led); err != nil {
		return 0, phase{}, q, err
	}
	if _, err := js.CreateKeyValue(ctx, idem); err != nil {
		return 0, phase{}, q, err
	}
	// Like IDEMPOTENCY, the bucket's stream allows atomic batches.
	ks, err := js.Stream(ctx, subjects.BucketStream(idem.Bucket))
	if err != nil {
		return 0, phase{}, q, err
	}
	kc := ks.CachedInfo().Config
	kc.AllowAtomicPublish = true
	if _, err := js.UpdateStream(ctx, kc); err != nil {
		return 0, phase{}, q, err
	}
	cc := benchenv.ValidatorConsumer("floor")
	if floorConsumerR1Memory {
		// Consumer state that can be rebuilt (redelivery is harmless: the
		// ledger dedupes) need not be replicated nor stored on disk.
		cc.Replicas, cc.MemoryStorage = 1, true
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, in.Name, cc); err != nil {
		return 0, phase{}, q, err
	}
	var (
		mu   sync.Mutex
		done = make(chan struct{})
		left = len(events)
	)
	fc, err := benchenv.StartFloorCommitter(ctx, benchenv.FloorCommit{
		URL: url, Stream: in.Name, Consumer: "floor", Bucket: idem.Bucket,
		Ledger: func(key string) string { return prefix + ".ledger." + key },
		Batch:  batch, Writes: writes,
		Workers: validator.DefaultConfig().Workers,
		Key: func(m jetstream.Msg) (string, error) {
			meta, err := m.Metadata()
			if err != nil {
				return "", err
			}
			if g != nil {
				// The gate's verdict is charged, not acted on: a poison
				// event is committed like the others, so every floor
				// writes the same number of messages.
				if env, err := g.Check(strings.TrimPrefix(m.Subject(), prefix+"."), m.Data()); err == nil && env.IdempotencyKey != "" {
					return "k" + strconv.FormatUint(meta.Sequence.Stream, 10), nil
				}
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
		return 0, phase{}, q, err
	}
	defer fc.Stop()
	subject := func(e event) string { return prefix + "." + e.subject }
	var sent []atomic.Int64
	if openLoop > 0 {
		sent = make([]atomic.Int64, len(events))
	}
	start, cpu0 := time.Now(), cpuTime()
	if openLoop > 0 {
		err = publishOpenLoop(ctx, js, events, openLoop, subject, sent)
	} else {
		err = publishAll(ctx, js, events, subject)
	}
	if err != nil {
		return 0, phase{}, q, err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return 0, phase{}, q, fmt.Errorf("floor: stalled")
	}
	rate := float64(len(events)) / time.Since(start).Seconds()
	if err := fc.Err(); err != nil {
		return 0, phase{}, q, fmt.Errorf("floor: %w", err)
	}
	ph := phase{rate: rate, cpuPerEvent: (cpuTime() - cpu0) / time.Duration(len(events))}
	if openLoop > 0 {
		// The floor's keys are "k<EVENTS sequence>" and its streams are
		// fresh: event i is sequence i+1, its LEDGER message among the
		// first len(events).
		lat, err := commitLatencies(ctx, js, led.Name, 1, len(events), func(key string) (int, bool) {
			seq, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
			return seq - 1, err == nil && seq >= 1 && seq <= len(events)
		}, sent)
		if err != nil {
			return 0, phase{}, q, fmt.Errorf("floor: %w", err)
		}
		q = quantiles(lat)
	}
	return rate, ph, q, nil
}
