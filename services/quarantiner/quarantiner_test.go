package quarantiner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

func validEvent(tb testing.TB) (string, []byte, envelope.Envelope) {
	tb.Helper()
	b, err := fs.ReadFile(schemas.FS, "testdata/dscsa/valid/commissioning-sgtin.json")
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		tb.Fatal(err)
	}
	const subject = "events.dscsa.commissioning"
	env, err := g.Check(subject, b)
	if err != nil {
		tb.Fatal(err)
	}
	return subject, b, env
}

func verify(tb testing.TB, raws [][]byte) {
	tb.Helper()
	for i, raw := range raws {
		if err := record.VerifySeal(raw); err != nil {
			tb.Errorf("record %d: seal does not recompute: %v", i, err)
		}
	}
	if p := record.VerifyChain(raws); len(p) != 0 {
		tb.Errorf("chain problems: %+v", p)
	}
}

func TestStructuralFailureRecord(t *testing.T) {
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	data := []byte(`{"transaction_id": "TX-1", "ndc": "bad"`)
	seq := e.publishEvent(t, "events.pharmacy.dispense", data, nats.Header{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	f := structural("events.pharmacy.dispense", seq, data, codes.MalformedJSON)
	e.reportFailure(t, f)
	e.waitRecords(t, 1)
	e.intakeEmpty(t)

	recs := e.allRecords(t)
	r := recs[0]
	dlqID := record.DLQIDFor(f)
	if r.DLQID != dlqID || r.Kind != record.KindQuarantined || r.Class != record.ClassValidation ||
		r.ErrorCode != codes.MalformedJSON || r.ErrorDetail == "" || r.Domain != "pharmacy" ||
		r.SourceSubject != "events.pharmacy.dispense" || r.SourceStream != subjects.EventsStream || r.SourceSeq != seq ||
		r.DeliveryCount != 1 || len(r.Attempts) != 1 || r.FirstSeen.IsZero() || r.QuarantinedAt.IsZero() ||
		r.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || r.SpanID != "00f067aa0ba902b7" || r.AuditHash == "" || r.PrevHash != "" {
		t.Errorf("record incomplete: %+v", r)
	}
	got, err := r.Payload.Bytes()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("payload not verbatim: %q (%v)", got, err)
	}
	verify(t, e.chainOf(t, "pharmacy", dlqID))

	// The same failure reported again gives no second record.
	e.reportFailure(t, f)
	e.intakeEmpty(t)
	if n := len(e.allRecords(t)); n != 1 {
		t.Errorf("%d records after a duplicate report, want 1", n)
	}
}

func TestExhaustedRecordAndDuplicates(t *testing.T) {
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	subject, data, env := validEvent(t)
	seq := e.publishEvent(t, subject, data, nil)
	e.exhaust(t, seq, 3)
	e.waitRecords(t, 1)
	e.intakeEmpty(t)

	r := e.allRecords(t)[0]
	if r.DLQID != env.IdempotencyKey || r.Class != record.ClassExhausted || r.ErrorCode != codes.DownstreamUnavailable ||
		r.DeliveryCount != 3 || len(r.Attempts) != 3 || r.Attempts[2].Delivery != 3 || r.OrderingKey != env.OrderingKey ||
		r.IdempotencyKey != env.IdempotencyKey || r.EventTime == nil || r.PartyID != env.PartyID || r.SourceSeq != seq {
		t.Errorf("exhausted record incomplete: %+v", r)
	}
	if got, _ := r.Payload.Bytes(); !bytes.Equal(got, data) {
		t.Error("payload not verbatim")
	}
	verify(t, e.chainOf(t, "dscsa", r.DLQID))

	// A duplicate advisory (as after a leader change) and the same event
	// reported on the other path give no second record.
	adv, _ := json.Marshal(map[string]any{
		"type": "io.nats.jetstream.advisory.v1.max_deliver", "id": "dup", "timestamp": time.Now().UTC(),
		"stream": subjects.EventsStream, "consumer": subjects.ValidatorConsumer, "stream_seq": seq, "deliveries": 3,
	})
	nc := e.srv.Connect(t)
	if err := nc.Publish("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.EVENTS.validator", adv); err != nil {
		t.Fatal(err)
	}
	rejected := structural(subject, seq, data, codes.DownstreamRejected)
	rejected.Envelope = &env
	e.reportFailure(t, rejected)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		adv, _ := e.js.Stream(context.Background(), subjects.AdvisoriesStream)
		info, _ := adv.Info(context.Background())
		fl, _ := e.js.Stream(context.Background(), subjects.FailuresStream)
		finfo, _ := fl.Info(context.Background())
		if info.State.Msgs != 0 || finfo.State.Msgs != 0 || info.State.LastSeq < 2 {
			return fmt.Errorf("duplicates not processed yet")
		}
		return nil
	})
	if n := len(e.allRecords(t)); n != 1 {
		t.Errorf("%d records after duplicates, want 1", n)
	}
}

func TestOriginalUnavailable(t *testing.T) {
	e := newEnv(t)
	subject, data, _ := validEvent(t)
	seq := e.publishEvent(t, subject, data, nil)
	e.exhaust(t, seq, 2)
	events, err := e.js.Stream(context.Background(), subjects.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	// EVENTS denies message deletes: the event expires instead (a max
	// age lowered for a moment, then given back; an update may lower it).
	cfg := events.CachedInfo().Config
	short := cfg
	short.MaxAge = time.Second
	if _, err := e.js.UpdateStream(context.Background(), short); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if _, err := events.GetMsg(context.Background(), seq); err == nil {
			return fmt.Errorf("EVENTS %d not expired yet", seq)
		}
		return nil
	})
	if _, err := e.js.UpdateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	e.start(t, testConfig(), nil)
	e.waitRecords(t, 1)
	r := e.allRecords(t)[0]
	// The max-deliveries advisory and the terminated advisory the deletion
	// causes race; either way one record names the lost event by its key.
	_, _, env := validEvent(t)
	if r.ErrorCode != codes.OriginalUnavailable || r.Class != record.ClassExhausted || r.Payload != nil ||
		r.SourceSeq != seq || len(r.Attempts) != 2 || r.DLQID != env.IdempotencyKey || r.Domain != "dscsa" || r.SourceSubject != subject {
		t.Errorf("record = %+v", r)
	}
	e.intakeEmpty(t)
	if n := len(e.allRecords(t)); n != 1 {
		t.Errorf("%d records, want 1", n)
	}
}

// TestKillBeforeWrite: a quarantiner dies after reading an advisory and
// before writing its record; a restarted one writes the record once.
func TestKillBeforeWrite(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	read := make(chan struct{})
	release := make(chan struct{})
	var dead *running
	dead = e.start(t, cfg, &testHooks{beforeWrite: func() {
		dead.nc.Close()
		close(read)
		<-release
	}})
	t.Cleanup(func() { close(release) })
	subject, data, _ := validEvent(t)
	seq := e.publishEvent(t, subject, data, nil)
	e.exhaust(t, seq, 2)
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("advisory never read")
	}
	e.start(t, cfg, nil)
	e.waitRecords(t, 1)
	e.intakeEmpty(t)
	if n := len(e.allRecords(t)); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
}

// TestTamperDetected: a flipped byte in a stored record breaks its seal, and
// a record removed from the middle of a chain breaks the chain.
func TestTamperDetected(t *testing.T) {
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	data := []byte(`[1,2,3]`)
	seq := e.publishEvent(t, "events.fsma.shipping", data, nil)
	f := structural("events.fsma.shipping", seq, data, codes.NotAnObject)
	e.reportFailure(t, f)
	e.waitRecords(t, 1)
	dlqID := record.DLQIDFor(f)
	nc := e.srv.Connect(t)
	for i, kind := range []record.Kind{record.KindRedriveRequested, record.KindReplayFailed} {
		req := api.AppendRequest{DLQID: dlqID, Domain: "fsma", Kind: kind, ExpectedIndex: ptr(i + 1), Actor: "ops@example", Reason: "test"}
		if _, err := appendReq(t, nc, req); err != nil {
			t.Fatalf("append %s: %v", kind, err)
		}
	}
	raws := e.chainOf(t, "fsma", dlqID)
	if len(raws) != 3 {
		t.Fatalf("chain has %d records, want 3", len(raws))
	}
	verify(t, raws)

	flipped := bytes.Clone(raws[0])
	i := bytes.Index(flipped, []byte(`"source_seq":`)) + len(`"source_seq":`)
	flipped[i] ^= 0x01 // a digit of source_seq changes
	if err := record.VerifySeal(flipped); err == nil {
		t.Error("a flipped byte still verifies")
	}
	if p := record.VerifyChain([][]byte{raws[0], raws[2]}); len(p) == 0 {
		t.Error("a chain with its middle record removed still verifies")
	}
}

func ptr(i int) *int { return &i }

func appendReq(tb testing.TB, nc *nats.Conn, req api.AppendRequest) (api.AppendReply, error) {
	tb.Helper()
	b, _ := json.Marshal(req)
	subject := api.QuarantinerAppend
	if req.Kind == record.KindHoldPlaced || req.Kind == record.KindHoldLifted {
		subject = api.QuarantinerHold
	}
	m, err := nc.Request(subject, b, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return api.AppendReply{}, fmt.Errorf("%s: %s", code, m.Header.Get("Nats-Service-Error"))
	}
	var rep api.AppendReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		tb.Fatal(err)
	}
	return rep, nil
}

// TestReplayFailuresBecomePoison: each failed replay of a quarantined event
// is appended to its chain with its redrive count; the one reaching the cap
// makes the event poison. A repeated report of a replay is not appended twice.
func TestReplayFailuresBecomePoison(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.RedriveCap = 3
	e.start(t, cfg, nil)
	data := []byte(`{"broken":`)
	seq := e.publishEvent(t, "events.pharmacy.receive", data, nil)
	f := structural("events.pharmacy.receive", seq, data, codes.MalformedJSON)
	e.reportFailure(t, f)
	e.waitRecords(t, 1)
	dlqID := record.DLQIDFor(f)
	for n := 1; n <= 3; n++ {
		hdr := nats.Header{envelope.DLQID: {dlqID}, envelope.RedriveCount: {fmt.Sprint(n)}}
		rseq := e.publishEvent(t, "events.pharmacy.receive", data, hdr)
		rf := structural("events.pharmacy.receive", rseq, data, codes.MalformedJSON)
		rf.DLQID, rf.RedriveCount = dlqID, n
		e.reportFailure(t, rf)
		if n == 2 {
			e.reportFailure(t, rf) // reported twice: one record
		}
		e.waitRecords(t, 1+n)
	}
	e.intakeEmpty(t)
	var chain []record.Record
	for _, raw := range e.chainOf(t, "pharmacy", dlqID) {
		var r record.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		chain = append(chain, r)
	}
	kinds := []record.Kind{record.KindQuarantined, record.KindReplayFailed, record.KindReplayFailed, record.KindPoisoned}
	if len(chain) != len(kinds) {
		t.Fatalf("chain has %d records, want %d", len(chain), len(kinds))
	}
	for i, k := range kinds {
		if chain[i].Kind != k || chain[i].RedriveCount != i {
			t.Errorf("record %d: kind %s redrives %d, want %s %d", i, chain[i].Kind, chain[i].RedriveCount, k, i)
		}
	}
	st, err := record.Fold(chain)
	if err != nil || st.Status != record.StatusPoison || st.Class != record.ClassPoison || st.Redrivable(true) {
		t.Errorf("state = %+v (%v), want poison, not redrivable", st, err)
	}
}

func TestAppendEndpoint(t *testing.T) {
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	data := []byte(`nope`)
	seq := e.publishEvent(t, "events.dscsa.shipping", data, nil)
	f := structural("events.dscsa.shipping", seq, data, codes.MalformedJSON)
	e.reportFailure(t, f)
	e.waitRecords(t, 1)
	dlqID := record.DLQIDFor(f)
	nc := e.srv.Connect(t)

	req := api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindRedriveRequested, ExpectedIndex: ptr(1), DrainID: "d1"}
	first, err := appendReq(t, nc, req)
	if err != nil || first.Index != 1 || first.Status != record.StatusRedriving {
		t.Fatalf("append = %+v, %v", first, err)
	}
	again, err := appendReq(t, nc, req)
	if err != nil || again != first {
		t.Errorf("repeated append = %+v, %v; want the same record %+v", again, err, first)
	}
	tests := []struct {
		name string
		raw  []byte
		req  api.AppendRequest
		want string
	}{
		{"malformed", []byte(`{`), api.AppendRequest{}, api.ErrBadRequest},
		{"no kind", nil, api.AppendRequest{DLQID: dlqID, Domain: "dscsa"}, api.ErrBadRequest},
		{"unknown dlq id", nil, api.AppendRequest{DLQID: "dscsa_00", Domain: "dscsa", Kind: record.KindResolved, Actor: "a", Reason: "r"}, api.ErrNotFound},
		{"stale index", nil, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindReplayed, ExpectedIndex: ptr(1)}, api.ErrConflict},
		{"release when not poison", nil, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindReleased, Class: record.ClassValidation, Actor: "a", Reason: "r"}, api.ErrInvalidTransition},
		{"resolve without reason", nil, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindResolved}, api.ErrInvalidTransition},
		{"approved without signature", nil, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindApproved, Actor: "b", Reason: "r"}, api.ErrInvalidTransition},
		{"approved by the requester", nil, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindApproved, Actor: "a", Reason: "r",
			Signature: &record.Signature{ApprovalID: "ap1", Action: "correct", Requester: "a", RequestedAt: time.Now(), Approver: "a", ApproverRole: "approver", SignedAt: time.Now(), Meaning: "m"}}, api.ErrInvalidTransition},
		{"hold on the redriver's endpoint", nil, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindHoldPlaced, Actor: "a", Reason: "r",
			Hold: &record.HoldMark{HoldID: "h1", CaseID: "c1", At: time.Now()}}, api.ErrForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.raw
			if b == nil {
				b, _ = json.Marshal(tt.req)
			}
			m, err := nc.Request(api.QuarantinerAppend, b, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Header.Get("Nats-Service-Error-Code"); got != tt.want {
				t.Errorf("error code = %q, want %q (%s)", got, tt.want, m.Header.Get("Nats-Service-Error"))
			}
		})
	}
	// The auditor's endpoint appends holds' records only, and complete.
	for _, tt := range []struct {
		name string
		req  api.AppendRequest
		want string
	}{
		{"resolve on the hold endpoint", api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindResolved, Actor: "a", Reason: "r"}, api.ErrForbidden},
		{"hold without its hold", api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindHoldPlaced, Actor: "a", Reason: "r"}, api.ErrInvalidTransition},
		{"hold without case id", api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindHoldPlaced, Actor: "a", Reason: "r",
			Hold: &record.HoldMark{HoldID: "h1", At: time.Now()}}, api.ErrInvalidTransition},
		{"lift of a hold not placed", api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindHoldLifted, Actor: "a", Reason: "r",
			Hold: &record.HoldMark{HoldID: "h1", CaseID: "c1", At: time.Now()}}, api.ErrInvalidTransition},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := json.Marshal(tt.req)
			m, err := nc.Request(api.QuarantinerHold, b, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Header.Get("Nats-Service-Error-Code"); got != tt.want {
				t.Errorf("error code = %q, want %q (%s)", got, tt.want, m.Header.Get("Nats-Service-Error"))
			}
		})
	}
	// A two-person approval's signature is sealed into the chain.
	// Bob signs with his own registered key.
	bob := approvaltest.Register(t, e.js, "bob", access.RoleApprover)
	signedAt := time.Now().UTC().Truncate(time.Second)
	sig := &record.Signature{ApprovalID: "ap1", Action: "correct", Requester: "alice", RequestedAt: time.Now().UTC().Add(-time.Minute),
		Approver: "bob", ApproverRole: "approver", SignedAt: signedAt, Meaning: "reviewed the correction against the invoice",
		RequesterPerson: "alice", ApproverPerson: "bob"}
	sig.Signed = approval.Raw(bob.Sign(api.Decision{Action: api.DecisionApprove, Target: "ap1", Request: strings.Repeat("ab", 32),
		Chain: approvaltest.ChainHead(t, e.js, dlqID), Meaning: sig.Meaning, Person: "bob", Role: "approver", At: signedAt}))
	if _, err := appendReq(t, nc, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindApproved, ExpectedIndex: ptr(2), Actor: "bob", Reason: "approval ap1", Signature: sig}); err != nil {
		t.Fatalf("append approved: %v", err)
	}
	chain := e.chainOf(t, "dscsa", dlqID)
	if n := len(chain); n != 3 {
		t.Fatalf("chain has %d records, want 3", n)
	}
	var last record.Record
	if err := json.Unmarshal(chain[2], &last); err != nil {
		t.Fatal(err)
	}
	if last.Kind != record.KindApproved || last.Signature == nil || last.Signature.Approver != "bob" || last.Signature.Meaning != sig.Meaning {
		t.Errorf("approved record = %+v, want the signature of bob", last)
	}
	// A legal hold is sealed into the chain with the status it keeps; a
	// repeated placing is answered with the record, a second one refused.
	hold := api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindHoldPlaced, ExpectedIndex: ptr(3), Actor: "erin", Reason: "subpoena",
		Hold: &record.HoldMark{HoldID: "h1", CaseID: "case-1", At: time.Now()}}
	placed, err := appendReq(t, nc, hold)
	if err != nil || placed.Index != 3 || placed.Status != record.StatusRedriving {
		t.Fatalf("append hold_placed = %+v, %v", placed, err)
	}
	if again, err := appendReq(t, nc, hold); err != nil || again != placed {
		t.Errorf("repeated hold_placed = %+v, %v; want %+v", again, err, placed)
	}
	hold.ExpectedIndex = nil
	if _, err := appendReq(t, nc, hold); err == nil {
		t.Error("a second placing of the same hold was appended")
	}
	chain = e.chainOf(t, "dscsa", dlqID)
	if err := json.Unmarshal(chain[3], &last); err != nil {
		t.Fatal(err)
	}
	if last.Hold == nil || last.Hold.HoldID != "h1" || last.Hold.CaseID != "case-1" || last.Hold.Status != record.StatusRedriving || last.Actor != "erin" {
		t.Errorf("hold_placed record = %+v", last)
	}
}

// TestTerminatedAdvisories: a message terminated on the validator's
// consumer with a deadletter code as reason (the validator's own doing) is
// left to the failure report; one terminated there for another reason (an
// administrator's hand) is quarantined as TERMINATED_EXTERNALLY. Another
// consumer's advisories are not captured at all: they say nothing about
// whether an event was committed.
func TestTerminatedAdvisories(t *testing.T) {
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	subject, data, _ := validEvent(t)
	e.publishEvent(t, subject, data, nil)
	e.publishEvent(t, "events.fsma.shipping", []byte(`{}`), nil)
	cons, err := e.js.CreateOrUpdateConsumer(context.Background(), subjects.EventsStream, jetstream.ConsumerConfig{
		Durable: subjects.ValidatorConsumer, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: subjects.EventsAll,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for m := range batch.Messages() {
		reason := "operator removed it"
		if n == 1 {
			reason = string(codes.SchemaValidation)
		}
		if err := m.TermWithReason(reason); err != nil {
			t.Fatal(err)
		}
		n++
	}
	e.waitRecords(t, 1)
	e.intakeEmpty(t)
	recs := e.allRecords(t)
	if len(recs) != 1 || recs[0].ErrorCode != codes.TerminatedExternally || recs[0].SourceSeq != 1 {
		t.Errorf("records = %+v", recs)
	}
}

// TestStaleChainCache: two instances each cache the tails of the chains
// they append to. When one appends behind the other's back, the other's
// cached tail is stale: its next append is refused by the conditional
// write or found behind the expected index, and decided again on the
// stored chain. Chains never fork and no request is lost.
func TestStaleChainCache(t *testing.T) {
	e := newEnv(t)
	a := e.start(t, testConfig(), nil)
	b := e.start(t, testConfig(), nil)
	ctx := context.Background()
	quarantine := func(subject string) string {
		data := []byte(`nope`)
		seq := e.publishEvent(t, subject, data, nil)
		f := structural(subject, seq, data, codes.MalformedJSON)
		e.reportFailure(t, f)
		id := record.DLQIDFor(f)
		natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			if n := len(e.chainOf(t, "dscsa", id)); n != 1 {
				return fmt.Errorf("chain has %d records", n)
			}
			return nil
		})
		return id
	}
	mustAppend := func(s *running, req api.AppendRequest) api.AppendReply {
		t.Helper()
		rep, code, err := s.appendLifecycle(ctx, req)
		if err != nil {
			t.Fatalf("%s: %s %v", req.Kind, code, err)
		}
		return rep
	}
	checkChain := func(id string, n int, status record.Status) {
		t.Helper()
		var recs []record.Record
		for _, raw := range e.chainOf(t, "dscsa", id) {
			r, err := record.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		st, err := record.Fold(recs)
		if err != nil || len(recs) != n || st.Status != status {
			t.Fatalf("chain: %d records, status %s, fold error %v; want %d records, %s", len(recs), st.Status, err, n, status)
		}
	}

	t.Run("refused write", func(t *testing.T) {
		id := quarantine("events.dscsa.shipping")
		mustAppend(a, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindRedriveRequested, ExpectedIndex: ptr(1), DrainID: "d1"})
		mustAppend(b, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindResolved, Actor: "op", Reason: "fixed by hand"})
		// a's tail says redriving at 2 records: its replayed is refused
		// by the server, and the stored chain says it is too late.
		_, code, err := a.appendLifecycle(ctx, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindReplayed, ExpectedIndex: ptr(2), DrainID: "d1"})
		if err == nil || code != api.ErrConflict {
			t.Fatalf("append on a stale tail = %s, %v; want %s", code, err, api.ErrConflict)
		}
		checkChain(id, 3, record.StatusResolved)
	})
	t.Run("expected index beyond the cached tail", func(t *testing.T) {
		id := quarantine("events.dscsa.receiving")
		mustAppend(a, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindRedriveRequested, ExpectedIndex: ptr(1), DrainID: "d1"})
		mustAppend(b, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindPoisoned, ExpectedIndex: ptr(2)})
		op := approvaltest.Register(t, e.js, "op", access.RoleOperator)
		rel := api.ReleaseRequest{DLQID: id, Class: string(record.ClassValidation), Reason: "schema fixed"}
		rep := mustAppend(a, api.AppendRequest{DLQID: id, Domain: "dscsa", Kind: record.KindReleased, ExpectedIndex: ptr(3),
			Class: record.ClassValidation, Actor: "op", Reason: "schema fixed",
			Signed: op.Record(api.DecisionRelease, id, rel, approvaltest.ChainHead(t, e.js, id), access.RoleOperator, time.Now())})
		if rep.Index != 3 || rep.Status != record.StatusOpen {
			t.Fatalf("released = %+v", rep)
		}
		checkChain(id, 4, record.StatusOpen)
	})
}

// TestDocumentReplayedReport: the outcome report of a whole document's
// replay (record.Failure.Replayed, no code) appends replayed to the
// document's chain, located on the replay, its reason the counts, once
// however often it is reported; a report for a chain that is not
// redriving writes nothing.
func TestDocumentReplayedReport(t *testing.T) {
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	subject := subjects.Event("dscsa", subjects.DocumentType)
	data := []byte(`{"type":"EPCISDocument","epcisBody":{"eventList":[{"type":"ObjectEvent","example:shipper":"Müller & Söhne <Großhandel>"`)
	seq := e.publishEvent(t, subject, data, nil)
	f := structural(subject, seq, data, dscsa.MalformedDocument)
	e.reportFailure(t, f)
	e.waitRecords(t, 1)
	dlqID := record.DLQIDFor(f)
	counts := record.DocumentReplay{Events: 6, Committed: 5, Quarantined: 1}
	report := func(n int) record.Failure {
		rseq := e.publishEvent(t, subject, data, nats.Header{envelope.DLQID: {dlqID}, envelope.RedriveCount: {strconv.Itoa(n)}})
		return record.Failure{Domain: "dscsa", Subject: subject, Stream: subjects.EventsStream, Seq: rseq, Deliveries: 1,
			Published: time.Now().UTC(), DLQID: dlqID, RedriveCount: n, FailedAt: time.Now().UTC(), Replayed: &counts}
	}
	// Open, not redriving: nothing.
	e.reportFailure(t, report(1))
	e.intakeEmpty(t)
	e.waitRecords(t, 1)
	nc := e.srv.Connect(t)
	if _, err := appendReq(t, nc, api.AppendRequest{DLQID: dlqID, Domain: "dscsa", Kind: record.KindRedriveRequested, ExpectedIndex: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	r := report(1)
	e.reportFailure(t, r)
	e.reportFailure(t, r) // twice: one record
	e.waitRecords(t, 3)
	e.intakeEmpty(t)
	var chain []record.Record
	for _, raw := range e.chainOf(t, "dscsa", dlqID) {
		var rec record.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		chain = append(chain, rec)
	}
	last := chain[len(chain)-1]
	if len(chain) != 3 || last.Kind != record.KindReplayed || last.SourceSeq != r.Seq || last.Reason != counts.Reason() ||
		last.ErrorCode != dscsa.MalformedDocument {
		t.Fatalf("chain of %d, last %s on %d %q (%s)", len(chain), last.Kind, last.SourceSeq, last.Reason, last.ErrorCode)
	}
	if st, err := record.Fold(chain); err != nil || st.Status != record.StatusResolved {
		t.Fatalf("state %+v, %v; want resolved", st, err)
	}
}
