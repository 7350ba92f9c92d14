package validator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// validExamples names one valid testdata event per domain.
var validExamples = map[string]string{
	"pharmacy": "dispense-schedule-ii.json",
	"dscsa":    "commissioning-sgtin.json",
	"fsma":     "shipping-gln.json",
}

func keyOf(tb testing.TB, subject string, data []byte) string {
	tb.Helper()
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	env, err := g.Check(subject, data)
	if err != nil {
		tb.Fatalf("example does not pass the gate: %v", err)
	}
	return env.IdempotencyKey
}

// TestCommitExactlyOnce publishes the same valid event four times (twice
// with one Nats-Msg-Id, which EVENTS does not honour, and twice without) to
// two validator instances sharing the durable consumer: all four are
// stored, it is committed once (by its business key) and the other copies
// are acknowledged as duplicates.
func TestCommitExactlyOnce(t *testing.T) {
	for domain, file := range validExamples {
		t.Run(domain, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			a := startValidator(t, srv, testConfig(), nil)
			b := startValidator(t, srv, testConfig(), nil)
			subject, data := example(t, domain, "valid", file)
			key := keyOf(t, subject, data)

			var wg sync.WaitGroup
			for i, id := range []string{"same-id", "same-id", "", ""} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = i
					publish(t, js, subject, data, id)
				}()
			}
			wg.Wait()
			if got := streamMsgs(t, js, subjects.EventsStream); got != 4 {
				t.Fatalf("EVENTS holds %d messages, want 4 (no Nats-Msg-Id honoured)", got)
			}
			natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
				sa, sb := a.Stats(), b.Stats()
				if done := sa.Committed + sb.Committed + sa.Duplicates + sb.Duplicates; done != 4 {
					return fmt.Errorf("%d of 4 copies settled", done)
				}
				return nil
			})
			sa, sb := a.Stats(), b.Stats()
			if c := sa.Committed + sb.Committed; c != 1 {
				t.Errorf("committed %d times, want 1", c)
			}
			if d := sa.Duplicates + sb.Duplicates; d != 3 {
				t.Errorf("duplicates = %d, want 3", d)
			}
			if n := ledgerCount(t, js, domain, key); n != 1 {
				t.Errorf("LEDGER holds %d messages for the key, want 1", n)
			}
			if n := streamMsgs(t, js, subjects.LedgerStream); n != 1 {
				t.Errorf("LEDGER holds %d messages, want 1", n)
			}
			if st := keyState(t, js, key); st.State != StateCommitted || st.LedgerSeq == 0 {
				t.Errorf("key state = %+v, want committed with a ledger sequence", st)
			}
			if n := streamMsgs(t, js, subjects.FailuresStream); n != 0 {
				t.Errorf("FAILURES holds %d messages, want 0", n)
			}
		})
	}
}

// TestStructuralFailures publishes real bad inputs: each ends in FAILURES
// with its code and the original bytes intact, and is never retried.
func TestStructuralFailures(t *testing.T) {
	type bad struct {
		name    string
		subject string
		data    []byte
		code    codes.Code
	}
	fromFile := func(domain, file string) (string, []byte) {
		return example(t, domain, "invalid", file)
	}
	big := append([]byte(`{"pad":"`), bytes.Repeat([]byte("x"), gate.DefaultMaxPayload)...)
	big = append(big, `"}`...)
	cases := []bad{
		{name: "malformed JSON", subject: "events.pharmacy.dispense", data: []byte(`{"transaction_id": "TX-1",`), code: codes.MalformedJSON},
		{name: "JSON array", subject: "events.fsma.shipping", data: []byte(`[{"supplier_id":"S-1"}]`), code: codes.NotAnObject},
		{name: "payload over limit", subject: "events.dscsa.shipping", data: big, code: codes.PayloadTooLarge},
		{name: "invalid UTF-8", subject: "events.pharmacy.receive", data: []byte("{\"lot\":\"L\xff\xfe1\"}"), code: codes.InvalidUTF8},
		{name: "unknown domain", subject: "events.widgets.created", data: []byte(`{"id":"1"}`), code: codes.UnknownSubject},
		{name: "trailing garbage", subject: "events.fsma.shipping", data: []byte(`{"a":1} {"b":2}`), code: codes.MalformedJSON},
	}
	for _, f := range []struct {
		domain, file string
		code         codes.Code
	}{
		{"dscsa", "MISSING_LOT--commissioning-without-lot.json", codes.MissingLot},
		{"dscsa", "GTIN_CHECK_DIGIT_FAILED--digital-link-bad-check.json", dscsa.GTINCheckDigitFailed},
		{"dscsa", "INVALID_GTIN--lost-leading-zero.json", dscsa.InvalidGTIN},
		{"dscsa", "UNPARSEABLE_EVENT_TIME--no-offset.json", codes.UnparseableEventTime},
		{"pharmacy", "UNPARSEABLE_EVENT_TIME--no-offset.json", codes.UnparseableEventTime},
		{"pharmacy", "MISSING_LOT--schedule-ii-without-lot.json", codes.MissingLot},
		{"fsma", "UNPARSEABLE_EVENT_TIME--no-offset.json", codes.UnparseableEventTime},
	} {
		s, d := fromFile(f.domain, f.file)
		cases = append(cases, bad{name: f.domain + " " + f.file, subject: s, data: d, code: f.code})
	}

	srv := natstest.Start(t)
	js := srv.JetStream(t)
	v := startValidator(t, srv, testConfig(), nil)
	bySeq := map[uint64]bad{}
	for _, c := range cases {
		bySeq[publish(t, js, c.subject, c.data, "")] = c
	}
	// A valid event whose time carries an offset is normalized, not rejected.
	okSubject, okData := example(t, "dscsa", "valid", "shipping-offset-0500.json")
	publish(t, js, okSubject, okData, "")

	waitMsgs(t, js, subjects.FailuresStream, uint64(len(cases)))
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if v.Stats().Committed != 1 {
			return fmt.Errorf("offset event not committed yet")
		}
		return nil
	})
	got := map[uint64]bool{}
	for _, f := range failures(t, js) {
		c, ok := bySeq[f.Seq]
		if !ok {
			t.Errorf("unexpected failure for seq %d (%s)", f.Seq, f.Code)
			continue
		}
		got[f.Seq] = true
		t.Run(c.name, func(t *testing.T) {
			if f.Code != c.code {
				t.Errorf("code = %s, want %s (detail %q)", f.Code, c.code, f.Detail)
			}
			if !bytes.Equal(f.Payload, c.data) {
				t.Errorf("payload not preserved verbatim (%d bytes, want %d)", len(f.Payload), len(c.data))
			}
			if f.Subject != c.subject || f.Stream != subjects.EventsStream || f.Deliveries != 1 {
				t.Errorf("failure locates %s/%s seq %d after %d deliveries", f.Stream, f.Subject, f.Seq, f.Deliveries)
			}
			if f.Detail == "" || len(f.Attempts) != 1 || f.Attempts[0].Code != c.code {
				t.Errorf("failure lacks detail or attempt: %+v", f.Attempts)
			}
		})
	}
	if len(got) != len(cases) {
		t.Errorf("%d of %d bad inputs reached FAILURES", len(got), len(cases))
	}
	if s := v.Stats(); s.Transient != 0 || s.Structural != uint64(len(cases)) {
		t.Errorf("stats = %+v: structural failures must not be retried", s)
	}
}

// TestDownstreamTransientThenOK: a downstream answering 503 twice then 200
// gets the event committed once after back-off, on the third attempt.
func TestDownstreamTransientThenOK(t *testing.T) {
	down := newDownstream(t, func(call int64) int {
		if call <= 2 {
			return 503
		}
		return 200
	})
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	cfg := testConfig()
	cfg.DownstreamURL = down.URL
	v := startValidator(t, srv, cfg, nil)
	subject, data := example(t, "pharmacy", "valid", validExamples["pharmacy"])
	key := keyOf(t, subject, data)
	publish(t, js, subject, data, "")

	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if v.Stats().Committed != 1 {
			return fmt.Errorf("not committed yet (stats %+v)", v.Stats())
		}
		return nil
	})
	if c := down.calls.Load(); c != 3 {
		t.Errorf("downstream called %d times, want 3", c)
	}
	if n := down.distinct(); n != 1 {
		t.Errorf("downstream accepted %d keys, want 1", n)
	}
	if s := v.Stats(); s.Transient != 2 {
		t.Errorf("transient attempts = %d, want 2", s.Transient)
	}
	if n := ledgerCount(t, js, "pharmacy", key); n != 1 {
		t.Errorf("LEDGER holds %d messages for the key, want 1", n)
	}
}

// TestDownstreamDownExhausts: a downstream answering 503 forever makes the
// event reach MaxDeliver; on that last delivery the validator reports it
// exhausted to FAILURES itself (acknowledged, durable), with every
// attempt, and terminates it, so no max-deliveries advisory is needed: one
// is a core message, lost when ADVISORIES has no leader at that moment.
// The original is still fetchable from EVENTS by its sequence.
func TestDownstreamDownExhausts(t *testing.T) {
	down := newDownstream(t, func(int64) int { return 503 })
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	cfg := testConfig()
	cfg.DownstreamURL = down.URL
	cfg.MaxDeliver = 3
	v := startValidator(t, srv, cfg, nil)
	subject, data := example(t, "fsma", "valid", validExamples["fsma"])
	seq := publish(t, js, subject, data, "")

	waitMsgs(t, js, subjects.FailuresStream, 1)
	fs := failures(t, js)
	if len(fs) != 1 {
		t.Fatalf("FAILURES holds %d reports, want 1", len(fs))
	}
	f := fs[0]
	if f.Class != record.ClassExhausted || f.Code != codes.DownstreamUnavailable || f.Seq != seq || f.Deliveries != 3 || len(f.Attempts) != 3 {
		t.Errorf("report = class %s, code %s, seq %d, deliveries %d, %d attempts; want exhausted, %s, seq %d, 3, 3",
			f.Class, f.Code, f.Seq, f.Deliveries, len(f.Attempts), codes.DownstreamUnavailable, seq)
	}
	if f.Envelope == nil || f.Envelope.IdempotencyKey == "" || !bytes.Equal(f.Payload, data) {
		t.Error("the report lacks the event's envelope or its verbatim bytes")
	}
	// Terminated with its code as reason (which the quarantiner skips), so
	// the server never announces a max-deliveries.
	waitMsgs(t, js, subjects.AdvisoriesStream, 1)
	adv, err := js.Stream(context.Background(), subjects.AdvisoriesStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adv.GetLastMsgForSubject(context.Background(), subjects.TerminatedAdvisories); err != nil {
		t.Errorf("no terminated advisory: %v", err)
	}
	if _, err := adv.GetLastMsgForSubject(context.Background(), subjects.MaxDeliveriesAdvisories); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("a max-deliveries advisory for a reported event: %v", err)
	}
	events, err := js.Stream(context.Background(), subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := events.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatalf("original no longer fetchable: %v", err)
	}
	if !bytes.Equal(orig.Data, data) {
		t.Error("original bytes changed")
	}
	if c := down.calls.Load(); c != 3 {
		t.Errorf("downstream called %d times, want 3", c)
	}
	if s := v.Stats(); s.Exhausted != 1 || s.Committed != 0 {
		t.Errorf("stats = %+v", s)
	}
	hist := readAttempts(context.Background(), mustKV(t, js, subjects.AttemptsBucket), seq)
	if len(hist) != 3 || hist[2].Code != codes.DownstreamUnavailable || hist[2].Delivery != 3 {
		t.Errorf("attempt history = %+v, want 3 DOWNSTREAM_UNAVAILABLE attempts", hist)
	}
}

func mustKV(tb testing.TB, js jetstream.JetStream, bucket string) jetstream.KeyValue {
	tb.Helper()
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		tb.Fatal(err)
	}
	return kv
}

// TestCrashBetweenClaimAndCommit stops a validator abruptly (its connection
// dies) right after it claimed the key — before the downstream call and the
// LEDGER write — and then after the LEDGER write but before marking the key
// committed. A restarted validator commits the event exactly once.
func TestCrashBetweenClaimAndCommit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		downstream bool
		point      string
	}{
		{"downstream after claim", true, "after claim"},
		{"downstream after ledger write", true, "after ledger write"},
		{"ledger only after ledger write", false, "after ledger write"},
	} {
		point := tc.point
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			down := newDownstream(t, func(int64) int { return 200 })
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			cfg := testConfig()
			if tc.downstream {
				cfg.DownstreamURL = down.URL
			}
			cfg.ClaimLease = 2 * time.Second
			cfg.AckWait = time.Second

			crashed := make(chan struct{})
			release := make(chan struct{})
			var dead *running
			crash := func(string) {
				dead.nc.Close() // the process "dies": no ack, no mark
				close(crashed)
				<-release
			}
			hooks := &testHooks{}
			if point == "after claim" {
				hooks.afterClaim = crash
			} else {
				hooks.afterLedger = crash
			}
			dead = startValidator(t, srv, cfg, hooks)
			t.Cleanup(func() { close(release) }) // runs before dead's stop
			subject, data := example(t, "dscsa", "valid", validExamples["dscsa"])
			key := keyOf(t, subject, data)
			publish(t, js, subject, data, "")
			select {
			case <-crashed:
			case <-time.After(10 * time.Second):
				t.Fatal("validator never reached the crash point")
			}
			if tc.downstream {
				if st := keyState(t, js, key); st.State != StateClaimed {
					t.Fatalf("key state after crash = %s, want claimed", st.State)
				}
			}

			restarted := startValidator(t, srv, cfg, nil)
			natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
				if st, err := lookupKey(js, key); err != nil || st.State != StateCommitted {
					return fmt.Errorf("key state %s (%v)", st.State, err)
				}
				return nil
			})
			if n := ledgerCount(t, js, "dscsa", key); n != 1 {
				t.Errorf("LEDGER holds %d messages for the key, want 1", n)
			}
			if n := down.distinct(); tc.downstream && n != 1 {
				t.Errorf("downstream accepted %d keys, want 1", n)
			}
			if s := restarted.Stats(); s.Committed != 1 {
				t.Errorf("restarted validator stats = %+v, want 1 commit", s)
			}
		})
	}
}

// TestCheckEndpoint dry-runs the gate over request-reply.
func TestCheckEndpoint(t *testing.T) {
	srv := natstest.Start(t)
	startValidator(t, srv, testConfig(), nil)
	nc := srv.Connect(t)
	subject, data := example(t, "pharmacy", "valid", validExamples["pharmacy"])
	resp, err := nc.Request("validator.check."+strings.TrimPrefix(subject, "events."), data, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r checkReply
	if err := json.Unmarshal(resp.Data, &r); err != nil || !r.OK || r.Envelope == nil || !strings.HasPrefix(r.Envelope.IdempotencyKey, "pharmacy_") {
		t.Fatalf("reply %s (%v)", resp.Data, err)
	}
	resp, err = nc.Request("validator.check.pharmacy.dispense", []byte(`{`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Nats-Service-Error-Code"); got != string(codes.MalformedJSON) {
		t.Fatalf("error code header = %q, want %s", got, codes.MalformedJSON)
	}
}

// TestReportWaitsForFailures: while FAILURES cannot store a failure report
// (a stream leader being elected; here, the stream missing for a moment),
// the validator retries the report within the delivery instead of
// redelivering the event: its deliveries are not burnt, and it is
// reported, once, when FAILURES is back. Before, each failed report cost a
// delivery, and an event that ran out of them depended on the
// max-deliveries advisory, which a stream without a leader does not store
// (an event lost in a chaos run on a 3-node cluster).
func TestReportWaitsForFailures(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	cfg := testConfig()
	cfg.MaxDeliver = 2
	startValidator(t, srv, cfg, nil)
	ctx := context.Background()
	if err := js.DeleteStream(ctx, subjects.FailuresStream); err != nil {
		t.Fatal(err)
	}
	// Every attempt to report is seen on the intake subject (nothing
	// stores it; this subscriber never answers, so each attempt waits out
	// its time limit, half the AckWait).
	var tries atomic.Int64
	sub, err := srv.Connect(t).Subscribe("dlq.intake.>", func(*nats.Msg) { tries.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	seq := publish(t, js, "events.pharmacy.dispense", []byte(`{"transaction_id": "TX-1",`), "")
	// FAILURES stays away for three attempts (more than MaxDeliver).
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if n := tries.Load(); n < 3 {
			return fmt.Errorf("%d attempts to report", n)
		}
		return nil
	})
	if _, err := js.CreateStream(ctx, streams.Failures(cfg.Streams)); err != nil {
		t.Fatal(err)
	}
	var got []record.Failure
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if got = failures(t, js); len(got) == 0 {
			return errors.New("no failure report")
		}
		return nil
	})
	if len(got) != 1 || got[0].Seq != seq || got[0].Deliveries != 1 || got[0].Code != codes.MalformedJSON {
		t.Fatalf("reports %+v, want one for EVENTS %d at its first delivery", got, seq)
	}
}
