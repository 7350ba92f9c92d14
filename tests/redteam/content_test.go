package redteam

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestKeyReuseIsNoDuplicate (I1), as the publisher: a valid dispense
// (registrant BW4829137, transaction id X, quantity_delta -30) is committed;
// another valid dispense with the same registrant and transaction id and
// quantity_delta -300 is not acknowledged as a duplicate: it is quarantined
// IDEMPOTENCY_CONFLICT, bytes verbatim, naming the committed LEDGER entry
// and both content hashes, and LEDGER keeps the first alone. A retry of the
// first that differs only in member order and whitespace stays a plain
// duplicate, with no record. Reconciliation counts the conflict apart
// (neither duplicate nor unaccounted), and verify holds.
func TestKeyReuseIsNoDuplicate(t *testing.T) {
	e := startEnv(t)
	since := time.Now().Add(-time.Second)
	subject := subjects.Event("pharmacy", "dispense")
	first, key := uniqueValidEvent(t, subject)
	var doc map[string]any
	if err := json.Unmarshal(first, &doc); err != nil {
		t.Fatal(err)
	}
	doc["quantity_delta"] = "-300"
	conflicting, _ := json.Marshal(doc)
	doc["quantity_delta"] = "-30"
	retry, _ := json.MarshalIndent(doc, "", "\t") // the first, another layout
	if !bytes.Contains(first, []byte(`"quantity_delta":"-30"`)) || idempotency.ContentHash("pharmacy", retry) != idempotency.ContentHash("pharmacy", first) {
		t.Fatal("the test events are not what this test needs")
	}

	ack := e.publishAck(t, subject, first, nil)
	e.settled(t, ack.Sequence)
	firstSeq := ack.Sequence
	ledgerBefore, _ := e.msgs(t, subjects.LedgerStream)
	ack = e.publishAck(t, subject, conflicting, nil)
	conflictSeq := ack.Sequence
	e.settled(t, conflictSeq)
	ack = e.publishAck(t, subject, retry, nil)
	retrySeq := ack.Sequence
	e.settled(t, retrySeq)
	if got, _ := e.msgs(t, subjects.LedgerStream); got != ledgerBefore {
		t.Errorf("LEDGER went from %d to %d messages", ledgerBefore, got)
	}

	s, err := e.admin.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := s.GetLastMsgForSubject(context.Background(), subjects.Ledger("pharmacy", key))
	if err != nil || !bytes.Equal(entry.Data, first) {
		t.Fatalf("LEDGER entry of the key: %v (holds the first: %v)", err, err == nil && bytes.Equal(entry.Data, first))
	}
	id := record.ConflictDLQID("pharmacy", key, idempotency.ContentHash("pharmacy", conflicting))
	var rep api.GetReply
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		code := e.request(t, access.DefaultPerson(access.RoleInspector), api.AuditGet, api.GetRequest{DLQID: id, IncludePayload: true, Reason: "red team I1"}, &rep)
		if code != "" {
			return errors.New(code)
		}
		return nil
	})
	want := record.Conflict{LedgerStream: subjects.LedgerStream, LedgerSeq: entry.Sequence,
		CommittedHash: idempotency.ContentHash("pharmacy", first), ContentHash: idempotency.ContentHash("pharmacy", conflicting)}
	var r0 record.Record
	if err := json.Unmarshal(rep.Records[0].Record, &r0); err != nil {
		t.Fatal(err)
	}
	switch {
	case rep.State.ErrorCode != codes.IdempotencyConflict || rep.State.Class != record.ClassValidation:
		t.Errorf("quarantined %s/%s, want %s/validation", rep.State.ErrorCode, rep.State.Class, codes.IdempotencyConflict)
	case r0.Conflict == nil || *r0.Conflict != want:
		t.Errorf("record's conflict %+v, want %+v", r0.Conflict, want)
	case payloadOf(rep) != string(conflicting) || r0.SourceSeq != conflictSeq:
		t.Error("the record does not hold the conflicting event's bytes and sequence")
	}
	// No record for the canonically identical retry.
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditGet, api.GetRequest{DLQID: record.ConflictDLQID("pharmacy", key, idempotency.ContentHash("pharmacy", retry))}, &rep); code != api.ErrNotFound {
		t.Errorf("audit.get of a retry's conflict chain: %q, want %s", code, api.ErrNotFound)
	}

	var rec api.ReconcileReply
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditReconcile, api.ReconcileRequest{From: since, Grace: "0s", IDs: true}, &rec); code != "" {
		t.Fatalf("audit.reconcile: %s", code)
	}
	category := map[uint64]string{}
	for c, evs := range rec.IDs {
		for _, ev := range evs {
			category[ev.Seq] = c
		}
	}
	for seq, c := range map[uint64]string{firstSeq: api.ReconcileCommitted, conflictSeq: api.ReconcileConflict, retrySeq: api.ReconcileDuplicate} {
		if category[seq] != c {
			t.Errorf("reconcile: EVENTS %d is %q, want %q", seq, category[seq], c)
		}
	}
	for _, u := range rec.Ledger.UnsourcedEntries {
		if u.Subject == subjects.Ledger("pharmacy", key) {
			t.Errorf("the committed entry is listed unsourced: %+v", u)
		}
	}
	e.verified(t)
}

// TestLedgerOncePerKey (I5), with the validator's own service credential:
// arbitrary JSON published to ledger.pharmacy.<key> twice is stored once
// (the server refuses the second, 10077, whatever the headers; an atomic
// batch holding the subject is refused as a whole); the entry stored names
// no source and reconciliation lists it unsourced. A key squatted that way
// before its event arrives does not swallow the event: the event is
// quarantined IDEMPOTENCY_CONFLICT against the squatted entry, and
// reconciliation lists the squat unsourced and the event as a conflict.
func TestLedgerOncePerKey(t *testing.T) {
	e := startEnv(t)
	since := time.Now().Add(-time.Second)
	ctx := context.Background()
	js, err := jetstream.New(e.conn(t, access.Validator))
	if err != nil {
		t.Fatal(err)
	}
	subject := subjects.Event("pharmacy", "dispense")
	victim, victimKey := uniqueValidEvent(t, subject)
	squat := subjects.Ledger("pharmacy", victimKey)
	junkKey := "pharmacy_" + fmt.Sprintf("%032x", time.Now().UnixNano())
	junk := subjects.Ledger("pharmacy", junkKey)
	forged := nats.Header{}
	forged.Set("Deadletter-Source-Stream", subjects.EventsStream) // a source that is not there
	forged.Set("Deadletter-Source-Seq", "987654321")
	seqs := map[string]uint64{}
	for _, step := range []struct {
		name, subject string
		h             nats.Header
		refused       bool
	}{
		{"arbitrary JSON", junk, nil, false},
		{"again, same subject", junk, nil, true},
		{"again, forged source headers", junk, forged, true},
		{"a squat on a key before its event", squat, forged, false},
	} {
		m := nats.NewMsg(step.subject)
		m.Data = []byte(`{"quantity_delta":"-300","note":"Müller & Söhne <Großhandel>"}`)
		for k, v := range step.h {
			m.Header[k] = v
		}
		ack, err := js.PublishMsg(ctx, m)
		var apiErr *jetstream.APIError
		switch {
		case step.refused && (!errors.As(err, &apiErr) || apiErr.ErrorCode != streams.ErrCodeMaxMsgsPerSubject):
			t.Errorf("%s: %v, want refused by the server (%d)", step.name, err, streams.ErrCodeMaxMsgsPerSubject)
		case !step.refused && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case !step.refused:
			seqs[step.subject] = ack.Sequence
		}
	}
	before, _ := e.msgs(t, subjects.LedgerStream)
	fresh := nats.NewMsg(subjects.Ledger("pharmacy", "pharmacy_"+fmt.Sprintf("%032x", time.Now().UnixNano()+1)))
	fresh.Data = []byte(`{}`)
	again := nats.NewMsg(junk)
	again.Data = []byte(`{}`)
	if _, err := batch.Publish(ctx, js, []*nats.Msg{fresh, again}); !errors.Is(err, batch.ErrRefused) {
		t.Errorf("an atomic batch holding a written subject: %v, want refused as a whole", err)
	}
	if after, _ := e.msgs(t, subjects.LedgerStream); after != before {
		t.Errorf("LEDGER went from %d to %d messages", before, after)
	}

	// The squatted key's event arrives.
	ack := e.publishAck(t, subject, victim, nil)
	e.settled(t, ack.Sequence)
	id := record.ConflictDLQID("pharmacy", victimKey, idempotency.ContentHash("pharmacy", victim))
	var rep api.GetReply
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditGet, api.GetRequest{DLQID: id}, &rep); code != "" {
			return errors.New(code)
		}
		return nil
	})
	if rep.State.ErrorCode != codes.IdempotencyConflict {
		t.Errorf("the squatted key's event: %s, want %s", rep.State.ErrorCode, codes.IdempotencyConflict)
	}

	var rec api.ReconcileReply
	if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditReconcile, api.ReconcileRequest{From: since, Grace: "0s", IDs: true}, &rec); code != "" {
		t.Fatalf("audit.reconcile: %s", code)
	}
	unsourced := map[uint64]string{}
	for _, u := range rec.Ledger.UnsourcedEntries {
		unsourced[u.Seq] = u.Reason
	}
	if unsourced[seqs[junk]] != api.UnsourcedNoSource || unsourced[seqs[squat]] != api.UnsourcedSourceMissing {
		t.Errorf("reconcile lists %v as unsourced, want %d (%s) and %d (%s)", unsourced,
			seqs[junk], api.UnsourcedNoSource, seqs[squat], api.UnsourcedSourceMissing)
	}
	found := false
	for _, ev := range rec.IDs[api.ReconcileConflict] {
		found = found || ev.Seq == ack.Sequence
	}
	if !found {
		t.Errorf("reconcile does not count the squatted key's event as a conflict: %v", rec.Counts)
	}
	// The squat and the junk entry stay in LEDGER for good: verify
	// reports their keys committed with no IDEMPOTENCY entry.
	e.plant(junkKey, victimKey)
	e.verified(t)
}

// plant notes ids whose forgeries the suite leaves in the shared store
// on purpose (verified then expects them reported, and nothing else).
func (e *env) plant(ids ...string) {
	for _, id := range ids {
		e.planted.Store(id, struct{}{})
	}
}

// plantedIn returns the planted id a problem is about, if any: its
// subject ends in it ($KV.APPROVALS.<id>, audit.actions.approval.<id>,
// $KV.IDEMPOTENCY.<key>) or it names it as its dlq id.
func (e *env) plantedIn(p api.VerifyProblem) (string, bool) {
	var found string
	e.planted.Range(func(k, _ any) bool {
		id := k.(string)
		if p.DLQID == id || strings.HasSuffix(p.Subject, "."+id) {
			found = id
			return false
		}
		return true
	})
	return found, found != ""
}

// verified runs audit.verify as the viewer: it answers, and reports no
// problem but the planted forgeries; it returns those it reported (one
// may not be reported yet: an index entry is compared only past its grace
// period).
func (e *env) verified(tb testing.TB) map[string]bool {
	tb.Helper()
	var v api.VerifyReply
	if code := e.request(tb, access.DefaultPerson(access.RoleViewer), api.AuditVerify, api.VerifyRequest{}, &v); code != "" {
		tb.Fatalf("audit.verify: %s", code)
	}
	if v.ProblemCount > len(v.Problems) {
		tb.Errorf("audit.verify: %d problems, %d listed: raise the limit", v.ProblemCount, len(v.Problems))
	}
	reported := map[string]bool{}
	for _, p := range v.Problems {
		if id, ok := e.plantedIn(p); ok {
			reported[id] = true
			continue
		}
		tb.Errorf("audit.verify: %s %s %s: %s", p.Kind, p.Subject, p.DLQID, p.Detail)
	}
	return reported
}
