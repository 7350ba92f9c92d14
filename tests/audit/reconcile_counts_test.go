package audit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// shipEvent is a commissioning ObjectEvent of one serial, with eventID id
// and a lot (the content two copies of one eventID may differ in).
func shipEvent(id, serial, lot string) string {
	return `{"type":"ObjectEvent","eventID":"` + id + `","eventTime":"2026-12-01T14:02:11.350Z","eventTimeZoneOffset":"-05:00",` +
		`"epcList":["urn:epc:id:sgtin:0614141.012345.` + serial + `"],"action":"ADD","bizStep":"commissioning","disposition":"active",` +
		`"readPoint":{"id":"urn:epc:id:sgln:0614141.00777.0"},"bizLocation":{"id":"urn:epc:id:sgln:0614141.00777.0"},` +
		`"ilmd":{"cbvmda:lotNumber":"` + lot + `","cbvmda:itemExpirationDate":"2027-01-31"}}`
}

// TestReconcileCountsEachEventOnce: in one document (whose events share
// one EVENTS message) an eventID repeated with other content is a
// conflict and one repeated with the same content a duplicate, never
// "committed" because another event of the document committed the key.
// Every event is counted once under its real outcome, and the counts add
// up to LEDGER and QUARANTINE.
func TestReconcileCountsEachEventOnce(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	startReconcilers(t, srv)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitServing(t, nc, access.Validator, access.Quarantiner, access.Auditor)

	events := []string{
		shipEvent("urn:uuid:37000000-0000-4000-8000-000000000001", "100000001", "A1&B<2>"),
		shipEvent("urn:uuid:37000000-0000-4000-8000-000000000002", "100000002", "Müller-7"),
		shipEvent("urn:uuid:37000000-0000-4000-8000-000000000003", "100000003", "L3"),
		// eventID 1 again, another lot: IDEMPOTENCY_CONFLICT.
		shipEvent("urn:uuid:37000000-0000-4000-8000-000000000001", "100000001", "A1&B<9>"),
		// eventID 2 again, the same content: a duplicate.
		shipEvent("urn:uuid:37000000-0000-4000-8000-000000000002", "100000002", "Müller-7"),
		// an event time that is no time: quarantined on its own.
		strings.Replace(shipEvent("urn:uuid:37000000-0000-4000-8000-000000000006", "100000006", "L6"), "2026-12-01T14:02:11.350Z", "yesterday <3pm> & later", 1),
	}
	doc := `{"@context":["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"],"type":"EPCISDocument","schemaVersion":"2.0",` +
		`"creationDate":"2026-12-01T15:00:00Z","epcisBody":{"eventList":[` + strings.Join(events, ",\n") + `]}}`
	if _, err := js.Publish(context.Background(), subjects.Event(dscsa.Name, subjects.DocumentType), []byte(doc)); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{api.ReconcileCommitted: 3, api.ReconcileConflict: 1, api.ReconcileDuplicate: 1, api.ReconcileOpen: 1}
	var rep api.ReconcileReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		rep = api.ReconcileReply{}
		request(t, nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s", IDs: true}, &rep)
		if fmt.Sprint(rep.Counts) != fmt.Sprint(want) {
			return fmt.Errorf("counts %v, want %v", rep.Counts, want)
		}
		return nil
	})
	// The counts add up to what the stores hold.
	ledger, err := js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	li, err := ledger.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := int(li.State.Msgs); got != rep.Counts[api.ReconcileCommitted] || rep.Ledger.Sourced != got {
		t.Errorf("LEDGER holds %d entries (%d sourced); reconcile counts %d committed", got, rep.Ledger.Sourced, rep.Counts[api.ReconcileCommitted])
	}
	quarantine, err := js.Stream(context.Background(), subjects.QuarantineStream)
	if err != nil {
		t.Fatal(err)
	}
	qi, err := quarantine.Info(context.Background(), jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	if got, counted := len(qi.State.Subjects), rep.Counts[api.ReconcileOpen]+rep.Counts[api.ReconcileConflict]; got != counted {
		t.Errorf("QUARANTINE holds %d chains; reconcile counts %d open and conflicts", got, counted)
	}
	for _, c := range []string{api.ReconcileConflict, api.ReconcileDuplicate} {
		if ids := rep.IDs[c]; len(ids) != 1 || ids[0].DocumentIndex == nil || *ids[0].DocumentIndex != map[string]int{api.ReconcileConflict: 3, api.ReconcileDuplicate: 4}[c] {
			t.Errorf("%s: %+v", c, ids)
		}
	}
}
