package retry

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
)

// Consume consumes c with handler until ctx ends, then drains the
// consumption (the messages already delivered reach handler) and returns.
//
// A consumption that stops while ctx is still running (the server ends a
// pull consumer whose durable was deleted, as an administrator may do while
// re-provisioning it, and nats.go then stops for good) is logged and
// resumed on a consumer bound again by bind, retried with back-off like a
// start-up step: without this the service stayed up, answered pings and
// consumed nothing.
func Consume(ctx context.Context, log *slog.Logger, step string, c jetstream.Consumer,
	bind func(context.Context) (jetstream.Consumer, error), handler jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) {
	for {
		cc, err := Value(ctx, log, step, func(ctx context.Context) (jetstream.ConsumeContext, error) {
			if c == nil {
				var err error
				if c, err = bind(ctx); err != nil {
					return nil, err
				}
			}
			cc, err := c.Consume(handler, opts...)
			if err != nil {
				c = nil
				return nil, err
			}
			return cc, nil
		})
		if err != nil {
			return // ctx ended
		}
		closed := cc.Closed()
		select {
		case <-ctx.Done():
			cc.Drain()
			<-closed
			return
		case <-closed:
			log.Warn("consume stopped by the server; binding the consumer again", "step", step)
			c = nil
		}
	}
}
