package auditor

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gs1"
	"github.com/deadletter/deadletter/shared/natstest"
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

// BenchmarkRecallSearch measures the searches of a recall over 100,000
// chains, every first record with its payload (the index reads the
// identifiers each payload names, hold.PayloadIdentifiers): 50,000
// pharmacy events (one lot among them, by NDC + lot and by the lot
// alone) and 50,000 DSCSA aggregations (one pallet SSCC among them), from
// the live index (open) and from a scan of QUARANTINE (any status).
//
//	go test -run '^$' -bench BenchmarkRecallSearch -benchtime 10x ./services/auditor/
func BenchmarkRecallSearch(b *testing.B) {
	const n = 100000
	e := newEnv(b)
	ctx := context.Background()
	var futs []jetstream.PubAckFuture
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		var (
			env     envelope.Envelope
			payload string
			dom     = "pharmacy"
		)
		if i%2 == 0 {
			lot := fmt.Sprintf("L&<%05d>", i/2)
			env = envelope.Envelope{Domain: dom, IdempotencyKey: id(i), OrderingKey: "BW4829137.00409488820." + lot, PartyID: "BW4829137"}
			payload = fmt.Sprintf(`{"transaction_id":"TX-%d","registrant_dea":"BW4829137","ndc":"0409-4888-20","lot":%q,"event_type":"dispense"}`, i, lot)
		} else {
			dom = "dscsa"
			body := fmt.Sprintf("1%07d%09d", 614141, i)
			sscc := body + string(gs1.CheckDigit(body))
			env = envelope.Envelope{Domain: dom, IdempotencyKey: "dscsa_" + id(i)[len("pharmacy_"):], OrderingKey: sscc, PartyID: "urn:epc:id:sgln:0614141.00001.0"}
			payload = fmt.Sprintf(`{"type":"AggregationEvent","action":"ADD","bizStep":"packing","parentID":"urn:epc:id:sscc:0614141.%010d","childEPCs":[]}`, i)
		}
		r := record.FromFailure(record.Failure{Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Domain: dom,
			Subject: "events." + dom + ".x", Stream: subjects.EventsStream, Seq: uint64(i + 1), Deliveries: 1, Published: at,
			Payload: []byte(payload), Envelope: &env, FailedAt: at}, at)
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
		if len(futs) == 4096 {
			waitAcks(ctx, b, futs)
			futs = futs[:0]
		}
	}
	waitAcks(ctx, b, futs)
	start := time.Now()
	// Started as startAuditor does, waiting longer for the live view.
	cfg := testConfig()
	cfg.Registerer = prometheus.NewRegistry()
	nc := e.srv.Connect(b)
	a, err := New(nc, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(rctx) }()
	b.Cleanup(func() { cancel(); <-done })
	natstest.WaitServing(b, nc, access.Auditor)
	natstest.CheckFor(b, 5*time.Minute, 50*time.Millisecond, func() error {
		if got := a.index.applied(); got < n {
			return fmt.Errorf("index at %d of %d", got, n)
		}
		return nil
	})
	b.Logf("the live index read %d chains in %s", n, time.Since(start).Round(time.Millisecond))
	body := fmt.Sprintf("1%07d%09d", 614141, 77777)
	sscc := body + string(gs1.CheckDigit(body))
	for _, bc := range []struct {
		name string
		req  api.ListRequest
	}{
		{"lot+ndc/open/index", api.ListRequest{NDC: "0409-4888-20", Lot: "L&<12345>", Status: "open"}},
		{"lot+ndc/any/scan", api.ListRequest{NDC: "0409-4888-20", Lot: "L&<12345>"}},
		{"lot/any/scan", api.ListRequest{Lot: "L&<12345>"}},
		{"sscc/open/index", api.ListRequest{SSCC: sscc, Status: "open"}},
		{"sscc/any/scan", api.ListRequest{SSCC: "urn:epc:id:sscc:0614141." + body[:1] + body[8:17]}},
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

// waitAcks waits for the acknowledgements of futs.
func waitAcks(ctx context.Context, b *testing.B, futs []jetstream.PubAckFuture) {
	b.Helper()
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		case <-ctx.Done():
		}
	}
}

// BenchmarkIndexApply measures what the live view spends per first
// record of a pharmacy event: the head alone (as before the payload was
// read) and the head with the identifiers its payload names.
//
//	go test -run '^$' -bench BenchmarkIndexApply ./services/auditor/
func BenchmarkIndexApply(b *testing.B) {
	at := t0
	env := envelope.Envelope{Domain: "pharmacy", IdempotencyKey: id(1), OrderingKey: "BW4829137.00409488820.L&<1>", PartyID: "BW4829137"}
	payload := `{"transaction_id":"TX-1 <Müller & Söhne>","registrant_dea":"BW4829137","ndc":"0409-4888-20","lot":"L&<1>",` +
		`"expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense","dea_schedule":"II",` +
		`"occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412"}`
	r := record.FromFailure(record.Failure{Class: record.ClassValidation, Code: codes.SchemaValidation, Domain: "pharmacy",
		Subject: "events.pharmacy.dispense", Stream: subjects.EventsStream, Seq: 1, Deliveries: 1, Published: at,
		Payload: []byte(payload), Envelope: &env, FailedAt: at}, at)
	if err := record.Seal(&r); err != nil {
		b.Fatal(err)
	}
	raw, err := record.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("head", func(b *testing.B) {
		for b.Loop() {
			if _, err := chain.DecodeHead(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head+payload", func(b *testing.B) {
		for b.Loop() {
			h, err := chain.DecodeHead(raw)
			if err != nil {
				b.Fatal(err)
			}
			if _, ids := withPayload(h.Domain, raw, "", nil); len(ids) == 0 {
				b.Fatal("no identifiers")
			}
		}
	})
}
