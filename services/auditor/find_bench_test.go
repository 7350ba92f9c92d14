package auditor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// BenchmarkFind measures an identifier search over a quarantine of
// 20,000 pharmacy events (one NDC + lot among them): open only (the
// auditor's live index) and any status (a scan of QUARANTINE, which also
// counts the total).
//
//	go test -run '^$' -bench BenchmarkFind -benchtime 20x ./services/auditor/
func BenchmarkFind(b *testing.B) {
	const n = 20000
	e := newEnv(b)
	ctx := context.Background()
	var futs []jetstream.PubAckFuture
	for i := range n {
		lot := fmt.Sprintf("L%05d", i)
		at := t0.Add(time.Duration(i) * time.Millisecond)
		env := envelope.Envelope{Domain: "pharmacy", IdempotencyKey: id(i), OrderingKey: "00409488820." + lot, PartyID: "BW4829137"}
		r := record.FromFailure(record.Failure{Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Domain: "pharmacy",
			Subject: "events.pharmacy.dispense", Stream: subjects.EventsStream, Seq: uint64(i + 1), Deliveries: 1, Published: at,
			Payload: []byte(`{"transaction_id":"TX"}`), Envelope: &env, FailedAt: at}, at)
		if err := record.Seal(&r); err != nil {
			b.Fatal(err)
		}
		raw, err := record.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		f, err := e.js.PublishAsync(subjects.Quarantine(r.Domain, r.DLQID), raw)
		if err != nil {
			b.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		case <-ctx.Done():
		}
	}
	e.startAuditor(b, testConfig(), nil)
	for _, bc := range []struct {
		name string
		req  api.ListRequest
	}{
		{"open/index", api.ListRequest{NDC: "0409-4888-20", Lot: "L12345", Status: "open"}},
		{"any/scan", api.ListRequest{NDC: "0409-4888-20", Lot: "L12345"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				var l api.ListReply
				request(b, e.nc, api.AuditList, bc.req, &l)
				if l.Total != 1 || len(l.Items) != 1 {
					b.Fatalf("found %d (total %d)", len(l.Items), l.Total)
				}
			}
		})
	}
}
