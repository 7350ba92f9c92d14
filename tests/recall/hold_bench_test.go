package recall

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// BenchmarkHold10k measures a hold of a lot of 10,000 quarantined events
// among 20,000 on the whole stack (the quarantiner seals the hold's record
// into each chain): the time to place it (hold.place's answer), to show
// it whole (hold.get counts every chain sealed) and to list the lot's
// first 1,000 events marked held (audit.list, as the console's Records
// page asks).
//
//	go test -run '^$' -bench BenchmarkHold10k -benchtime 1x ./tests/recall/
func BenchmarkHold10k(b *testing.B) {
	const held, others = 10000, 10000
	e := startB(b)
	admin := e.conn(b, access.Admin)
	js, err := jetstream.New(admin)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var futs []jetstream.PubAckFuture
	for i := range held + others {
		lot := "HOLD-10K"
		if i >= held {
			lot = fmt.Sprintf("OTHER-%05d", i)
		}
		at := t0.Add(time.Duration(i) * time.Millisecond)
		tx := fmt.Sprintf("TX-10K-%05d <Müller & Söhne>", i)
		payload := fmt.Sprintf(`{"transaction_id":%q,"registrant_dea":"BW4829137","ndc":"0409-4888-20","lot":%q,"event_type":"dispense"}`, tx, lot)
		env := envelope.Envelope{Domain: "pharmacy", IdempotencyKey: fmt.Sprintf("pharmacy_%032d", i),
			OrderingKey: "BW4829137.00409488820." + lot, PartyID: "BW4829137", Identifiers: map[string]string{"transaction_id": tx}}
		r := record.FromFailure(record.Failure{Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Domain: "pharmacy",
			Subject: "events.pharmacy.dispense", Stream: subjects.EventsStream, Seq: uint64(i + 1), Deliveries: 1, Published: at,
			Payload: []byte(payload), Envelope: &env, FailedAt: at}, at)
		if err := record.Seal(&r); err != nil {
			b.Fatal(err)
		}
		raw, err := record.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		f, err := js.PublishAsync(subjects.Quarantine(r.Domain, r.DLQID), raw)
		if err != nil {
			b.Fatal(err)
		}
		if futs = append(futs, f); len(futs) == 2048 || i == held+others-1 {
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatal(err)
				}
			}
			futs = futs[:0]
		}
	}
	natstest.CheckFor(b, 2*time.Minute, 50*time.Millisecond, func() error {
		var l api.ListReply
		mustCall(b, e.viewer, api.AuditList, api.ListRequest{Lot: "HOLD-10K", Status: "open", Limit: 1}, &l)
		if l.Total != held {
			return fmt.Errorf("the index lists %d of the lot's %d events", l.Total, held)
		}
		return nil
	})
	for b.Loop() {
		start := time.Now()
		var placed api.HoldReply
		mustCall(b, e.inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "RECALL-10K", Reason: "recall of lot HOLD-10K",
			Target: api.HoldTarget{Filter: &api.HoldFilter{Domain: "pharmacy", Lot: "HOLD-10K"}}}, &placed)
		place := time.Since(start)
		if placed.Count+placed.PendingCount+len(placed.Failed) != held {
			b.Fatalf("the hold holds %d + %d pending + %d failed, want %d", placed.Count, placed.PendingCount, len(placed.Failed), held)
		}
		lstart := time.Now()
		var l api.ListReply
		mustCall(b, e.viewer, api.AuditList, api.ListRequest{Lot: "HOLD-10K", Limit: 1000}, &l)
		list := time.Since(lstart)
		for _, it := range l.Items {
			if len(it.HoldIDs) != 1 {
				b.Fatalf("%s is not marked held", it.DLQID)
			}
		}
		natstest.CheckFor(b, 10*time.Minute, 100*time.Millisecond, func() error {
			var g api.HoldReply
			mustCall(b, e.viewer, api.HoldGet, api.HoldGetRequest{ID: placed.Hold.ID}, &g)
			if g.Count != held {
				return fmt.Errorf("%d of %d sealed", g.Count, held)
			}
			return nil
		})
		show := time.Since(start)
		b.ReportMetric(place.Seconds(), "s-to-place")
		b.ReportMetric(float64(placed.Count), "sealed-at-answer")
		b.ReportMetric(list.Seconds(), "s-to-list-1000-held")
		b.ReportMetric(show.Seconds(), "s-to-show-all-sealed")
	}
}
