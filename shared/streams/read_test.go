package streams_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

func TestReadSubject(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	if err := streams.EnsureWORM(ctx, js, streams.DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	long, short, other := subjects.Quarantine("fsma", "fsma_long"), subjects.Quarantine("fsma", "fsma_short"), subjects.Quarantine("dscsa", "dscsa_x")
	// 600 records on one subject (more than two batches), interleaved
	// with two other subjects.
	for i := range 600 {
		for _, subj := range []string{long, other} {
			if _, err := js.Publish(ctx, subj, fmt.Appendf(nil, "%s %d", subj, i)); err != nil {
				t.Fatal(err)
			}
		}
		if i == 10 {
			if _, err := js.Publish(ctx, short, []byte("only")); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name    string
		subject string
		want    int
	}{
		{"three batches", long, 600},
		{"one message", short, 1},
		{"no message", subjects.Quarantine("pharmacy", "pharmacy_none"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []*jetstream.RawStreamMsg
			err := streams.ReadSubject(ctx, js, subjects.QuarantineStream, tt.subject, func(m *jetstream.RawStreamMsg) error {
				got = append(got, m)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Fatalf("read %d messages, want %d", len(got), tt.want)
			}
			for i, m := range got {
				if m.Subject != tt.subject {
					t.Fatalf("message %d on %s", i, m.Subject)
				}
				if i > 0 && m.Sequence <= got[i-1].Sequence {
					t.Fatalf("message %d out of order", i)
				}
				if tt.subject == long && string(m.Data) != fmt.Sprintf("%s %d", long, i) {
					t.Fatalf("message %d is %q", i, m.Data)
				}
			}
		})
	}
}

func TestDirectGet(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	if err := streams.EnsureWORM(ctx, js, streams.DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	a, b := subjects.Quarantine("fsma", "fsma_a"), subjects.Quarantine("dscsa", "dscsa_b")
	for i, subj := range []string{a, b, a, b, a} { // sequences 1..5
		if _, err := js.Publish(ctx, subj, fmt.Appendf(nil, "%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		req     streams.DirectRequest
		want    []uint64 // sequences handed, in order
		pending uint64
	}{
		{"single by sequence", streams.DirectRequest{Seq: 2}, []uint64{2}, 0},
		{"single next on subject", streams.DirectRequest{Seq: 2, NextFor: a}, []uint64{3}, 0},
		{"single, nothing", streams.DirectRequest{Seq: 6, NextFor: a}, nil, 0},
		{"batch, pending left", streams.DirectRequest{Seq: 1, NextFor: a, Batch: 2}, []uint64{1, 3}, 1},
		{"last of each", streams.DirectRequest{MultiLast: []string{a, b}}, []uint64{4, 5}, 0},
		{"last of each up to 3", streams.DirectRequest{MultiLast: []string{a, b}, UpToSeq: 3}, []uint64{2, 3}, 0},
		{"last, wildcard", streams.DirectRequest{MultiLast: []string{"quarantine.*.fsma_a"}}, []uint64{5}, 0},
		{"last, nothing", streams.DirectRequest{MultiLast: []string{subjects.Quarantine("pharmacy", "pharmacy_none")}}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []uint64
			pending, err := streams.DirectGet(ctx, js, subjects.QuarantineStream, tt.req, func(m *jetstream.RawStreamMsg) error {
				if want := fmt.Sprint(m.Sequence); string(m.Data) != want {
					t.Errorf("message %d holds %q", m.Sequence, m.Data)
				}
				got = append(got, m.Sequence)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || pending != tt.pending {
				t.Errorf("got %v (pending %d), want %v (pending %d)", got, pending, tt.want, tt.pending)
			}
		})
	}
}

// TestDirectGetAll: one call returns every message a request selects,
// across batch limits, a max_bytes cut and a multi-last get, in order.
func TestDirectGetAll(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	if err := streams.EnsureWORM(ctx, js, streams.DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	var subs []string
	for i := range 300 {
		subj := subjects.Quarantine("fsma", fmt.Sprintf("fsma_%d", i%150))
		if i < 150 {
			subs = append(subs, subj)
		}
		if _, err := js.Publish(ctx, subj, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		req  streams.DirectRequest
		want int
	}{
		{"batches of 64", streams.DirectRequest{Seq: 1, NextFor: subjects.QuarantineAll, Batch: 64}, 300},
		{"cut by max bytes", streams.DirectRequest{Seq: 1, NextFor: subjects.QuarantineAll, Batch: 300, MaxBytes: 4096}, 300},
		{"multi-last, more subjects than a batch", streams.DirectRequest{MultiLast: subs, Batch: 50}, 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var last uint64
			n := 0
			err := streams.DirectGetAll(ctx, js, subjects.QuarantineStream, tt.req, func(m *jetstream.RawStreamMsg) error {
				if m.Sequence <= last {
					return fmt.Errorf("sequence %d after %d", m.Sequence, last)
				}
				last = m.Sequence
				n++
				return nil
			})
			if err != nil || n != tt.want {
				t.Fatalf("read %d messages (%v), want %d", n, err, tt.want)
			}
		})
	}
}
