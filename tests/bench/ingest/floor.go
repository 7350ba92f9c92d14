package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
	vcfg := validator.DefaultConfig()
	_, err := js.CreateOrUpdateConsumer(ctx, in.Name, benchenv.ValidatorConsumer("floor"))
	if err != nil {
		return 0, err
	}
	// The committing side has its own connection, as the validator has.
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	cjs, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	kv, err := cjs.CreateKeyValue(ctx, idem)
	if err != nil {
		return 0, err
	}
	value := []byte(`{"state":"committed","domain":"pharmacy","event_type":"dispense","source_seq":1,"ledger_seq":1,"committed_at":"2026-11-30T00:00:00Z"}`)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		commitEr error
		done     = make(chan struct{})
		left     = len(events)
		work     = make(chan jetstream.Msg, vcfg.Workers)
	)
	for range vcfg.Workers {
		wg.Go(func() {
			for m := range work {
				meta, err := m.Metadata()
				if err == nil {
					key := "k" + strconv.FormatUint(meta.Sequence.Stream, 10)
					lm := nats.NewMsg("floor.ledger." + key)
					lm.Data = m.Data()
					_, err = cjs.PublishMsg(ctx, lm, jetstream.WithMsgID(key), jetstream.WithExpectLastSequencePerSubject(0))
					if err == nil {
						_, err = kv.Create(ctx, key, value)
					}
					if err == nil {
						err = m.Ack()
					}
				}
				mu.Lock()
				if err != nil && commitEr == nil {
					commitEr = err
				}
				if left--; left == 0 {
					close(done)
				}
				mu.Unlock()
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	ccons, err := cjs.Consumer(ctx, in.Name, "floor")
	if err != nil {
		return 0, err
	}
	cc, err := ccons.Consume(func(m jetstream.Msg) { work <- m }, jetstream.PullMaxMessages(2*vcfg.Workers))
	if err != nil {
		return 0, err
	}
	defer func() {
		cc.Drain()
		<-cc.Closed()
	}()
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
	mu.Lock()
	defer mu.Unlock()
	if commitEr != nil {
		return 0, fmt.Errorf("floor: %w", commitEr)
	}
	return rate, nil
}
