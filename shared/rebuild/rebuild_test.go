package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/hold"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// store is a provisioned embedded server and an administrator's
// JetStream handle (the tests write as each owner's code does, through
// the owners' own stores where they are shared packages).
func store(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	srv := natstest.StartSecured(tb, streams.DefaultOptions())
	js, err := jetstream.New(srv.ConnectAs(tb, access.Admin))
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// placeHold places a hold as hold.Store does and writes its AUDIT action
// (the auditor's hold.place), at placedAt.
func placeHold(t *testing.T, hs *hold.Store, caseID string, target api.HoldTarget, placedAt time.Time) api.Hold {
	t.Helper()
	ctx := context.Background()
	who := access.Identity{User: "elif.yilmaz", Role: access.RoleInspector}
	h, err := hs.Place(ctx, api.HoldPlaceRequest{CaseID: caseID, Reason: "DEA subpoena, Müller & Söhne <Großhandel>", Target: target}, who, placedAt)
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Audit(ctx, h, hold.AuditPlaced); err != nil {
		t.Fatal(err)
	}
	return h
}

// putRaw writes b on a bucket's key, unconditionally (a writer with the
// owner's credential).
func putRaw(t testing.TB, js jetstream.JetStream, bucket, key string, b []byte) {
	t.Helper()
	if _, err := js.Publish(context.Background(), subjects.BucketKey(bucket, key), b); err != nil {
		t.Fatal(err)
	}
}

func TestHolds(t *testing.T) {
	js := store(t)
	ctx := context.Background()
	hs := hold.NewStore(js, nil)
	then := time.Now().Add(-time.Hour).UTC()
	active := placeHold(t, hs, "CASE-1 Müller & Söhne <Großhandel>", api.HoldTarget{DLQID: "pharmacy_0123456789abcdef0123456789abcdef"}, then)
	lifted := placeHold(t, hs, "CASE 陈伟 \"2\"", api.HoldTarget{PartyID: "urn:epc:id:sgln:0614141.00001.0"}, then)
	lifter := access.Identity{User: "amara.okafor", Role: access.RoleOperator}
	l, err := hs.Lift(ctx, lifted.ID, lifted.CaseID, "case closed <Nord> & Süd", lifter, then.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Audit(ctx, l, hold.AuditLifted); err != nil {
		t.Fatal(err)
	}
	r := New(js, Options{})
	if ps, err := r.Compare(ctx, subjects.HoldsBucket); err != nil || len(ps) != 0 {
		t.Fatalf("a clean HOLDS: %+v %v", ps, err)
	}
	want, err := r.Expected(ctx, subjects.HoldsBucket)
	if err != nil || len(want) != 2 || want[lifted.ID].Value.(api.Hold).LiftReason != l.LiftReason {
		t.Fatalf("expected: %+v %v", want, err)
	}

	forge := func(h api.Hold, edit func(*api.Hold)) []byte {
		edit(&h)
		h.Revision = 0
		b, _ := json.Marshal(h)
		return b
	}
	for _, tc := range []struct {
		name   string
		key    string
		value  []byte // nil: a delete marker
		kind   Kind
		fields []string
	}{
		{"another case", active.ID, forge(active, func(h *api.Hold) { h.CaseID = "CASE-someone-else" }), Altered, []string{"case_id"}},
		{"lifted by nobody", active.ID, forge(active, func(h *api.Hold) {
			at := then
			h.Status, h.LiftedBy, h.LiftedAt = api.HoldLifted, "mallory", &at
		}), Altered, []string{"status"}},
		{"lift undone", lifted.ID, forge(l, func(h *api.Hold) { h.Status, h.LiftedBy, h.LiftedAt, h.LiftReason = api.HoldActive, "", nil, "" }), Altered, []string{"status"}},
		{"another lifter", lifted.ID, forge(l, func(h *api.Hold) { h.LiftedBy = "mallory" }), Altered, []string{"lifted_by"}},
		{"delete-marked", lifted.ID, nil, Missing, nil},
		{"does not decode", active.ID, []byte(`{"id": <Müller & Söhne>`), Missing, nil},
		{"another id", active.ID, forge(active, func(h *api.Hold) { h.ID = "hold-other" }), Missing, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv, err := js.KeyValue(ctx, subjects.HoldsBucket)
			if err != nil {
				t.Fatal(err)
			}
			if tc.value == nil {
				if err := kv.Delete(ctx, tc.key); err != nil {
					t.Fatal(err)
				}
			} else {
				putRaw(t, js, subjects.HoldsBucket, tc.key, tc.value)
			}
			ps, err := r.Compare(ctx, subjects.HoldsBucket)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != 1 || ps[0].Key != tc.key || ps[0].Kind != tc.kind || (tc.fields != nil && !slices.Equal(ps[0].Fields, tc.fields)) {
				t.Fatalf("compare: %+v, want %s %v of %s", ps, tc.kind, tc.fields, tc.key)
			}
			rep, err := r.Restore(ctx, subjects.HoldsBucket)
			if err != nil || rep.Created+rep.Updated != 1 || len(rep.Unrestorable) != 0 {
				t.Fatalf("restore: %+v %v", rep, err)
			}
			if ps, err := r.Compare(ctx, subjects.HoldsBucket); err != nil || len(ps) != 0 {
				t.Fatalf("after restore: %+v %v", ps, err)
			}
			got, err := hs.Get(ctx, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			orig := active
			if tc.key == lifted.ID {
				orig = l
			}
			if got.CaseID != orig.CaseID || got.Status != orig.Status || got.LiftedBy != orig.LiftedBy || got.Reason != orig.Reason {
				t.Errorf("restored %+v, was %+v", got, orig)
			}
		})
	}

	t.Run("extra", func(t *testing.T) {
		forged := active
		forged.ID, forged.Revision = "hold-20260101T000000-0000000000000001", 0
		b, _ := json.Marshal(forged)
		putRaw(t, js, subjects.HoldsBucket, forged.ID, b)
		fresh := active
		fresh.ID, fresh.PlacedAt, fresh.Revision = "hold-20260101T000000-0000000000000002", time.Now().UTC(), 0
		b, _ = json.Marshal(fresh)
		putRaw(t, js, subjects.HoldsBucket, fresh.ID, b) // placed now: AUDIT's action may follow within the grace
		future := active
		future.ID, future.PlacedAt, future.Revision = "hold-20260101T000000-0000000000000003", time.Now().AddDate(5, 0, 0).UTC(), 0
		b, _ = json.Marshal(future)
		putRaw(t, js, subjects.HoldsBucket, future.ID, b) // dated ahead to be given time for ever: no grace
		ps, err := r.Compare(ctx, subjects.HoldsBucket)
		if err != nil || len(ps) != 2 || ps[0].Key != forged.ID || ps[0].Kind != Extra || ps[1].Key != future.ID || ps[1].Kind != Extra {
			t.Fatalf("compare: %+v %v, want %s and %s extra", ps, err, forged.ID, future.ID)
		}
		rep, err := r.Restore(ctx, subjects.HoldsBucket)
		if err != nil || rep.Unchanged != 2 || rep.Removed != 0 {
			t.Fatalf("restore reporting extras: %+v %v", rep, err)
		}
		rep, err = New(js, Options{Extra: ExtraRemove, Grace: -1}).Restore(ctx, subjects.HoldsBucket)
		if err != nil || rep.Removed != 3 {
			t.Fatalf("restore removing extras: %+v %v", rep, err)
		}
		if _, err := hs.Get(ctx, forged.ID); !errors.Is(err, hold.ErrNotFound) {
			t.Errorf("the extra hold after its removal: %v", err)
		}
		if ps, err := New(js, Options{Grace: -1}).Compare(ctx, subjects.HoldsBucket); err != nil || len(ps) != 0 {
			t.Errorf("after the removal: %+v %v", ps, err)
		}
	})
}

// TestRestoreWhileTheOwnerWrites: a write that loses its compare-and-set
// (the owner wrote the key meanwhile) is read and compared again: right
// now, nothing is written; still wrong, it is written on the new
// revision.
func TestRestoreWhileTheOwnerWrites(t *testing.T) {
	js := store(t)
	ctx := context.Background()
	hs := hold.NewStore(js, nil)
	h := placeHold(t, hs, "CASE-race <1> & 陈伟", api.HoldTarget{DLQID: "fsma_0123456789abcdef0123456789abcdef"}, time.Now().Add(-time.Hour))
	right, _ := json.Marshal(func() api.Hold { x := h; x.Revision = 0; return x }())
	wrong, _ := json.Marshal(func() api.Hold { x := h; x.CaseID, x.Revision = "CASE-forged", 0; return x }())
	at := time.Now().Add(-time.Minute * 30).UTC()
	lifted := h
	lifted.Status, lifted.LiftedBy, lifted.LiftedByRole, lifted.LiftedAt, lifted.LiftReason, lifted.Revision = api.HoldLifted, "amara.okafor",
		string(access.RoleOperator), &at, "case closed <Müller & Söhne>", 0
	liftedJSON, _ := json.Marshal(lifted)
	for _, tc := range []struct {
		name      string
		meanwhile []byte
		// audit: the owner's AUDIT action of its write (a lift).
		audit bool
		want  Report
		// status the hold has at the end.
		status string
	}{
		{"the owner put it right", right, false, Report{Unchanged: 1, Retries: 1}, api.HoldActive},
		{"another wrong write", wrong, false, Report{Updated: 1, Retries: 1}, api.HoldActive},
		// The source changed too: the write is decided on the source as
		// it is now, never on the one read before (the lift stands).
		{"the owner lifted it", liftedJSON, true, Report{Unchanged: 1, Retries: 1}, api.HoldLifted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			putRaw(t, js, subjects.HoldsBucket, h.ID, wrong)
			r := New(js, Options{})
			once := false
			r.beforeWrite = func(key string) {
				if once {
					return
				}
				once = true
				putRaw(t, js, subjects.HoldsBucket, key, tc.meanwhile)
				if tc.audit {
					if err := hs.Audit(ctx, lifted, hold.AuditLifted); err != nil {
						t.Fatal(err)
					}
				}
			}
			rep, err := r.Restore(ctx, subjects.HoldsBucket)
			if err != nil || rep.Updated != tc.want.Updated || rep.Unchanged != tc.want.Unchanged || rep.Retries != tc.want.Retries {
				t.Fatalf("restore: %+v %v, want %+v", rep, err, tc.want)
			}
			if ps, err := r.Compare(ctx, subjects.HoldsBucket); err != nil || len(ps) != 0 {
				t.Fatalf("after restore: %+v %v", ps, err)
			}
			if got, err := hs.Get(ctx, h.ID); err != nil || got.Status != tc.status {
				t.Errorf("the hold after restore: %s %v, want %s", got.Status, err, tc.status)
			}
		})
	}
}

// commit writes a LEDGER message and its committed key state as the
// validator does (the LEDGER write conditional on the key's subject
// being empty, then the mark).
func commit(tb testing.TB, js jetstream.JetStream, dom, key string, sourceSeq uint64, mark bool) idempotency.KeyState {
	tb.Helper()
	ctx := context.Background()
	m := nats.NewMsg(subjects.Ledger(dom, key))
	m.Data = []byte(`{"transaction_id":"` + key + `","party":"Müller & Söhne <Großhandel>","pharmacist":"陈伟"}`)
	m.Header.Set(envelope.IdempotencyKey, key)
	m.Header.Set(envelope.EventType, "dispense")
	m.Header.Set(envelope.SourceStream, subjects.EventsStream)
	m.Header.Set(envelope.SourceSeq, strconv.FormatUint(sourceSeq, 10))
	hash := idempotency.ContentHash(dom, m.Data)
	m.Header.Set(envelope.ContentHash, hash)
	m.Header.Set(jetstream.MsgIDHeader, key)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		tb.Fatal(err)
	}
	st := idempotency.KeyState{State: idempotency.StateCommitted, Domain: dom, EventType: "dispense", SourceSeq: sourceSeq,
		LedgerSeq: ack.Sequence, CommittedAt: time.Now().UTC(), ContentHash: hash, ContentIdentity: idempotency.StoredIdentity(dom)}
	if mark {
		b, _ := json.Marshal(st)
		putRaw(tb, js, subjects.IdempotencyBucket, key, b)
	}
	return st
}

func TestIdempotency(t *testing.T) {
	js := store(t)
	ctx := context.Background()
	a := commit(t, js, "pharmacy", "tx-a", 11, true)
	commit(t, js, "pharmacy", "tx-b", 12, true)
	commit(t, js, "pharmacy", "tx-unmarked", 13, false) // the validator died before its mark
	r := New(js, Options{Grace: -1})
	claim := func(st string, lease time.Time) []byte {
		b, _ := json.Marshal(idempotency.KeyState{State: st, Owner: "validator-2", LeaseUntil: lease, Domain: "pharmacy", SourceSeq: 99})
		return b
	}
	committedAs := func(edit func(*idempotency.KeyState)) []byte {
		st := a
		edit(&st)
		b, _ := json.Marshal(st)
		return b
	}
	for _, tc := range []struct {
		name  string
		key   string
		value []byte
		kind  Kind // "": no problem
	}{
		{"a commit LEDGER holds, unmarked", "tx-unmarked", nil, Missing},
		{"committed from another event", "tx-a", committedAs(func(s *idempotency.KeyState) { s.SourceSeq = 77 }), Altered},
		{"another content", "tx-a", committedAs(func(s *idempotency.KeyState) { s.ContentHash = "00" }), Altered},
		{"a live claim over a commit", "tx-a", claim(idempotency.StateClaimed, time.Now().Add(30*time.Second)), ""},
		{"released over a commit", "tx-a", claim(idempotency.StateReleased, time.Time{}), Altered},
		{"a claim leased for a year over a commit", "tx-a", claim(idempotency.StateClaimed, time.Now().Add(365*24*time.Hour)), Altered},
		{"a claim LEDGER does not hold", "tx-claimed", claim(idempotency.StateClaimed, time.Now().Add(-time.Hour)), ""},
		{"committed, LEDGER holds nothing", "tx-forged", committedAs(func(*idempotency.KeyState) {}), Extra},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.value != nil {
				putRaw(t, js, subjects.IdempotencyBucket, tc.key, tc.value)
			}
			ps, err := r.Compare(ctx, subjects.IdempotencyBucket)
			if err != nil {
				t.Fatal(err)
			}
			var got []Problem
			for _, p := range ps {
				if p.Key == tc.key {
					got = append(got, p)
				}
			}
			if tc.kind == "" && len(got) != 0 || tc.kind != "" && (len(got) != 1 || got[0].Kind != tc.kind) {
				t.Fatalf("problems of %s: %+v, want %q", tc.key, got, tc.kind)
			}
			rep, err := New(js, Options{Grace: -1, Extra: ExtraRemove}).Restore(ctx, subjects.IdempotencyBucket)
			if err != nil || len(rep.Unrestorable) != 0 {
				t.Fatalf("restore: %+v %v", rep, err)
			}
			if ps, err := r.Compare(ctx, subjects.IdempotencyBucket); err != nil || len(ps) != 0 {
				t.Fatalf("after restore: %+v %v", ps, err)
			}
		})
	}
	kv, err := js.KeyValue(ctx, subjects.IdempotencyBucket)
	if err != nil {
		t.Fatal(err)
	}
	if st, found, err := idempotency.Lookup(ctx, kv, "tx-a"); err != nil || !found || st.SourceSeq != a.SourceSeq || st.LedgerSeq != a.LedgerSeq {
		t.Errorf("tx-a after the restores: %+v %v %v", st, found, err)
	}
}

func TestUnknownBucket(t *testing.T) {
	js := store(t)
	for _, b := range []string{"", "LEDGER", "KV_HOLDS", "HOLDS.>", "Müller & Söhne"} {
		if _, err := Compare(context.Background(), js, b); !errors.Is(err, ErrUnknownBucket) {
			t.Errorf("Compare(%q): %v, want ErrUnknownBucket", b, err)
		}
	}
}

func TestVerifyKind(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Bucket: subjects.HoldsBucket, Kind: Missing}, "hold_missing"},
		{Problem{Bucket: subjects.HoldsBucket, Kind: Altered}, "hold_altered"},
		{Problem{Bucket: subjects.HoldsBucket, Kind: Extra}, "hold_extra"},
		{Problem{Bucket: subjects.ApprovalsBucket, Kind: Altered}, "approval_altered"},
		{Problem{Bucket: subjects.DrainsBucket, Kind: Missing}, "drain_missing"},
		{Problem{Bucket: subjects.IdempotencyBucket, Kind: Extra}, "idempotency_extra"},
	} {
		if got := tc.p.VerifyKind(); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.p.Bucket, tc.p.Kind, got, tc.want)
		}
	}
}

// TestLogReport: a report's log lines name buckets, keys, kinds and
// fields, never a detail (which is made for people, not logs).
func TestLogReport(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	rep := Report{Bucket: subjects.HoldsBucket, Created: 1, Problems: []Problem{
		{Bucket: subjects.HoldsBucket, Key: "hold-1", Kind: Missing, Detail: "secret Müller & Söhne"},
		{Bucket: subjects.HoldsBucket, Key: "hold-2", Kind: Altered, Fields: []string{"case_id"}, Detail: "secret 陈伟"},
	}}
	rep.Unrestorable = rep.Problems[1:]
	LogReport(context.Background(), log, rep)
	out := buf.String()
	for _, want := range []string{`"key":"hold-1"`, `"kind":"altered"`, `"fields":["case_id"]`, `"msg":"INDEX_RESTORED"`, `"created":1`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("log carries a detail:\n%s", out)
	}
}

// TestWrittenAfterTheBucketWasRead: an owner that writes the bucket and
// then its source (a hold placed: HOLDS, then AUDIT) between Compare's
// read of the bucket and its read of the source leaves a key the source
// holds and the bucket read lacked: it is read again, and is no problem;
// one lost meanwhile is missing at once.
func TestWrittenAfterTheBucketWasRead(t *testing.T) {
	js := store(t)
	ctx := context.Background()
	hs := hold.NewStore(js, nil)
	for _, tc := range []struct {
		name string
		lose bool
	}{
		{"placed meanwhile", false},
		{"placed and wiped meanwhile", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(js, Options{})
			var h api.Hold
			r.afterRead = func() {
				h = placeHold(t, hs, "CASE <meanwhile> & 陈伟", api.HoldTarget{DLQID: "dscsa_0123456789abcdef0123456789abcdef"}, time.Now())
				if tc.lose {
					kv, err := js.KeyValue(ctx, subjects.HoldsBucket)
					if err != nil {
						t.Fatal(err)
					}
					if err := kv.Delete(ctx, h.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			ps, err := r.Compare(ctx, subjects.HoldsBucket)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !tc.lose && len(ps) != 0:
				t.Errorf("a hold placed while compared: %+v", ps)
			case tc.lose && (len(ps) != 1 || ps[0].Key != h.ID || ps[0].Kind != Missing):
				t.Errorf("a hold placed and wiped while compared: %+v, want it missing", ps)
			}
		})
	}
}

func TestAPIError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code string
	}{
		{"unknown bucket", fmt.Errorf("%w: LEDGER", ErrUnknownBucket), api.ErrBadRequest},
		{"kept changing", fmt.Errorf("%w: HOLDS hold-1", ErrConflict), api.ErrConflict},
		{"store", fmt.Errorf("%w: read HOLDS: timeout", ErrUnavailable), api.ErrUnavailable},
	} {
		if ae := api.AsError(APIError(tc.err)); ae == nil || ae.Code != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, ae, tc.code)
		}
	}
	if APIError(nil) != nil {
		t.Error("nil is not nil")
	}
}
