package streams_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

// requestsStore is a server with the core streams (REQUESTS among them),
// fsyncing every write when sync is set.
func requestsStore(tb testing.TB, sync bool) jetstream.JetStream {
	tb.Helper()
	srv := natstest.StartConfig(tb, embedded.Config{SyncAlways: sync})
	srv.Provision(tb, streams.DefaultOptions())
	js, err := jetstream.New(srv.Connect(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// TestWriteOnce: a request is written once; the same bytes again (a
// retry, de-duplicated or not) are no error, other bytes are refused
// with ErrWrittenOther and the first stays; a same func may call a
// re-encoded equal request the same; a message on a subject REQUESTS
// does not cover is an error.
func TestWriteOnce(t *testing.T) {
	js := requestsStore(t, false)
	ctx := context.Background()
	first := []byte(`{"id":"appr-1","request":{"reason":"Müller & Söhne <Großhandel> \"Nord\" 陈伟"}}`)
	subj := streams.ApprovalRequestSubject("appr-1")
	if err := streams.WriteOnce(ctx, js, streams.RequestsStream, subj, "request-appr-1", first, nil); err != nil {
		t.Fatal(err)
	}
	sameID := func([]byte, []byte) bool { return true }
	for _, tc := range []struct {
		name    string
		msgID   string
		data    []byte
		same    func(stored, data []byte) bool
		wantErr error
	}{
		{"the same bytes, the same message id (de-duplicated)", "request-appr-1", first, nil, nil},
		{"the same bytes, no message id (refused by the server, read back)", "", first, nil, nil},
		{"other bytes", "", []byte(`{"id":"appr-1","request":{"reason":"forged"}}`), nil, streams.ErrWrittenOther},
		{"other bytes its caller calls the same", "", []byte(`{"id": "appr-1"}`), sameID, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := streams.WriteOnce(ctx, js, streams.RequestsStream, subj, tc.msgID, tc.data, tc.same)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("WriteOnce: %v, want %v", err, tc.wantErr)
			}
			got, ok, err := streams.ReadOnce(ctx, js, streams.RequestsStream, subj)
			if err != nil || !ok || string(got) != string(first) {
				t.Errorf("stored %q %v %v, want the first", got, ok, err)
			}
		})
	}
	if _, ok, err := streams.ReadOnce(ctx, js, streams.RequestsStream, streams.DrainStartSubject("drain-none")); ok || err != nil {
		t.Errorf("ReadOnce of a subject never written: %v %v", ok, err)
	}
	m := nats.NewMsg(subj)
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if _, err := js.PublishMsg(ctx, m); err == nil {
		t.Error("a rollup of the request was accepted")
	}
	if err := streams.WriteOnce(ctx, js, streams.RequestsStream, "nowhere.appr-1", "", first, nil); err == nil {
		t.Error("a write on a subject no stream covers was accepted")
	}
}

// BenchmarkWriteOnce is the write an approval request and a drain start
// add (ADR 0024): one message of their size, written once to REQUESTS and
// acknowledged, on an embedded server with and without an fsync per
// write (sync_interval: always, the product's default).
func BenchmarkWriteOnce(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync-always=%t", sync), func(b *testing.B) { benchWriteOnce(b, requestsStore(b, sync)) })
	}
}

func benchWriteOnce(b *testing.B, js jetstream.JetStream) {
	ctx := context.Background()
	now := time.Now().UTC()
	appr, _ := json.Marshal(api.Approval{ID: "appr-20261207T000000-0000000000000000", Action: api.ActionCorrect,
		DLQID: "pharmacy_0123456789abcdef0123456789abcdef", Domain: "pharmacy", Status: api.ApprovalPending,
		Request: json.RawMessage(`{"reason":"NDC fixed from the invoice of Müller & Söhne <Großhandel>","note":"` + strings.Repeat("陈伟 ", 40) + `"}`),
		Payload: []byte(`{"transaction_id":"TX-1","ndc":"0409-4888-20","lot":"A1&B<2>","pharmacist":"陈伟","quantity":30}`),
		Reasons: []string{"identity_change"}, Requester: "amara.okafor", RequesterRole: "operator", RequestedAt: now, ExpiresAt: now,
		ChainRecords: 2, ChainHead: strings.Repeat("ab", 32)})
	rate := 50.0
	drain, _ := json.Marshal(api.DrainState{DrainID: "drain-20261207T000000-00000000", Status: api.DrainSelecting, Owner: "redriver-1",
		Request: api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy", ErrorCodes: []string{"SCHEMA_VALIDATION_ERROR"}},
			RatePerSecond: &rate, Reason: "downstream restored, Müller & Söhne <Nord>"}.WithDefaultGuard(),
		StartedAt: now, Heartbeat: now, StartedBy: "amara.okafor"})
	for _, c := range []struct {
		name    string
		subject func(int) string
		data    []byte
	}{
		{"approval", func(i int) string { return streams.ApprovalRequestSubject(fmt.Sprintf("appr-%d", i)) }, appr},
		{"drain-start", func(i int) string { return streams.DrainStartSubject(fmt.Sprintf("drain-%d", i)) }, drain},
	} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				if err := streams.WriteOnce(ctx, js, streams.RequestsStream, c.subject(i), "", c.data, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.data)), "B/msg")
		})
	}
}

// TestAdoptDrains: a store from before REQUESTS (DRAINS holding a
// running, a paused, a completed and a delete-marked drain) gets REQUESTS
// at the next provisioning, and each drain it holds its start there (a
// finished one its end too), once: a second provisioning adopts nothing
// again, and a drain stored afterwards is not adopted (its redriver
// writes its start).
func TestAdoptDrains(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := streams.DefaultOptions()
	kv, err := js.CreateKeyValue(ctx, streams.Drains(o))
	if err != nil {
		t.Fatal(err)
	}
	put := func(id, status string) []byte {
		t.Helper()
		b, _ := json.Marshal(api.DrainState{DrainID: id, Status: status, StartedBy: "amara.okafor",
			Request: api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, Reason: "Müller & Söhne <Großhandel> \"Nord\" 陈伟"}})
		if _, err := kv.Put(ctx, id, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	running, paused, completed := put("drain-running", api.DrainRunning), put("drain-paused", api.DrainPaused), put("drain-completed", api.DrainCompleted)
	put("drain-deleted", api.DrainRunning)
	if err := kv.Delete(ctx, "drain-deleted"); err != nil {
		t.Fatal(err)
	}
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	put("drain-later", api.DrainRunning)
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		id         string
		start, end []byte
	}{
		{"running", "drain-running", running, nil},
		{"paused", "drain-paused", paused, nil},
		{"completed", "drain-completed", completed, completed},
		{"delete-marked", "drain-deleted", nil, nil},
		{"stored after REQUESTS was made", "drain-later", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				subject string
				want    []byte
			}{{streams.DrainStartSubject(tc.id), tc.start}, {streams.DrainEndSubject(tc.id), tc.end}} {
				got, found, err := streams.ReadOnce(ctx, js, streams.RequestsStream, c.subject)
				if err != nil || found != (c.want != nil) || string(got) != string(c.want) {
					t.Errorf("%s: %q %v %v, want %q", c.subject, got, found, err, c.want)
				}
			}
		})
	}
	if n, err := streams.AdoptDrains(ctx, js); err != nil || n != 4 {
		t.Errorf("adopting again: %d, %v (each write finds its own: no error)", n, err)
	}
}
