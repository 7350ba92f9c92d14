package batch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/natstest"
)

// msg is a message to subject with an expectation that the subject is
// still empty (expected last subject sequence 0) and a Nats-Msg-Id.
func msg(subject, id string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = []byte("x")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	m.Header.Set(jetstream.MsgIDHeader, id)
	return m
}

func msgs(prefix string, n int) []*nats.Msg {
	out := make([]*nats.Msg, n)
	for i := range out {
		out[i] = msg(fmt.Sprintf("b.%s.%d", prefix, i), fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func TestPublish(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "B", Subjects: []string{"b.>"}, AllowAtomicPublish: true, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "b.taken.3", []byte("earlier")); err != nil {
		t.Fatal(err)
	}
	dup := msgs("dup", 3)
	dup[2].Header.Set(jetstream.MsgIDHeader, "dup-0")
	twice := msgs("twice", 3)
	twice[2].Subject = twice[0].Subject
	for _, tc := range []struct {
		name string
		msgs []*nats.Msg
		want error
	}{
		{"distinct subjects", msgs("ok", 10), nil},
		{"one message", msgs("one", 1), nil},
		{"an expectation fails", msgs("taken", 5), batch.ErrRefused},
		{"a duplicate Nats-Msg-Id", dup, batch.ErrRefused},
		{"one subject twice", twice, batch.ErrRefused},
		{"too many", msgs("big", batch.MaxMessages+1), batch.ErrTooLarge},
		{"a stream without allow_atomic", []*nats.Msg{msg("plain.a", "p1"), msg("plain.b", "p2")}, batch.ErrDisabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seqs, err := batch.Publish(ctx, js, tc.msgs)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			after, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			stored := after.State.Msgs - before.State.Msgs
			if tc.want != nil {
				if stored != 0 {
					t.Fatalf("a refused batch stored %d messages", stored)
				}
				for _, m := range tc.msgs {
					if m.Header.Get("Nats-Batch-Id") != "" {
						t.Fatal("batch headers left on a message")
					}
				}
				return
			}
			if stored != uint64(len(tc.msgs)) || len(seqs) != len(tc.msgs) {
				t.Fatalf("stored %d, %d sequences, want %d", stored, len(seqs), len(tc.msgs))
			}
			for i, m := range tc.msgs {
				got, err := s.GetMsg(ctx, seqs[i])
				if err != nil {
					t.Fatal(err)
				}
				if got.Subject != m.Subject {
					t.Fatalf("sequence %d holds %s, want %s", seqs[i], got.Subject, m.Subject)
				}
			}
		})
	}
	// After a refusal, the messages written one by one say which failed.
	refused := msgs("again", 3)
	refused[1] = msg("b.taken.3", "again-x")
	if _, err := batch.Publish(ctx, js, refused); !errors.Is(err, batch.ErrRefused) {
		t.Fatalf("err %v, want ErrRefused", err)
	}
	var failed []int
	for i, m := range refused {
		if _, err := batch.Publish(ctx, js, []*nats.Msg{m}); err != nil {
			if !errors.Is(err, batch.ErrRefused) {
				t.Fatal(err)
			}
			failed = append(failed, i)
		}
	}
	if fmt.Sprint(failed) != "[1]" {
		t.Fatalf("one by one, messages %v failed, want [1]", failed)
	}
}

// TestPublishOncePerSubject: on a stream that keeps one message per
// subject with discard new per subject (LEDGER), a batch holding a subject
// the stream holds already is refused as a whole (server error 10077,
// without any expectation header) and stores nothing; the messages
// written one by one then say which one it was, and the others are
// stored.
func TestPublishOncePerSubject(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ONCE", Subjects: []string{"once.>"}, AllowAtomicPublish: true,
		MaxMsgsPerSubject: 1, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "once.taken", []byte("earlier")); err != nil {
		t.Fatal(err)
	}
	plain := func(subject string) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{"registrant":"BW4829137"}`)
		return m
	}
	group := []*nats.Msg{plain("once.a"), plain("once.taken"), plain("once.b")}
	if _, err := batch.Publish(ctx, js, group); !errors.Is(err, batch.ErrRefused) {
		t.Fatalf("batch with a written subject: %v, want ErrRefused", err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("a refused batch stored messages: %+v, %v", info, err)
	}
	var failed []int
	for i, m := range group {
		if _, err := batch.Publish(ctx, js, []*nats.Msg{m}); err != nil {
			if !errors.Is(err, batch.ErrRefused) {
				t.Fatal(err)
			}
			failed = append(failed, i)
		}
	}
	if fmt.Sprint(failed) != "[1]" {
		t.Fatalf("one by one, messages %v failed, want [1]", failed)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Fatalf("after the fallback: %+v, %v", info, err)
	}
}
