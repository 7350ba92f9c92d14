package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/natstest"
)

// TestConsumeSurvivesConsumerRecreated: the durable consumer is deleted
// and provisioned again while it is consumed (nats.go stops a consumption
// for good when its consumer is deleted); Consume binds it again and the
// next message is handled. When ctx ends, Consume drains and returns.
func TestConsumeSurvivesConsumerRecreated(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}}); err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy}
	provision := func() {
		if _, err := js.CreateOrUpdateConsumer(ctx, "WORK", cfg); err != nil {
			t.Fatal(err)
		}
	}
	provision()
	bind := func(ctx context.Context) (jetstream.Consumer, error) { return js.Consumer(ctx, "WORK", "worker") }
	c, err := bind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	log, logs := testLogger(t)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Consume(cctx, log, "work consumer", c, bind, func(m jetstream.Msg) {
			handled.Add(1)
			_ = m.Ack()
		}, jetstream.PullExpiry(time.Second))
	}()
	publish := func(n int64) {
		t.Helper()
		if _, err := js.Publish(ctx, "work.x", []byte("x")); err != nil {
			t.Fatal(err)
		}
		natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
			if got := handled.Load(); got < n {
				return fmt.Errorf("%d handled, want %d", got, n)
			}
			return nil
		})
	}
	publish(1)
	if err := js.DeleteConsumer(ctx, "WORK", "worker"); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(logs.String(), "consume stopped by the server") {
			return errors.New("stop not logged yet")
		}
		return nil
	})
	provision()
	publish(2)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not return after cancel")
	}
}
