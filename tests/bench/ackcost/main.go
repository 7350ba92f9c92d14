// Command ackcost measures what a consumer and its acks cost a server's
// publish rate, the question behind the "fewer acks" lever of issue #17:
// raw async publishing alone, then the same with a pull consumer that acks
// every message (AckExplicit, as the validator does), that acks every 64th
// (AckAll, which needs one client to own the consumer), and that acks
// nothing (AckNone, the ceiling of any ack design). The phases run in
// rounds, in ABBA order, on one server with sync_interval: always by
// default; each phase ends when the publisher has every PubAck and the
// consumer has every message, and its rate is printed next to the raw
// phase's of the same round.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/embedded"
)

// modes are the phases of a round, raw first.
var modes = []string{"raw", "explicit", "ackall64", "none"}

func main() {
	n := flag.Int("n", 10000, "messages per phase")
	rounds := flag.Int("rounds", 8, "rounds of every phase")
	syncAlways := flag.Bool("sync-always", true, "fsync every write (sync_interval: always)")
	flag.Parse()
	if err := run(*n, *rounds, *syncAlways); err != nil {
		fmt.Fprintln(os.Stderr, "ackcost:", err)
		os.Exit(1)
	}
}

func run(n, rounds int, syncAlways bool) error {
	dir, err := os.MkdirTemp("", "ackcost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1, SyncAlways: syncAlways})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	connect := func() (jetstream.JetStream, error) {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			return nil, err
		}
		return jetstream.New(nc)
	}
	pub, err := connect()
	if err != nil {
		return err
	}
	sub, err := connect()
	if err != nil {
		return err
	}
	fmt.Printf("ackcost: %d messages of 530 B per phase, %d rounds, sync_always=%v; events/s (%% of raw in the same round)\n", n, rounds, syncAlways)
	rates := map[string][]float64{}
	for r := range rounds {
		order := slices.Clone(modes)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			rate, err := phase(pub, sub, mode, n)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, mode, err)
			}
			rates[mode] = append(rates[mode], rate)
		}
	}
	for _, m := range modes {
		fmt.Printf("%-9s", m)
		for i, x := range rates[m] {
			fmt.Printf(" %6.0f (%3.0f%%)", x, 100*x/rates["raw"][i])
		}
		fmt.Println()
	}
	return nil
}

// phase publishes n messages to a fresh stream, consumed the way mode
// says, and returns the rate at which both ends finished.
func phase(pub, sub jetstream.JetStream, mode string, n int) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := pub.DeleteStream(ctx, "ACKCOST"); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, err
	}
	s, err := pub.CreateStream(ctx, jetstream.StreamConfig{Name: "ACKCOST", Subjects: []string{"ackcost.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		return 0, err
	}
	done := make(chan struct{})
	if mode != "raw" {
		cfg := jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 4096}
		switch mode {
		case "ackall64":
			cfg.AckPolicy = jetstream.AckAllPolicy
		case "none":
			cfg.AckPolicy = jetstream.AckNonePolicy
		}
		if _, err := s.CreateConsumer(ctx, cfg); err != nil {
			return 0, err
		}
		cons, err := sub.Consumer(ctx, "ACKCOST", "c")
		if err != nil {
			return 0, err
		}
		var got atomic.Int64
		cc, err := cons.Consume(func(m jetstream.Msg) {
			k := got.Add(1)
			switch {
			case mode == "explicit", mode == "ackall64" && (k%64 == 0 || k == int64(n)):
				_ = m.Ack()
			}
			if k == int64(n) {
				close(done)
			}
		}, jetstream.PullMaxMessages(2048))
		if err != nil {
			return 0, err
		}
		defer cc.Stop()
	} else {
		close(done)
	}
	payload := make([]byte, 530)
	start := time.Now()
	for range n {
		// A stalled window is waited out and the message sent again.
		for {
			_, err := pub.PublishAsync("ackcost.x", payload, jetstream.WithStallWait(time.Second))
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return 0, err
			}
		}
	}
	select {
	case <-pub.PublishAsyncComplete():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
