package streams_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// provisioned starts a server and provisions the core streams on it.
func provisioned(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	srv := natstest.Start(tb)
	js := srv.JetStream(tb)
	if err := streams.EnsureCore(context.Background(), js, streams.DefaultOptions()); err != nil {
		tb.Fatal(err)
	}
	return js
}

// info returns a stream's current info.
func info(tb testing.TB, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	tb.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		tb.Fatal(err)
	}
	in, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

// TestEventsHonoursNoMsgID: on a real server EVENTS keeps a zero
// de-duplication window (it has a source: REPLAYS) and stores every copy
// of a Nats-Msg-Id, so nobody can make another's event a duplicate;
// REPLAYS keeps the default window.
func TestEventsHonoursNoMsgID(t *testing.T) {
	js := provisioned(t)
	ctx := context.Background()
	ev := info(t, js, subjects.EventsStream).Config
	if ev.Duplicates != 0 {
		t.Errorf("EVENTS duplicate window %s, want 0 (off)", ev.Duplicates)
	}
	if len(ev.Sources) != 1 || ev.Sources[0].Name != subjects.ReplaysStream {
		t.Errorf("EVENTS sources %v, want [%s]", ev.Sources, subjects.ReplaysStream)
	}
	if got, want := ev.Subjects, []string{subjects.EventsAll, subjects.RedrivenAll}; !slices.Equal(got, want) {
		t.Errorf("EVENTS subjects %v, want %v", got, want)
	}
	rp := info(t, js, subjects.ReplaysStream).Config
	if rp.Duplicates != streams.DefaultOptions().DuplicateWindow || rp.MaxAge != streams.DefaultOptions().EventsMaxAge ||
		!rp.AllowDirect || rp.MaxConsumers != streams.MaxConsumers || rp.Retention != jetstream.LimitsPolicy {
		t.Errorf("REPLAYS config %+v", rp)
	}
	tests := []struct {
		name string
		data string
	}{
		{"junk first", `{"junk":`},
		{"the real event", `{"real":true}`},
		{"its retry", `{"real":true}`},
	}
	for i, tt := range tests {
		ack, err := js.Publish(ctx, subjects.Event("pharmacy", "dispense"), []byte(tt.data), jetstream.WithMsgID("order-4242"))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if ack.Duplicate || ack.Stream != subjects.EventsStream || ack.Sequence != uint64(i+1) {
			t.Errorf("%s: ack %+v, want stored as EVENTS %d", tt.name, ack, i+1)
		}
	}
	if n := info(t, js, subjects.EventsStream).State.Msgs; n != uint64(len(tests)) {
		t.Errorf("EVENTS holds %d messages, want %d", n, len(tests))
	}
}

// TestReplayDedupedInReplays: a replay published twice with one msg-id is
// stored once in REPLAYS and reaches EVENTS once, with its replay subject
// and headers.
func TestReplayDedupedInReplays(t *testing.T) {
	js := provisioned(t)
	ctx := context.Background()
	replay := func(body, id string) *jetstream.PubAck {
		t.Helper()
		m := nats.NewMsg(subjects.Replay("pharmacy", "dispense"))
		m.Data = []byte(body)
		m.Header.Set(envelope.DLQID, "pharmacy_x")
		m.Header.Set(envelope.RedriveCount, "1")
		ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	first, retry := replay("one", "pharmacy_x-1-tag"), replay("one", "pharmacy_x-1-tag")
	if first.Stream != subjects.ReplaysStream || first.Duplicate {
		t.Fatalf("first replay ack %+v, want stored in REPLAYS", first)
	}
	if !retry.Duplicate || retry.Sequence != first.Sequence {
		t.Fatalf("retried replay ack %+v, want a duplicate of %d", retry, first.Sequence)
	}
	// A later, distinct replay: once its copy is in EVENTS (a source
	// delivers in order), every earlier one would be there too.
	replay("two", "pharmacy_x-2-tag")
	if n := info(t, js, subjects.ReplaysStream).State.Msgs; n != 2 {
		t.Errorf("REPLAYS holds %d messages, want 2", n)
	}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := info(t, js, subjects.EventsStream).State.Msgs; n < 2 {
			return fmt.Errorf("EVENTS holds %d sourced replays", n)
		}
		return nil
	})
	s, err := js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info(t, js, subjects.EventsStream).State.Msgs; n != 2 {
		t.Fatalf("EVENTS holds %d messages, want 2 (the retry stored once)", n)
	}
	for seq, body := range map[uint64]string{1: "one", 2: "two"} {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != subjects.Replay("pharmacy", "dispense") || string(m.Data) != body ||
			m.Header.Get(envelope.DLQID) != "pharmacy_x" || m.Header.Get("Nats-Stream-Source") == "" {
			t.Errorf("EVENTS %d: %s %v %q", seq, m.Subject, m.Header, m.Data)
		}
	}
}
