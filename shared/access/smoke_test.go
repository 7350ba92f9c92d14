package access_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
)

func TestSmoke(t *testing.T) {
	e := startEnv(t, 1)
	// publisher publishes through the import and gets a PubAck
	pub := e.conn(t, "publisher", nil)
	js := e.js(t, pub)
	ack, err := js.Publish(testCtx(t, 5*time.Second), "events.pharmacy.dispense", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ack %+v", ack)
	// an operator-side responder in DEADLETTER: use the redriver user to answer drain.start
	r := e.conn(t, access.Redriver, nil)
	got := make(chan nats.Header, 1)
	sub, err := r.Subscribe("drain.start", func(m *nats.Msg) {
		got <- m.Header
		t.Logf("reply subject %q", m.Reply)
		_ = m.Respond([]byte("ok"))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Flush()
	defer sub.Unsubscribe()
	op := e.conn(t, "operator", nil)
	m := nats.NewMsg("drain.start")
	m.Header = nats.Header{"Nats-Request-Info": []string{`{"acc":"DEADLETTER_OPERATOR","user":"mallory"}`}}
	rep, err := op.RequestMsg(m, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := <-got
	t.Logf("reply %s, header %v", rep.Data, h)
	id, err := access.CallerOf(h)
	t.Logf("caller %v %v", id, err)
	_ = jetstream.ErrMsgNotFound
}
