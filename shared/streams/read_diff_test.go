package streams_test

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

// TestDirectGetMatchesJetstreamext pins our direct-get reader (ADR 0012)
// to orbit.go's jetstreamext, which it stands beside: for batches (from a
// sequence, by subject filter, bounded by max_bytes) and multi-last gets
// (with and without up_to_seq), both return the same messages, in the
// same order, with the same subjects, sequences, headers and data.
func TestDirectGetMatchesJetstreamext(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DIFF", Subjects: []string{"diff.>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	// Three chains of records as the trade writes them, headers included.
	for i := range 60 {
		m := nats.NewMsg(fmt.Sprintf("diff.chain.%d", i%3))
		m.Header.Set("Dlq-Id", fmt.Sprintf("pharmacy_%032d", i%3))
		m.Header.Set("Party", `Müller & Söhne <Nord> "陈伟"`)
		m.Data = fmt.Appendf(nil, `{"seq":%d,"ndc":"0002-1433-80","note":"&<>\"%s"}`, i, string(make([]byte, i*7)))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	type got struct {
		subject string
		seq     uint64
		hdr     string
		data    string
	}
	ours := func(req streams.DirectRequest) []got {
		var out []got
		if _, err := streams.DirectGet(ctx, js, "DIFF", req, func(m *jetstream.RawStreamMsg) error {
			out = append(out, got{m.Subject, m.Sequence, fmt.Sprint(m.Header), string(m.Data)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	theirs := func(seq func() (iter.Seq2[*jetstream.RawStreamMsg, error], error)) []got {
		it, err := seq()
		if err != nil {
			t.Fatal(err)
		}
		var out []got
		for m, err := range it {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got{m.Subject, m.Sequence, fmt.Sprint(m.Header), string(m.Data)})
		}
		return out
	}
	chains := []string{"diff.chain.0", "diff.chain.1", "diff.chain.2"}
	for _, tc := range []struct {
		name string
		req  streams.DirectRequest
		lib  func() (iter.Seq2[*jetstream.RawStreamMsg, error], error)
	}{
		{"batch from the first", streams.DirectRequest{Seq: 1, Batch: 25},
			func() (iter.Seq2[*jetstream.RawStreamMsg, error], error) {
				return jetstreamext.GetBatch(ctx, js, "DIFF", 25, jetstreamext.GetBatchSeq(1))
			}},
		{"batch of one chain", streams.DirectRequest{Seq: 10, NextFor: "diff.chain.1", Batch: 8},
			func() (iter.Seq2[*jetstream.RawStreamMsg, error], error) {
				return jetstreamext.GetBatch(ctx, js, "DIFF", 8, jetstreamext.GetBatchSeq(10), jetstreamext.GetBatchSubject("diff.chain.1"))
			}},
		{"batch bounded by bytes", streams.DirectRequest{Seq: 1, Batch: 60, MaxBytes: 2048},
			func() (iter.Seq2[*jetstream.RawStreamMsg, error], error) {
				return jetstreamext.GetBatch(ctx, js, "DIFF", 60, jetstreamext.GetBatchSeq(1), jetstreamext.GetBatchMaxBytes(2048))
			}},
		{"last of each chain", streams.DirectRequest{MultiLast: chains},
			func() (iter.Seq2[*jetstream.RawStreamMsg, error], error) {
				return jetstreamext.GetLastMsgsFor(ctx, js, "DIFF", chains)
			}},
		{"last of each chain up to a sequence", streams.DirectRequest{MultiLast: chains, UpToSeq: 31},
			func() (iter.Seq2[*jetstream.RawStreamMsg, error], error) {
				return jetstreamext.GetLastMsgsFor(ctx, js, "DIFF", chains, jetstreamext.GetLastMsgsUpToSeq(31))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := ours(tc.req), theirs(tc.lib)
			if len(a) == 0 || len(a) != len(b) {
				t.Fatalf("ours %d messages, jetstreamext %d", len(a), len(b))
			}
			for i := range a {
				if a[i] != b[i] {
					t.Errorf("message %d: ours %s #%d, jetstreamext %s #%d (headers or data differ: %v)",
						i, a[i].subject, a[i].seq, b[i].subject, b[i].seq, a[i].hdr != b[i].hdr || a[i].data != b[i].data)
				}
			}
		})
	}
}
