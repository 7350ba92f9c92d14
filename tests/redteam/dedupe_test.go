package redteam

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestMsgIDCannotDropAnotherEvent (H9): a publisher who stores junk under
// Nats-Msg-Id "order-4242" first cannot make the real event with that id
// be dropped as a duplicate: EVENTS honours no Nats-Msg-Id, so the real
// event is stored and committed; a retry of it is stored too and
// acknowledged by the validator as a duplicate of its business key, so it
// is committed once.
func TestMsgIDCannotDropAnotherEvent(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	subject := subjects.Event("pharmacy", "dispense")
	valid, key := uniqueValidEvent(t, subject)
	ledgerBefore, _ := e.msgs(t, subjects.LedgerStream)

	steps := []struct {
		name string
		data []byte
		// wantLedger is LEDGER's growth once the validator has settled
		// the message.
		wantLedger uint64
	}{
		{"junk under the victim's id", []byte(`{"junk":`), 0},
		{"the real event", valid, 1},
		{"its retry", valid, 1},
	}
	var committedSeq uint64
	for i, st := range steps {
		ack := e.publishAck(t, subject, st.data, nats.Header{jetstream.MsgIDHeader: {"order-4242"}})
		if ack.Duplicate || ack.Stream != subjects.EventsStream {
			t.Fatalf("%s: ack %+v, want stored in EVENTS, not a duplicate", st.name, ack)
		}
		if i == 1 {
			committedSeq = ack.Sequence
		}
		e.settled(t, ack.Sequence)
		if got, _ := e.msgs(t, subjects.LedgerStream); got != ledgerBefore+st.wantLedger {
			t.Errorf("%s: LEDGER went from %d to %d messages, want +%d", st.name, ledgerBefore, got, st.wantLedger)
		}
	}
	kv, err := e.admin.KeyValue(ctx, subjects.IdempotencyBucket)
	if err != nil {
		t.Fatal(err)
	}
	ks, found, err := idempotency.Lookup(ctx, kv, key)
	if err != nil || !found || !ks.Committed() {
		t.Fatalf("IDEMPOTENCY %+v (found %v, %v), want committed", ks, found, err)
	}
	if ks.SourceSeq != committedSeq {
		t.Errorf("committed from EVENTS %d, want %d (the real event, not its retry)", ks.SourceSeq, committedSeq)
	}
	s, err := e.admin.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Info(ctx, jetstream.WithSubjectFilter(subjects.Ledger("pharmacy", key)))
	if err != nil {
		t.Fatal(err)
	}
	if n := in.State.Subjects[subjects.Ledger("pharmacy", key)]; n != 1 {
		t.Errorf("LEDGER holds %d messages for the key, want 1", n)
	}
}

// uniqueValidEvent returns a valid pharmacy event from schemas' testdata
// with a transaction id of its own (the shared stack outlives one test),
// and its idempotency key.
func uniqueValidEvent(tb testing.TB, subject string) ([]byte, string) {
	tb.Helper()
	b, err := fs.ReadFile(schemas.FS, "testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		tb.Fatal(err)
	}
	doc["transaction_id"] = "INV-H9-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if b, err = json.Marshal(doc); err != nil {
		tb.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	env, err := g.Check(subject, b)
	if err != nil {
		tb.Fatalf("the example does not pass the gate: %v", err)
	}
	return b, env.IdempotencyKey
}

// publishAck publishes data on subject as the publisher, through its
// import, with headers h, and returns the acknowledgement.
func (e *env) publishAck(tb testing.TB, subject string, data []byte, h nats.Header) *jetstream.PubAck {
	tb.Helper()
	js, err := jetstream.New(e.conn(tb, string(access.RolePublisher)))
	if err != nil {
		tb.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range h {
		m.Header[k] = v
	}
	ack, err := js.PublishMsg(context.Background(), m)
	if err != nil {
		tb.Fatalf("publish: %v", err)
	}
	return ack
}

// settled waits until the validator's consumer has acknowledged every
// EVENTS message up to seq.
func (e *env) settled(tb testing.TB, seq uint64) {
	tb.Helper()
	natstest.CheckFor(tb, 30*time.Second, 20*time.Millisecond, func() error {
		c, err := e.admin.Consumer(context.Background(), subjects.EventsStream, subjects.ValidatorConsumer)
		if err != nil {
			return err
		}
		in, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if in.AckFloor.Stream < seq {
			return fmt.Errorf("validator acknowledged EVENTS up to %d, waiting for %d", in.AckFloor.Stream, seq)
		}
		return nil
	})
}
