package auditor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// waitApplied waits until r's index has applied every record of
// QUARANTINE.
func (e *env) waitApplied(tb testing.TB, r *running) {
	tb.Helper()
	natstest.CheckFor(tb, 10*time.Second, 10*time.Millisecond, func() error {
		q, err := e.js.Stream(context.Background(), subjects.QuarantineStream)
		if err != nil {
			return err
		}
		info, err := q.Info(context.Background())
		if err != nil {
			return err
		}
		if got := r.index.applied(); got < info.State.LastSeq {
			return fmt.Errorf("index at %d of %d", got, info.State.LastSeq)
		}
		return nil
	})
}

// TestVerifyEvictedChains verifies stores whose chains have records far
// apart in the stream twice: with the default cache, and with a cache of
// one chain and batches of two records, so that every chain's tail is
// evicted before its next record and seeded again from the server. Both
// must find exactly the same problems.
func TestVerifyEvictedChains(t *testing.T) {
	f := func(n int) fixture {
		return fixture{id: id(n), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC,
			party: "AB1234563", firstSeen: t0, quarantined: t0.Add(time.Duration(n) * time.Second)}
	}
	// fill writes n chains of one record: the records between.
	fill := func(t *testing.T, e *env, from, n int) {
		for i := range n {
			e.chainOf(t, f(from+i))
		}
	}
	tests := []struct {
		name   string
		write  func(t *testing.T, e *env) // returns nothing
		kinds  []string
		seqs   string
		chains int
	}{
		{
			name: "intact chains far apart",
			write: func(t *testing.T, e *env) {
				a := first(t, f(1))
				e.publish(t, a) // 1
				fill(t, e, 100, 5)
				b := next(t, a, record.KindRedriveRequested, t0.Add(time.Hour))
				e.publish(t, b) // 7
				fill(t, e, 200, 5)
				e.publish(t, next(t, b, record.KindResolved, t0.Add(2*time.Hour))) // 13
			},
			chains: 11,
		},
		{
			name: "broken prev_hash far from its predecessor",
			write: func(t *testing.T, e *env) {
				a := first(t, f(1))
				e.publish(t, a) // 1
				fill(t, e, 100, 5)
				b := a
				b.AuditHash = "0000000000000000000000000000000000000000000000000000000000000000"
				e.publish(t, next(t, b, record.KindResolved, t0.Add(time.Hour))) // 7
			},
			kinds: []string{record.ProblemBrokenPrevHash}, seqs: "7", chains: 6,
		},
		{
			name: "fork: branches adjacent on the subject, far apart in the stream",
			write: func(t *testing.T, e *env) {
				a := first(t, f(1))
				e.publish(t, a) // 1
				fill(t, e, 100, 5)
				e.publish(t, next(t, a, record.KindRedriveRequested, t0.Add(time.Hour))) // 7
				fill(t, e, 200, 5)
				e.publish(t, next(t, a, record.KindResolved, t0.Add(2*time.Hour))) // 13
			},
			kinds: []string{record.ProblemFork}, seqs: "13", chains: 11,
		},
		{
			name: "seal mismatch far from its predecessor",
			write: func(t *testing.T, e *env) {
				a := first(t, f(1))
				e.publish(t, a) // 1
				fill(t, e, 100, 5)
				raw, err := record.Marshal(next(t, a, record.KindResolved, t0.Add(time.Hour)))
				if err != nil {
					t.Fatal(err)
				}
				e.publishRaw(t, subjects.Quarantine(a.Domain, a.DLQID), bytes.Replace(raw, []byte(`"alice"`), []byte(`"mallory"`), 1)) // 7
			},
			kinds: []string{record.ProblemSealMismatch}, seqs: "7", chains: 6,
		},
		{
			name: "record missing from a chain",
			write: func(t *testing.T, e *env) {
				a := first(t, f(1))
				e.publish(t, a) // 1
				fill(t, e, 100, 5)
				b := next(t, a, record.KindRedriveRequested, t0.Add(time.Hour))    // never stored
				e.publish(t, next(t, b, record.KindResolved, t0.Add(2*time.Hour))) // 7
			},
			kinds: []string{record.ProblemIndexGap, record.ProblemBrokenPrevHash}, seqs: "7", chains: 6,
		},
		{
			name: "garbage on the chain's subject is stepped over",
			write: func(t *testing.T, e *env) {
				a := first(t, f(1))
				e.publish(t, a)                                                          // 1
				e.publishRaw(t, subjects.Quarantine(a.Domain, a.DLQID), []byte(`{"x":`)) // 2
				fill(t, e, 100, 5)
				e.publish(t, next(t, a, record.KindResolved, t0.Add(time.Hour))) // 8
			},
			kinds: []string{record.ProblemUnparseable}, seqs: "2", chains: 6,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.write(t, e)
			kept := e.startAuditor(t, testConfig(), nil)
			cfg := testConfig()
			cfg.VerifyChainCache = 1
			evicting := e.startAuditor(t, cfg, nil)
			evicting.verifyBatch = 2
			mistaken := e.startAuditor(t, cfg, nil) // its filter takes every id for one seen
			mistaken.verifyBatch, mistaken.seenBits, mistaken.seenFull = 2, 64, true
			for _, a := range []*running{kept, evicting, mistaken} {
				rep, err := a.Verify(t.Context(), api.VerifyRequest{})
				if err != nil {
					t.Fatal(err)
				}
				var kinds []string
				for _, p := range rep.Problems {
					kinds = append(kinds, p.Kind)
				}
				if rep.OK != (len(tt.kinds) == 0) || fmt.Sprint(kinds) != fmt.Sprint(tt.kinds) || seqs(rep.Problems) != tt.seqs ||
					rep.Chains != tt.chains {
					t.Fatalf("cache %d, batch %d: ok=%v chains %d problems %+v\nwant kinds %v at seqs %q, %d chains",
						a.cfg.VerifyChainCache, a.verifyBatch, rep.OK, rep.Chains, rep.Problems, tt.kinds, tt.seqs, tt.chains)
				}
			}
			if logs := evicting.logs.String(); !strings.Contains(logs, `"predecessor_lookups":`) ||
				strings.Contains(logs, `"predecessor_lookups":0`) {
				t.Fatalf("the evicting verify read no previous record from the server:\n%s", logs)
			}
			if logs := mistaken.logs.String(); !strings.Contains(logs, `"first_record_checks":`) ||
				strings.Contains(logs, `"first_record_checks":0`) {
				t.Fatalf("the verify whose filter is full read no first record from the server:\n%s", logs)
			}
		})
	}
}

// TestResolvedChainsFromTheServer: a resolved chain leaves the live index
// (its group keeps counts), and get, list and groups still show it, read
// from QUARANTINE.
func TestResolvedChainsFromTheServer(t *testing.T) {
	e := newEnv(t)
	f := func(n int, dom string) fixture {
		return fixture{id: id(n), domain: dom, class: record.ClassExhausted, code: codes.DownstreamUnavailable,
			party: "P-" + strconv.Itoa(n%2), firstSeen: t0, quarantined: t0.Add(time.Duration(n) * time.Minute)}
	}
	e.chainOf(t, f(1, "pharmacy"), record.KindResolved)                              // seq 1, 2
	e.chainOf(t, f(2, "pharmacy"))                                                   // seq 3
	e.chainOf(t, f(3, "pharmacy"), record.KindRedriveRequested, record.KindReplayed) // seq 4, 5, 6
	e.chainOf(t, f(4, "fsma"), record.KindResolved)                                  // seq 7, 8
	e.chainOf(t, f(5, "pharmacy"), record.KindPoisoned)                              // seq 9, 10
	a := e.startAuditor(t, testConfig(), func() time.Time { return t0.Add(time.Hour) })
	e.waitApplied(t, a)
	for _, n := range []int{1, 3, 4} {
		if _, ok := a.index.entryOf(id(n)); ok {
			t.Fatalf("resolved chain %d still in the index", n)
		}
	}
	if len(a.index.chains) != 2 {
		t.Fatalf("index holds %d chains, want the 2 unresolved", len(a.index.chains))
	}

	// get, without a domain, of resolved chains.
	for _, n := range []int{3, 4} {
		var g api.GetReply
		request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: id(n)}, &g)
		if g.State.Status != record.StatusResolved || len(g.Problems) != 0 || len(g.Records) != map[int]int{3: 3, 4: 2}[n] {
			t.Fatalf("get %d: status %s, %d records, problems %v", n, g.State.Status, len(g.Records), g.Problems)
		}
	}

	// list: every status, newest first, in pages of 2.
	type row struct {
		id      string
		status  record.Status
		class   record.Class
		records int
	}
	listAll := func(req api.ListRequest) ([]row, int) {
		var rows []row
		total := -1
		for page := 0; page < 10; page++ {
			var l api.ListReply
			request(t, e.nc, api.AuditList, req, &l)
			if total >= 0 && l.Total != total {
				t.Fatalf("total changed between pages: %d, %d", total, l.Total)
			}
			total = l.Total
			for _, it := range l.Items {
				rows = append(rows, row{it.DLQID, record.Status(it.Status), record.Class(it.Class), it.Records})
			}
			if req.Cursor = l.NextCursor; req.Cursor == "" {
				break
			}
		}
		return rows, total
	}
	rows, total := listAll(api.ListRequest{Limit: 2})
	want := []row{
		{id(5), record.StatusPoison, record.ClassPoison, 2},
		{id(4), record.StatusResolved, record.ClassExhausted, 2},
		{id(3), record.StatusResolved, record.ClassExhausted, 3},
		{id(2), record.StatusOpen, record.ClassExhausted, 1},
		{id(1), record.StatusResolved, record.ClassExhausted, 2},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) || total != 5 {
		t.Fatalf("list: total %d\n got %v\nwant %v", total, rows, want)
	}
	rows, total = listAll(api.ListRequest{Status: string(record.StatusResolved), Domain: "pharmacy", Limit: 1})
	if fmt.Sprint(rows) != fmt.Sprint([]row{want[2], want[4]}) || total != 2 {
		t.Fatalf("resolved pharmacy: total %d, %v", total, rows)
	}
	rows, total = listAll(api.ListRequest{Supplier: "P-1", From: t0.Add(2 * time.Minute), To: t0.Add(5 * time.Minute)})
	if fmt.Sprint(rows) != fmt.Sprint([]row{want[0], want[2]}) || total != 2 {
		t.Fatalf("P-1 from minute 2 to 5: total %d, %v", total, rows)
	}
	rows, total = listAll(api.ListRequest{Status: string(record.StatusOpen)})
	if fmt.Sprint(rows) != fmt.Sprint([]row{want[3]}) || total != 1 {
		t.Fatalf("open: total %d, %v", total, rows)
	}

	// groups: resolved chains counted, and sampled after the open ones.
	var g api.GroupsReply
	request(t, e.nc, api.AuditGroups, api.GroupsRequest{Domain: "pharmacy"}, &g)
	var got []string
	for _, gr := range g.Groups {
		got = append(got, fmt.Sprintf("%s %d/%d %v", gr.Fingerprint, gr.Open, gr.Total, gr.Samples))
	}
	wantGroups := []string{
		"pharmacy:DOWNSTREAM_UNAVAILABLE:exhausted 1/3 [" + id(2) + " " + id(3) + " " + id(1) + "]",
		"pharmacy:DOWNSTREAM_UNAVAILABLE:poison 1/1 [" + id(5) + "]",
	}
	if fmt.Sprint(got) != fmt.Sprint(wantGroups) {
		t.Fatalf("groups\n got %v\nwant %v", got, wantGroups)
	}
}

// TestReconcileResolvedChains: reconciliation finds the chains that left
// the live index (resolved) on the server.
func TestReconcileResolvedChains(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	pub := func(subject string, data []byte, dlqID string) uint64 {
		m := nats.NewMsg(subject)
		m.Data = data
		if dlqID != "" {
			m.Header.Set(envelope.DLQID, dlqID)
		}
		ack, err := e.js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	// chain stores a chain for the event at seq of EVENTS, named dlqID.
	chain := func(dlqID string, seq uint64, kinds ...record.Kind) {
		r := first(t, fixture{id: dlqID, domain: "pharmacy", class: record.ClassValidation, code: codes.MalformedJSON,
			firstSeen: t0, quarantined: t0})
		r.SourceSeq, r.AuditHash = seq, ""
		if err := record.Seal(&r); err != nil {
			t.Fatal(err)
		}
		e.publish(t, r)
		for i, k := range kinds {
			r = next(t, r, k, t0.Add(time.Duration(i+1)*time.Minute))
			e.publish(t, r)
		}
	}
	const subject = "events.pharmacy.dispense"
	// A malformed event's chain is named by its subject and bytes, as the
	// validator names it (record.DLQIDFor).
	bad := func(n int) []byte { return []byte(`{"transaction_id":` + strconv.Itoa(n)) }
	ids := map[uint64]string{}
	sourceID := func(seq uint64) string { return ids[seq] }
	resolved := pub(subject, bad(1), "")
	ids[resolved] = record.PayloadDLQID("pharmacy", subject, bad(1))
	chain(sourceID(resolved), resolved, record.KindResolved)
	open := pub(subject, bad(2), "")
	ids[open] = record.PayloadDLQID("pharmacy", subject, bad(2))
	chain(sourceID(open), open)
	pub(subjects.Replay("pharmacy", "dispense"), bad(3), sourceID(resolved)) // a replay of the resolved chain
	// Its next replay, as the redriver publishes it now: into EVENTS.
	pub(subjects.Redriven("pharmacy", "dispense", sourceID(resolved), 2), bad(6), sourceID(resolved))
	pub(subject, bad(4), sourceID(resolved)) // a forged replay header on an event: unaccounted
	pub(subject, bad(5), "")                 // in no chain: unaccounted
	valid, err := os.ReadFile("../../schemas/testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		t.Fatal(err)
	}
	a := e.startAuditor(t, testConfig(), nil)
	env, err := a.gate.Check(subject, valid)
	if err != nil {
		t.Fatal(err)
	}
	pub(subject, valid, "")
	chain(env.IdempotencyKey, 999, record.KindResolved) // quarantined from another message: a duplicate
	e.waitApplied(t, a)
	// The replay reaches EVENTS from REPLAYS through the stream's source.
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		st, err := e.js.Stream(context.Background(), subjects.EventsStream)
		if err != nil {
			return err
		}
		if in, err := st.Info(context.Background()); err != nil || in.State.Msgs != 7 {
			return fmt.Errorf("EVENTS holds %v messages (%v), want 7", in, err)
		}
		return nil
	})
	if _, ok := a.index.entryOf(sourceID(resolved)); ok {
		t.Fatal("the resolved chain is still in the index")
	}
	var rep api.ReconcileReply
	want := map[string]int{api.ReconcileResolved: 1, api.ReconcileOpen: 1, api.ReconcileReplay: 2,
		api.ReconcileUnaccounted: 2, api.ReconcileDuplicate: 1}
	// The domain's filter (*.pharmacy.>) finds the replays of both forms.
	request(t, e.nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s", Domain: "pharmacy"}, &rep)
	if fmt.Sprint(rep.Counts) != fmt.Sprint(want) || rep.Events != 7 {
		t.Fatalf("pharmacy counts %v over %d events, want %v over 7", rep.Counts, rep.Events, want)
	}
	rep = api.ReconcileReply{}
	request(t, e.nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s", IDs: true}, &rep)
	if fmt.Sprint(rep.Counts) != fmt.Sprint(want) || rep.Events != 7 {
		t.Fatalf("counts %v, want %v", rep.Counts, want)
	}
	if ids := rep.IDs[api.ReconcileResolved]; len(ids) != 1 || ids[0].Seq != resolved || ids[0].DLQID != sourceID(resolved) {
		t.Fatalf("resolved: %+v", ids)
	}
}

// TestReconcileTrustsLedger: LEDGER is the system of record. An event
// committed to LEDGER whose IDEMPOTENCY mark is missing (the validator died
// between its LEDGER write and its mark, and the event's redelivery has not
// adopted it yet) is committed, and a second copy of it a duplicate, never
// unaccounted.
func TestReconcileTrustsLedger(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	valid, err := os.ReadFile("../../schemas/testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		t.Fatal(err)
	}
	const subject = "events.pharmacy.dispense"
	a := e.startAuditor(t, testConfig(), nil)
	env, err := a.gate.Check(subject, valid)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for range 2 {
		ack, err := e.js.Publish(ctx, subject, valid)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	m := nats.NewMsg(subjects.Ledger("pharmacy", env.IdempotencyKey))
	m.Data = valid
	m.Header.Set(envelope.IdempotencyKey, env.IdempotencyKey)
	m.Header.Set(envelope.SourceStream, subjects.EventsStream)
	m.Header.Set(envelope.SourceSeq, strconv.FormatUint(seqs[0], 10))
	if _, err := e.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	var rep api.ReconcileReply
	request(t, e.nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s", IDs: true}, &rep)
	want := map[string]int{api.ReconcileCommitted: 1, api.ReconcileDuplicate: 1}
	if fmt.Sprint(rep.Counts) != fmt.Sprint(want) || rep.Events != 2 {
		t.Fatalf("counts %v, want %v", rep.Counts, want)
	}
	if ids := rep.IDs[api.ReconcileCommitted]; len(ids) != 1 || ids[0].Seq != seqs[0] {
		t.Fatalf("committed: %+v, want EVENTS sequence %d", ids, seqs[0])
	}
}
