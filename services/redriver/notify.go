package redriver

import (
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/subjects"
)

// notifier wakes the replays waiting for an outcome when something they
// watch changes: their key's IDEMPOTENCY entry ($KV.IDEMPOTENCY.<key>) or
// their quarantine chain (quarantine.<domain>.<dlq_id>). It holds two core
// subscriptions while anyone waits (none when idle). A wake-up is only a
// hint that makes the waiter look now: a missed one costs a poll interval,
// never a wrong outcome. The wake-up is the message itself: an IDEMPOTENCY
// entry's value spares the waiter a read of the bucket.
type notifier struct {
	nc *nats.Conn

	mu      sync.Mutex
	waiters map[string]map[chan *nats.Msg]struct{}
	n       int // registered channels
	subs    []*nats.Subscription
}

const kvPrefix = "$KV." + subjects.IdempotencyBucket + "."

func newNotifier(nc *nats.Conn) *notifier {
	return &notifier{nc: nc, waiters: map[string]map[chan *nats.Msg]struct{}{}}
}

// watch registers ch for the names (idempotency keys and dlq ids); the
// returned func unregisters it.
func (n *notifier) watch(ch chan *nats.Msg, names ...string) func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, name := range names {
		if name == "" {
			continue
		}
		set := n.waiters[name]
		if set == nil {
			set = map[chan *nats.Msg]struct{}{}
			n.waiters[name] = set
		}
		set[ch] = struct{}{}
	}
	n.n++
	if n.n == 1 && n.subs == nil {
		for _, subj := range []string{kvPrefix + ">", subjects.QuarantineAll} {
			if sub, err := n.nc.Subscribe(subj, n.deliver); err == nil {
				_ = sub.SetPendingLimits(1<<16, 64<<20)
				n.subs = append(n.subs, sub)
			}
		}
	}
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, name := range names {
			if set := n.waiters[name]; set != nil {
				delete(set, ch)
				if len(set) == 0 {
					delete(n.waiters, name)
				}
			}
		}
		n.n--
		if n.n == 0 {
			for _, s := range n.subs {
				_ = s.Unsubscribe()
			}
			n.subs = nil
		}
	}
}

// deliver hands the message to the waiters of its key or dlq id, dropping
// it for a waiter whose channel is full (it will look anyway).
func (n *notifier) deliver(m *nats.Msg) {
	name := m.Subject
	if strings.HasPrefix(name, kvPrefix) {
		name = name[len(kvPrefix):]
	} else if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	n.mu.Lock()
	for ch := range n.waiters[name] {
		select {
		case ch <- m:
		default:
		}
	}
	n.mu.Unlock()
}
