package audit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestReconcileDocument: an EPCIS document is one EVENTS message holding
// many events. Reconcile accounts for each of them (committed from the
// document, or quarantined on its own), and walking LEDGER back, every
// entry committed from the document is sourced: its content and key are
// the document's event at its position. A document that does not parse
// is one quarantined message.
func TestReconcileDocument(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	startReconcilers(t, srv)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitServing(t, nc, access.Validator, access.Quarantiner, access.Auditor)

	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	doc, err := set.Document("SHIP-RECONCILE & <Müller>", 7_000, n, map[int]bool{4: true, 9: true})
	if err != nil {
		t.Fatal(err)
	}
	subject := subjects.Event(dscsa.Name, subjects.DocumentType)
	for _, data := range [][]byte{doc, doc[:len(doc)/2]} { // the document, then one cut in half
		if _, err := js.Publish(context.Background(), subject, data); err != nil {
			t.Fatal(err)
		}
	}
	// A document of 2,000 events (one bad) is too large for one message:
	// it is published in parts and a manifest.
	const big = 2_000
	large, err := set.Document("SHIP-PARTS", 20_000, big, map[int]bool{1_234: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := upload.Publish(context.Background(), js, subject, bytes.NewReader(large), nil)
	if err != nil || res.Parts < 2 {
		t.Fatalf("publish in parts: %+v, %v", res, err)
	}
	// Its bad event has the bytes of the first bad event of the first
	// document (an event's bytes end with its value): one chain, so a
	// duplicate, named by its position.
	want := map[string]int{api.ReconcileCommitted: n - 2 + big - 1, api.ReconcileOpen: 3, api.ReconcileDuplicate: 1,
		api.ReconcileDocumentPart: res.Parts}
	var rep api.ReconcileReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		rep = api.ReconcileReply{}
		request(t, nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s", IDs: true}, &rep)
		if fmt.Sprint(rep.Counts) != fmt.Sprint(want) {
			return fmt.Errorf("counts %v, want %v; unaccounted %+v", rep.Counts, want, rep.Unaccounted)
		}
		// A reconciliation walks LEDGER up to its start: the last
		// commits may be younger.
		if rep.Ledger.Entries != n-2+big-1 {
			return fmt.Errorf("LEDGER entries %d", rep.Ledger.Entries)
		}
		return nil
	})
	if want := n + 1 + big + res.Parts; rep.Events != want || len(rep.Unaccounted) != 0 {
		t.Fatalf("reconcile: %d events, unaccounted %v; want %d events", rep.Events, rep.Unaccounted, want)
	}
	if l, want := rep.Ledger, n-2+big-1; l.Entries != want || l.Sourced != want || l.Unsourced != 0 {
		t.Fatalf("reconcile of LEDGER: %+v, want %d entries, all sourced", l, want)
	}
	if d := rep.IDs[api.ReconcileDuplicate]; len(d) != 1 || d[0].Seq != res.Seq || d[0].DocumentIndex == nil || *d[0].DocumentIndex != 1_234 {
		t.Fatalf("duplicates %+v, want event 1234 of the document in parts (EVENTS %d)", d, res.Seq)
	}
	// A domain's reconciliation counts the same.
	var dom api.ReconcileReply
	request(t, nc, api.AuditReconcile, api.ReconcileRequest{Domain: dscsa.Name, Grace: "0s"}, &dom)
	if fmt.Sprint(dom.Counts) != fmt.Sprint(want) {
		t.Fatalf("reconcile of %s: %v, want %v", dscsa.Name, dom.Counts, want)
	}
}

// startReconcilers runs on srv what a reconciliation accounts with: a
// validator, a quarantiner and an auditor (no grace to speak of, no
// background work, callers unchecked on a server without accounts).
func startReconcilers(t *testing.T, srv *natstest.Server) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	v, err := validator.New(srv.Connect(t), validator.DefaultConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "validator", v.Run)
	q, err := quarantiner.New(srv.Connect(t), quarantiner.DefaultConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "quarantiner", q.Run)
	acfg := auditor.DefaultConfig()
	acfg.Grace, acfg.CheckpointInterval, acfg.ReconcileInterval = 300*time.Millisecond, 0, 0
	acfg.AllowAnonymous = true
	a, err := auditor.New(srv.Connect(t), acfg, log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "auditor", a.Run)
}
