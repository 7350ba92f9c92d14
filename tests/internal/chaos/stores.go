package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// stores is what LEDGER and QUARANTINE hold, read as the admin with batched
// direct gets.
type stores struct {
	// ledger counts LEDGER messages per idempotency key; ledgerMsgs is
	// their total.
	ledger     map[string]int
	ledgerMsgs int
	// chainsByKey are the quarantined chains by idempotency key (when
	// they have one), chainsByHash every chain by the sha256 of its
	// payload.
	chainsByKey  map[string]bool
	chainsByHash map[string]bool
	// chains counts the first records; repaired those a reconciliation's
	// repair sealed.
	chains, repaired int
}

func readStores(ctx context.Context, js jetstream.JetStream) (*stores, error) {
	st := &stores{ledger: map[string]int{}, chainsByKey: map[string]bool{}, chainsByHash: map[string]bool{}}
	err := streams.DirectGetAll(ctx, js, subjects.LedgerStream, streams.DirectRequest{Seq: 1, Batch: 1000},
		func(m *jetstream.RawStreamMsg) error {
			key := m.Header.Get(envelope.IdempotencyKey)
			if key == "" {
				return fmt.Errorf("chaos: LEDGER message %d has no idempotency key", m.Sequence)
			}
			st.ledger[key]++
			st.ledgerMsgs++
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("chaos: read LEDGER: %w", err)
	}
	err = streams.DirectGetAll(ctx, js, subjects.QuarantineStream, streams.DirectRequest{Seq: 1, Batch: 500},
		func(m *jetstream.RawStreamMsg) error {
			r, err := record.Parse(m.Data)
			if err != nil {
				return fmt.Errorf("chaos: QUARANTINE record %d: %w", m.Sequence, err)
			}
			if r.Index != 0 {
				return nil
			}
			st.chains++
			if strings.Contains(r.ErrorDetail, api.RepairedBy) {
				st.repaired++
			}
			if r.Payload != nil {
				b, err := r.Payload.Bytes()
				if err != nil {
					return fmt.Errorf("chaos: QUARANTINE record %d payload: %w", m.Sequence, err)
				}
				sum := sha256.Sum256(b)
				st.chainsByHash[hex.EncodeToString(sum[:])] = true
			}
			if r.IdempotencyKey != "" {
				st.chainsByKey[r.IdempotencyKey] = true
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("chaos: read QUARANTINE: %w", err)
	}
	return st, nil
}

// unaccounted lists the events with no outcome: a valid one neither in
// LEDGER nor quarantined under its key, a malformed one with no chain of
// its bytes.
func (st *stores) unaccounted(events []event) []string {
	var out []string
	for i, e := range events {
		switch {
		case e.fate == fateMalformed:
			if !st.chainsByHash[e.hash] {
				out = append(out, fmt.Sprintf("event %d (malformed, %s)", i, e.subject))
			}
		case st.ledger[e.key] == 0 && !st.chainsByKey[e.key]:
			out = append(out, fmt.Sprintf("event %d (%s, key %s)", i, e.fate, e.key))
		}
	}
	return out
}

// downstream is the system of record the validator POSTs committed events
// to: it accepts each Idempotency-Key once and answers 200 to a repeat
// without accepting it again, and fails the keys it is told to fail with
// 503 (always, or the first n times).
type downstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	always  map[string]bool
	first   map[string]int
	keys    map[string]bool
	repeats int
}

func newDownstream() *downstream {
	d := &downstream{always: map[string]bool{}, first: map[string]int{}, keys: map[string]bool{}}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	return d
}

func (d *downstream) url() string { return d.srv.URL + "/capture" }

func (d *downstream) close() { d.srv.Close() }

func (d *downstream) failAlways(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.always[key] = true
}

func (d *downstream) failFirst(key string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.first[key] = n
}

// heal ends the outage: every key is accepted from now on.
func (d *downstream) heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.always, d.first = map[string]bool{}, map[string]int{}
}

func (d *downstream) transientKeys() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.first)
}

// accepted returns a copy of the accepted keys and the count of repeats.
func (d *downstream) accepted() (map[string]bool, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(d.keys))
	for k := range d.keys {
		out[k] = true
	}
	return out, d.repeats
}

func (d *downstream) serve(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if key == "" {
		http.Error(w, "no Idempotency-Key", http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.always[key]:
		w.WriteHeader(http.StatusServiceUnavailable)
	case d.first[key] > 0:
		d.first[key]--
		w.WriteHeader(http.StatusServiceUnavailable)
	case d.keys[key]:
		d.repeats++
		w.WriteHeader(http.StatusOK)
	default:
		d.keys[key] = true
		w.WriteHeader(http.StatusOK)
	}
}
