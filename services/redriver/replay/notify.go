package replay

import (
	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/subjects"
)

// notifier wakes a replay waiting for its outcome when something it
// watches changes: its key's IDEMPOTENCY entry ($KV.IDEMPOTENCY.<key>) or
// its quarantine chain (quarantine.<domain>.<dlq_id>). Each watch holds
// core subscriptions on exactly those subjects for as long as it waits, so
// the redriver receives the messages of the replays in flight only, not
// every commit of the system. A wake-up is only a hint that makes the
// waiter look now: a missed one costs a poll interval, never a wrong
// outcome. The wake-up is the message itself: an IDEMPOTENCY entry's value
// spares the waiter a read of the bucket.
type notifier struct {
	nc *nats.Conn
}

const kvPrefix = "$KV." + subjects.IdempotencyBucket + "."

func newNotifier(nc *nats.Conn) *notifier { return &notifier{nc: nc} }

// watch delivers to ch the changes of key's IDEMPOTENCY entry (none when
// key is "") and of the chain of dlqID in domain; the returned func stops
// (a second call does nothing).
// ch must have room for the few messages of one replay: a message that
// finds it full is dropped (the waiter looks anyway).
func (n *notifier) watch(ch chan *nats.Msg, key, domain, dlqID string) func() {
	var subs []*nats.Subscription
	for _, subj := range []string{kvPrefix + key, subjects.Quarantine(domain, dlqID)} {
		if subj == kvPrefix {
			continue
		}
		if sub, err := n.nc.ChanSubscribe(subj, ch); err == nil {
			subs = append(subs, sub)
		}
	}
	return func() {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		subs = nil
	}
}
