package rebuild

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// benchN is how many entries the benchmarks' store holds
// (go test -bench . -rebuild.n 100000).
var benchN = flag.Int("rebuild.n", 20_000, "entries of the benchmarks' store")

// fill writes n committed events as the validator leaves them (a LEDGER
// message of a pharmacy event, about 700 bytes, with its headers, and
// its committed key state), asynchronously.
func fill(b *testing.B, js jetstream.JetStream, n int) {
	b.Helper()
	body := `{"transaction_id":"%s","event_type":"dispense","ndc":"0409-4888-20","lot":"A1&B<2>","quantity":30,` +
		`"registrant_dea":"AB1234563","pharmacy":"Müller & Söhne Apotheke <Großhandel>","pharmacist":"陈伟","note":"` + strings.Repeat("x", 480) + `"}`
	var futures []jetstream.PubAckFuture
	flush := func() {
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		futures = futures[:0]
	}
	for i := range n {
		key := fmt.Sprintf("tx-%08d", i)
		m := nats.NewMsg(subjects.Ledger("pharmacy", key))
		m.Data = fmt.Appendf(nil, body, key)
		hash := idempotency.ContentHash("pharmacy", m.Data)
		m.Header.Set(envelope.IdempotencyKey, key)
		m.Header.Set(envelope.EventType, "dispense")
		m.Header.Set(envelope.SourceStream, subjects.EventsStream)
		m.Header.Set(envelope.SourceSeq, strconv.Itoa(i+1))
		m.Header.Set(envelope.ContentHash, hash)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) == 1000 {
			flush()
		}
	}
	flush()
	// The marks, once LEDGER's sequences are known (in order: sequence
	// i+1 for the i-th event on a fresh store).
	for i := range n {
		key := fmt.Sprintf("tx-%08d", i)
		st := idempotency.KeyState{State: idempotency.StateCommitted, Domain: "pharmacy", EventType: "dispense", SourceSeq: uint64(i + 1),
			LedgerSeq: uint64(i + 1), CommittedAt: time.Now().UTC(), ContentHash: idempotency.ContentHash("pharmacy", fmt.Appendf(nil, body, key))}
		v, _ := json.Marshal(st)
		f, err := js.PublishAsync(subjects.BucketKey(subjects.IdempotencyBucket, key), v)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) == 1000 {
			flush()
		}
	}
	flush()
}

// BenchmarkCompareIdempotency compares IDEMPOTENCY with LEDGER, the
// largest index (one entry per committed event): per entry, the cost of
// reading one LEDGER message and one key state and comparing them.
func BenchmarkCompareIdempotency(b *testing.B) {
	js := store(b)
	n := *benchN
	fill(b, js, n)
	r := New(js, Options{Grace: -1})
	ctx := context.Background()
	if ps, err := r.Compare(ctx, subjects.IdempotencyBucket); err != nil || len(ps) != 0 {
		b.Fatalf("the store is not clean: %d problems, %v", len(ps), err)
	}
	held := retained(b, func() any {
		_, _, have, err := r.run(ctx, idempotencyIndex{}, subjects.IdempotencyBucket)
		if err != nil {
			b.Fatal(err)
		}
		return have
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Compare(ctx, subjects.IdempotencyBucket); err != nil {
			b.Fatal(err)
		}
	}
	perEntry := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(n)
	b.ReportMetric(perEntry, "ns/entry")
	b.ReportMetric(perEntry*1e6/1e9, "s/1M-entries")
	b.ReportMetric(float64(held)/float64(n), "heap-B/entry")
}

// retained returns how many heap bytes what build returns holds (the
// live heap after a collection, with it and without it).
func retained(b *testing.B, build func() any) uint64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkCompareDrains compares DRAINS with AUDIT and QUARANTINE: the
// cost is the scan of QUARANTINE (every record, about 700 bytes), per
// record.
func BenchmarkCompareDrains(b *testing.B) {
	js := store(b)
	n := *benchN
	var futures []jetstream.PubAckFuture
	for i := range n {
		id := fmt.Sprintf("pharmacy_%032x", i/2)
		rec := map[string]any{"dlq_id": id, "index": i % 2, "kind": record.KindQuarantined, "domain": "pharmacy", "class": "exhausted",
			"error_code": "DOWNSTREAM_UNAVAILABLE", "quarantined_at": time.Now().UTC(), "party_id": "Müller & Söhne <Großhandel>",
			"error_detail": strings.Repeat("y", 500)}
		if i%2 == 1 {
			rec["kind"], rec["drain_id"], rec["actor"] = record.KindRedriveRequested, fmt.Sprintf("drain-%04d", i%100), "amara.okafor"
		}
		v, _ := json.Marshal(rec)
		f, err := js.PublishAsync(subjects.Quarantine("pharmacy", id), v)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
		if len(futures) == 1000 {
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatal(err)
				}
			}
			futures = futures[:0]
		}
	}
	for _, f := range futures {
		<-f.Ok()
	}
	r := New(js, Options{Grace: -1})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Compare(ctx, subjects.DrainsBucket); err != nil {
			b.Fatal(err)
		}
	}
	perEntry := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(n)
	b.ReportMetric(perEntry, "ns/record")
	b.ReportMetric(perEntry*1e6/1e9, "s/1M-records")
}

// BenchmarkHeldIdempotency measures what Compare holds per IDEMPOTENCY
// entry, without a server in the process (whose block caches the
// store's benchmark counts too): the bucket's map as read from
// committed states as the validator writes them.
func BenchmarkHeldIdempotency(b *testing.B) {
	n := *benchN
	msgs := make([]*jetstream.RawStreamMsg, n)
	for i := range n {
		key := fmt.Sprintf("3f9a%028x", i) // an idempotency key's length
		st := idempotency.KeyState{State: idempotency.StateCommitted, Domain: "pharmacy", EventType: "dispense", SourceSeq: uint64(i + 1),
			LedgerSeq: uint64(i + 1), CommittedAt: time.Now().UTC(), ContentHash: fmt.Sprintf("%064x", i)}
		v, _ := json.Marshal(st)
		msgs[i] = &jetstream.RawStreamMsg{Subject: subjects.BucketKey(subjects.IdempotencyBucket, key), Sequence: uint64(i + 1), Data: v, Header: nats.Header{}}
	}
	prefix := strings.TrimSuffix(subjects.BucketKeys(subjects.IdempotencyBucket), ">")
	var held uint64
	for b.Loop() {
		held = retained(b, func() any {
			have := map[string]stored{}
			for _, m := range msgs {
				key, _ := strings.CutPrefix(m.Subject, prefix)
				have[key] = decodeStored(idempotencyIndex{}, key, m)
			}
			return have
		})
	}
	b.ReportMetric(float64(held)/float64(n), "heap-B/entry")
}

// BenchmarkCompareApprovals compares APPROVALS with its sources: AUDIT's
// approval actions and, since ADR 0024, REQUESTS (each request as
// created). The store holds -rebuild.n pending approvals as
// approval.Store writes them (the request to REQUESTS, its digest to
// AUDIT, the entry); a REQUESTS stream is made when the provisioning has
// none, so that the same data is compared by a build before REQUESTS.
func BenchmarkCompareApprovals(b *testing.B) {
	js := store(b)
	ctx := context.Background()
	if _, err := js.Stream(ctx, "REQUESTS"); err != nil {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "REQUESTS", Subjects: []string{"requests.>"}, MaxMsgsPerSubject: 1,
			Discard: jetstream.DiscardNew, DiscardNewPerSubject: true, DenyDelete: true, DenyPurge: true, AllowDirect: true}); err != nil {
			b.Fatal(err)
		}
	}
	as, err := approval.Open(ctx, js, approval.Config{Checker: approval.AuditRegistry{JS: js}})
	if err != nil {
		b.Fatal(err)
	}
	n := *benchN
	then := time.Now().Add(-time.Hour).UTC()
	body, _ := json.Marshal(map[string]any{"reason": "NDC fixed from the invoice of Müller & Söhne <Großhandel>", "note": strings.Repeat("陈伟 ", 40)})
	var futures []jetstream.PubAckFuture
	flush := func() {
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		futures = futures[:0]
	}
	for i := range n {
		a := api.Approval{ID: fmt.Sprintf("appr-20261207T000000-%016x", i), Action: api.ActionCorrect, DLQID: fmt.Sprintf("pharmacy_%032x", i),
			Domain: "pharmacy", Status: api.ApprovalPending, Request: body,
			Payload: []byte(`{"transaction_id":"TX-1","ndc":"0409-4888-20","lot":"A1&B<2>","pharmacist":"陈伟","quantity":30}`),
			Reasons: []string{"identity_change"}, Requester: "amara.okafor", RequesterRole: "operator", RequestedAt: then,
			Reason: "NDC fixed", ExpiresAt: then.Add(72 * time.Hour), ChainRecords: 2, ChainHead: strings.Repeat("ab", 32)}
		v, _ := json.Marshal(a)
		for _, subj := range []string{"requests.approval." + a.ID, subjects.BucketKey(subjects.ApprovalsBucket, a.ID)} {
			f, err := js.PublishAsync(subj, v)
			if err != nil {
				b.Fatal(err)
			}
			futures = append(futures, f)
		}
		if err := as.Audit(ctx, a, approval.AuditRequested); err != nil {
			b.Fatal(err)
		}
		if len(futures) >= 1000 {
			flush()
		}
	}
	flush()
	r := New(js, Options{Grace: -1})
	if ps, err := r.Compare(ctx, subjects.ApprovalsBucket); err != nil || len(ps) != 0 {
		b.Fatalf("the store is not clean: %d problems, %v", len(ps), err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Compare(ctx, subjects.ApprovalsBucket); err != nil {
			b.Fatal(err)
		}
	}
	perEntry := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(n)
	b.ReportMetric(perEntry, "ns/approval")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/compare")
}
