package redteam

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Registrants of the party tests: B is the example publisher's
// (publisher-bw4829137), A another pharmacy's.
const (
	registrantA = "AB1234563" // Pharmacie Saint-Étienne
	registrantB = "BW4829137" // Müller & Söhne <Großhandel>
)

// pharmacyEvent returns a pharmacy dispense of registrant (NDC
// 00406-0512-01) of lot with a transaction id of its own; a
// positive quantity makes it fail validation (QUANTITY_SIGN_MISMATCH)
// with its identity still derived.
func pharmacyEvent(registrant, lot, occurred string, failing bool) []byte {
	qty := "-30"
	if failing {
		qty = "30"
	}
	b, _ := json.Marshal(map[string]any{
		"transaction_id": "INV-<Müller & Söhne>-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		"registrant_dea": registrant, "ndc": "00406-0512-01", "lot": lot, "expiry": "2030-09-30",
		"quantity_delta": qty, "unit": "EA", "event_type": "dispense", "dea_schedule": "II",
		"occurred_at": occurred, "actor_id": "RPH-0412 \"Étienne\"",
	})
	return b
}

// publishAs publishes data on subject as person, through its import,
// waits until the validator settled it and returns its EVENTS sequence.
func (e *env) publishAs(tb testing.TB, person, subject string, data []byte) uint64 {
	tb.Helper()
	js, err := jetstream.New(e.conn(tb, person))
	if err != nil {
		tb.Fatal(err)
	}
	ack, err := js.Publish(context.Background(), subject, data)
	if err != nil {
		tb.Fatalf("publish as %s: %v", person, err)
	}
	e.settled(tb, ack.Sequence)
	return ack.Sequence
}

// waitChain waits until audit.get answers the chain id.
func (e *env) waitChain(tb testing.TB, id string) api.GetReply {
	tb.Helper()
	var rep api.GetReply
	natstest.CheckFor(tb, 20*time.Second, 50*time.Millisecond, func() error {
		if code := e.request(tb, access.DefaultPerson(access.RoleInspector), api.AuditGet, api.GetRequest{DLQID: id}, &rep); code != "" {
			return fmt.Errorf("audit.get %s: %s", id, code)
		}
		return nil
	})
	return rep
}

// TestPublisherBoundToParties (I2): a publisher may publish only for the
// parties the access source gives it. An event for another party is
// quarantined PARTY_NOT_AUTHORIZED in a chain of its own (never one named
// by the other party's key), with the publisher the server wrote into its
// subject on the record, shown by audit.get and found by audit.list's
// publisher filter; LEDGER and the other party's key stay untouched. The
// all-parties publisher and a per-party publisher for its own party
// commit, the publisher on the LEDGER entry.
func TestPublisherBoundToParties(t *testing.T) {
	e := startEnv(t)
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, publisher, registrant string
		want                        codes.Code // "" commits
	}{
		{"per-party publisher for its registrant", "publisher-bw4829137", registrantB, ""},
		{"per-party publisher for another registrant", "publisher-bw4829137", registrantA, codes.PartyNotAuthorized},
		{"FSMA publisher for a pharmacy registrant", "publisher-sup-00417", registrantB, codes.PartyNotAuthorized},
		{"all-parties publisher", string(access.RolePublisher), registrantA, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := pharmacyEvent(tc.registrant, "L24A0917", "2025-03-14T15:42:10Z", false)
			env, err := g.Check(subjects.Event("pharmacy", "dispense"), data)
			if err != nil {
				t.Fatal(err)
			}
			// The dry run answers as the publish will.
			m, err := e.conn(t, tc.publisher).Request("validator.check.pharmacy.dispense", data, 10*time.Second)
			if err != nil {
				t.Fatalf("validator.check: %v", err)
			}
			if got := m.Header.Get(micro.ErrorCodeHeader); got != string(tc.want) {
				t.Errorf("validator.check as %s: code %q, want %q", tc.publisher, got, tc.want)
			}
			ledgerBefore, _ := e.msgs(t, subjects.LedgerStream)
			seq := e.publishAs(t, tc.publisher, subjects.Event("pharmacy", "dispense"), data)
			stored := subjects.Published(tc.publisher, "pharmacy", "dispense")
			ls, err := e.admin.Stream(context.Background(), subjects.LedgerStream)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				m, err := ls.GetLastMsgForSubject(context.Background(), subjects.Ledger("pharmacy", env.IdempotencyKey))
				if err != nil {
					t.Fatalf("not committed: %v", err)
				}
				if got := m.Header.Get(envelope.Publisher); got != tc.publisher {
					t.Errorf("LEDGER entry names publisher %q, want %q", got, tc.publisher)
				}
				return
			}
			id := record.PayloadDLQID("pharmacy", stored, data)
			rep := e.waitChain(t, id)
			st := rep.State
			if st.ErrorCode != tc.want || st.Class != record.ClassValidation || st.Publisher != tc.publisher || st.PartyID != tc.registrant {
				t.Errorf("chain %s: code %s class %s publisher %q party %q", id, st.ErrorCode, st.Class, st.Publisher, st.PartyID)
			}
			if id == env.IdempotencyKey {
				t.Error("the chain is named by the other party's key")
			}
			var page api.ListReply
			if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditList,
				api.ListRequest{Publisher: tc.publisher, Code: string(tc.want)}, &page); code != "" {
				t.Fatalf("audit.list: %s", code)
			}
			found := false
			for _, it := range page.Items {
				found = found || (it.DLQID == id && it.Publisher == tc.publisher)
			}
			if !found {
				t.Errorf("audit.list by publisher %s does not list %s", tc.publisher, id)
			}
			if got, _ := e.msgs(t, subjects.LedgerStream); got != ledgerBefore {
				t.Errorf("LEDGER went from %d to %d messages", ledgerBefore, got)
			}
			if _, err := ls.GetLastMsgForSubject(context.Background(), subjects.Ledger("pharmacy", env.IdempotencyKey)); err == nil {
				t.Error("the other party's key was committed")
			}
			// Reconcile finds the event in its chain (open), not unaccounted.
			var rec api.ReconcileReply
			if code := e.request(t, access.DefaultPerson(access.RoleViewer), api.AuditReconcile, api.ReconcileRequest{IDs: true, Grace: "0s"}, &rec); code != "" {
				t.Fatalf("audit.reconcile: %s", code)
			}
			for _, u := range rec.Unaccounted {
				if u.Seq == seq {
					t.Errorf("reconcile lists the event as unaccounted: %+v", u)
				}
			}
			open := false
			for _, o := range rec.IDs[api.ReconcileOpen] {
				open = open || (o.Seq == seq && o.DLQID == id)
			}
			if !open {
				t.Errorf("reconcile does not count EVENTS %d as open in %s", seq, id)
			}
		})
	}
}

// TestOnePartyNeverHoldsAnother (I3): registrant A publishes a failing
// event carrying registrant B's NDC and lot, dated 2001-01-01. A drain of
// B's record, named by its id, is not held behind A's record: the
// pharmacy ordering key includes the registrant.
func TestOnePartyNeverHoldsAnother(t *testing.T) {
	e := startEnv(t)
	// A lot of this test's own: the shared stack holds other tests' events.
	lot := "L-I3-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	b := pharmacyEvent(registrantB, lot, "2025-03-14T15:42:10Z", true)
	a := pharmacyEvent(registrantA, lot, "2001-01-01T00:00:00Z", true)
	e.publishAs(t, "publisher-bw4829137", subjects.Event("pharmacy", "dispense"), b)
	e.publishAs(t, string(access.RolePublisher), subjects.Event("pharmacy", "dispense"), a)
	idB := record.PayloadDLQID("pharmacy", subjects.Published("publisher-bw4829137", "pharmacy", "dispense"), b)
	idA := record.PayloadDLQID("pharmacy", subjects.Published(string(access.RolePublisher), "pharmacy", "dispense"), a)
	stA, stB := e.waitChain(t, idA).State, e.waitChain(t, idB).State
	if stA.OrderingKey == stB.OrderingKey || stA.OrderingKey == "" {
		t.Fatalf("ordering keys %q and %q: one registrant's order is shared with another's", stA.OrderingKey, stB.OrderingKey)
	}
	var rep api.DrainStartReply
	req := api.DrainStartRequest{DryRun: true, Filter: api.DrainFilter{DLQIDs: []string{idB}, Classes: []string{string(record.ClassValidation)}, IncludeValidation: true}}
	if code := e.request(t, access.DefaultPerson(access.RoleOperator), api.DrainStart, req, &rep); code != "" || rep.Plan == nil {
		t.Fatalf("drain.start dry run: %s", code)
	}
	if rep.Plan.Selected != 1 || rep.Plan.HeldByEarlier != 0 {
		t.Errorf("plan: %d selected, %d held by earlier (%+v), want 1 and 0", rep.Plan.Selected, rep.Plan.HeldByEarlier, rep.Plan.HeldBy)
	}
	for _, bl := range rep.Plan.HeldBy {
		if bl.DLQID == idA {
			t.Errorf("B's drain is held by A's record %s", idA)
		}
	}
	if st := e.waitChain(t, idA).State; st.Status != record.StatusOpen {
		t.Errorf("A's chain is %s, want open (untouched)", st.Status)
	}
}
