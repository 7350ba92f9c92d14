package streams

import "github.com/nats-io/nats.go/jetstream"

// Settled reports whether the consumer described by info will never
// deliver stream sequence seq again: it is at or below the consumer's
// acknowledgement floor, or it was delivered and nothing delivered is
// waiting for an acknowledgement. A message whose deliveries ran out
// (MaxDeliver) leaves the floor below it until nothing is pending, so the
// second rule is what settles it on a quiet consumer.
func Settled(info *jetstream.ConsumerInfo, seq uint64) bool {
	if info == nil {
		return false
	}
	return seq <= info.AckFloor.Stream || (seq <= info.Delivered.Stream && info.NumAckPending == 0)
}
