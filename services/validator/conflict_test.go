package validator

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestIdempotencyConflict: an event whose idempotency key is committed is
// acknowledged as a duplicate only when its content equals the committed
// one (the same bytes, or the same canonical JSON: member order and
// whitespace do not count; for DSCSA the same CBV 2.0 event hash ID, so
// list order, CBV URN or compact IRI, eventTime offset and recordTime do
// not count either); an event with other content under the same
// key is quarantined IDEMPOTENCY_CONFLICT, its bytes verbatim, naming the
// committed LEDGER entry and both content hashes, and LEDGER keeps the
// first. The same on every commit path: one event at a time, atomic
// batches, and the claim protocol with a downstream.
func TestIdempotencyConflict(t *testing.T) {
	_, dispense := example(t, "pharmacy", "valid", "dispense-schedule-ii.json")
	_, epcis := example(t, "dscsa", "valid", "commissioning-sgtin.json")
	_, shipping := example(t, "fsma", "valid", "shipping-gln.json")
	_, epcisShipping := example(t, "dscsa", "valid", "shipping-compact-iri-and-quantity.json")
	replace := func(b []byte, old, new string) []byte {
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("example lacks %q", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	// The same dispense, its members in another order and without
	// whitespace: canonically identical.
	reordered := []byte(`{"actor_id":"RPH-0412","dea_schedule":"II","event_type":"dispense","expiry":"2026-09-30","lot":"L24A0917","ndc":"00406-0512-01",` +
		`"occurred_at":"2025-03-14T15:42:10Z","quantity_delta":"-30","registrant_dea":"BW4829137","transaction_id":"INV-2025-0181","unit":"EA"}`)
	// The same DSCSA shipping event (one eventID) as the CBV 2.0 event
	// hash ID sees it: its lists in another order, CBV URNs instead of
	// compact IRIs, its eventTime in UTC, a recordTime.
	sameShipping := epcisShipping
	for _, r := range [][2]string{
		{`"urn:epc:id:sgtin:0614141.012345.10016550749981",
    "urn:epc:id:sgtin:0614141.012345.10016550749982"`, `"urn:epc:id:sgtin:0614141.012345.10016550749982",
    "urn:epc:id:sgtin:0614141.012345.10016550749981"`},
		{`"cbv:BizStep-shipping"`, `"urn:epcglobal:cbv:bizstep:shipping"`},
		{`"cbv:Disp-in_transit"`, `"urn:epcglobal:cbv:disp:in_transit"`},
		{`"eventTime": "2024-03-12T09:15:00-05:00",`, `"eventTime": "2024-03-12T14:15:00.000Z", "recordTime": "2024-03-13T08:00:00Z",`},
	} {
		sameShipping = replace(sameShipping, r[0], r[1])
	}
	rows := []struct {
		name          string
		domain        string
		first, second []byte
		conflict      bool
	}{
		{"pharmacy: same registrant and transaction id, -300 after -30", "pharmacy", dispense,
			replace(dispense, `"quantity_delta": "-30"`, `"quantity_delta": "-300"`), true},
		{"dscsa: same eventID, another lot", "dscsa", epcis, replace(epcis, `"A24B017"`, `"A24B018"`), true},
		{"fsma: same key fields, another quantity", "fsma", shipping, replace(shipping, `"quantity": "600"`, `"quantity": "6000"`), true},
		{"dscsa: same eventID, another bizStep", "dscsa", epcisShipping, replace(epcisShipping, `"cbv:BizStep-shipping"`, `"cbv:BizStep-receiving"`), true},
		{"dscsa: same eventID, another quantity", "dscsa", epcisShipping, replace(epcisShipping, `"quantity": 2,`, `"quantity": 20,`), true},
		{"pharmacy: byte-identical retry", "pharmacy", dispense, dispense, false},
		{"dscsa: same eventID, the same event by its event hash ID (lists reordered, CBV URNs, eventTime in UTC, a recordTime)", "dscsa",
			epcisShipping, sameShipping, false},
		{"pharmacy: canonically identical retry (member order, whitespace)", "pharmacy", dispense, reordered, false},
	}
	modes := []struct {
		name string
		cfg  func(*Config, *testing.T)
	}{
		{"one at a time", func(*Config, *testing.T) {}},
		{"batches", func(c *Config, _ *testing.T) { c.Streams.SyncAlways = true }},
		{"downstream", func(c *Config, t *testing.T) {
			c.DownstreamURL = newDownstream(t, func(int64) int { return 200 }).URL
		}},
	}
	for _, mode := range modes {
		for _, row := range rows {
			t.Run(mode.name+"/"+row.name, func(t *testing.T) {
				t.Parallel()
				srv := natstest.Start(t)
				js := srv.JetStream(t)
				cfg := testConfig()
				mode.cfg(&cfg, t)
				v := startValidator(t, srv, cfg, nil)
				subject := subjectFor(t, row.domain, row.first)
				key := keyOf(t, subject, row.first)
				if k := keyOf(t, subjectFor(t, row.domain, row.second), row.second); k != key {
					t.Fatalf("the rows' events must share a key: %s, %s", key, k)
				}
				publish(t, js, subject, row.first, "")
				natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
					if v.Stats().Committed != 1 {
						return fmt.Errorf("first event not committed: %+v", v.Stats())
					}
					return nil
				})
				secondSeq := publish(t, js, subjectFor(t, row.domain, row.second), row.second, "")
				natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
					if st := v.Stats(); st.Duplicates+st.Structural != 1 {
						return fmt.Errorf("second event not settled: %+v", st)
					}
					return nil
				})
				st := keyState(t, js, key)
				if !st.Committed() || st.ContentHash != idempotency.ContentHash(row.domain, row.first) || st.ContentIdentity != idempotency.StoredIdentity(row.domain) {
					t.Fatalf("key state %+v, want committed with the first event's content hash", st)
				}
				if n := ledgerCount(t, js, row.domain, key); n != 1 {
					t.Fatalf("LEDGER holds %d entries of the key, want 1", n)
				}
				s, err := js.Stream(context.Background(), subjects.LedgerStream)
				if err != nil {
					t.Fatal(err)
				}
				entry, err := s.GetLastMsgForSubject(context.Background(), subjects.Ledger(row.domain, key))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(entry.Data, row.first) || entry.Header.Get(envelope.ContentHash) != idempotency.ContentHash(row.domain, row.first) ||
					entry.Header.Get(envelope.ContentIdentity) != idempotency.StoredIdentity(row.domain) {
					t.Fatal("LEDGER does not hold the first event with its content hash")
				}
				fs := failures(t, js)
				if !row.conflict {
					if len(fs) != 0 || v.Stats().Duplicates != 1 {
						t.Fatalf("a retry of the same content: %d failures, stats %+v; want a plain duplicate", len(fs), v.Stats())
					}
					return
				}
				if len(fs) != 1 {
					t.Fatalf("%d failures, want 1", len(fs))
				}
				f := fs[0]
				want := record.Conflict{LedgerStream: subjects.LedgerStream, LedgerSeq: entry.Sequence,
					CommittedHash: idempotency.ContentHash(row.domain, row.first), ContentHash: idempotency.ContentHash(row.domain, row.second)}
				switch {
				case f.Code != codes.IdempotencyConflict || f.Class != record.ClassValidation:
					t.Errorf("failure %s/%s, want %s/validation", f.Code, f.Class, codes.IdempotencyConflict)
				case f.Conflict == nil || *f.Conflict != want:
					t.Errorf("conflict %+v, want %+v", f.Conflict, want)
				case !bytes.Equal(f.Payload, row.second) || f.Seq != secondSeq:
					t.Error("the failure does not hold the conflicting event's bytes and sequence")
				case !strings.Contains(f.Detail, want.CommittedHash) || !strings.Contains(f.Detail, want.ContentHash):
					t.Errorf("detail %q names neither hash", f.Detail)
				case record.DLQIDFor(f) != record.ConflictDLQID(row.domain, key, want.ContentHash):
					t.Errorf("dlq id %s, want the conflict's own chain", record.DLQIDFor(f))
				}
			})
		}
	}
}

// TestBatchRefusedByWrittenKey: a key written to LEDGER after the batcher
// looked its group's keys up and before the group's atomic batch (by
// another validator, or anyone with a LEDGER credential) makes the server
// refuse the whole batch; the group is then written one event at a time:
// every other event is committed once, and the event of the written key
// adopts the entry when it holds its content (as the entry of a validator
// that died after its LEDGER write), else is quarantined
// IDEMPOTENCY_CONFLICT against that entry.
func TestBatchRefusedByWrittenKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		same     bool
		wantCode codes.Code
	}{
		{"written with the event's own content", true, ""},
		{"written with other content", false, codes.IdempotencyConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			set, err := sample.Load()
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig()
			cfg.Streams.SyncAlways = true // a batcher; groups of SyncMinBatch or more are batches
			cfg.Workers = 4 * batch.SyncMinBatch
			startValidator(t, srv, cfg, nil).stop()
			const n = 3 * batch.SyncMinBatch
			data := map[string][]byte{}
			subjectOf := map[string]string{}
			var once sync.Once
			var written string
			var writtenSeq uint64
			hooks := &testHooks{beforeLedgerBatch: func(keys []string) {
				once.Do(func() {
					written = keys[len(keys)/2]
					body := []byte(`{"note":"Müller & Söhne <Großhandel>"}`)
					if tc.same {
						body = data[written]
					}
					dom, _, _ := strings.Cut(written, "_")
					ack, err := js.Publish(context.Background(), subjects.Ledger(dom, written), body)
					if err != nil {
						t.Errorf("write the key: %v", err)
						return
					}
					writtenSeq = ack.Sequence
				})
			}}
			// A round: n new events published while no validator runs,
			// then one started on the backlog. A loaded machine may let
			// the workers commit one by one, so that no group forms:
			// then another round, until one did (its validator's
			// figures are the ones checked).
			var v *running
			for round := 0; written == ""; round++ {
				if round == 10 {
					t.Fatal("no group was written as a batch in 10 rounds")
				}
				if v != nil {
					t.Logf("round %d: the %d events were committed without a group; another round", round, n)
					v.stop()
				}
				for i := round * n; i < (round+1)*n; i++ {
					e, err := set.Valid(i)
					if err != nil {
						t.Fatal(err)
					}
					k := keyOf(t, e.Subject, e.Data)
					data[k], subjectOf[k] = e.Data, e.Subject
					publish(t, js, e.Subject, e.Data, "")
				}
				v = startValidator(t, srv, cfg, hooks)
				natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
					if st := v.Stats(); st.Committed+st.Duplicates+st.Structural != n {
						return fmt.Errorf("%d of %d settled: %+v", st.Committed+st.Duplicates+st.Structural, n, st)
					}
					return nil
				})
			}
			st := v.Stats()
			fs := failures(t, js)
			if tc.same {
				// Adopted, as the entry of a validator that died after its
				// LEDGER write.
				if st.Committed != n || len(fs) != 0 {
					t.Fatalf("stats %+v, %d failures; want all %d committed (the written entry adopted)", st, len(fs), n)
				}
			} else {
				if st.Committed != n-1 || st.Structural != 1 || len(fs) != 1 || fs[0].Code != tc.wantCode ||
					fs[0].Conflict == nil || fs[0].Conflict.LedgerSeq != writtenSeq {
					t.Fatalf("stats %+v, failures %+v; want %d committed and one %s against LEDGER %d", st, fs, n-1, tc.wantCode, writtenSeq)
				}
			}
			if v.commit.batch.fallbacks.Load() == 0 {
				t.Error("no event took the per-event path")
			}
			for k := range data {
				dom, _, _ := strings.Cut(k, "_")
				if c := ledgerCount(t, js, dom, k); c != 1 {
					t.Errorf("%s: %d LEDGER entries, want 1", k, c)
				}
			}
		})
	}
}
