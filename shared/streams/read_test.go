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
