package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
)

// event returns a valid pharmacy dispense event with its own transaction
// id (so its own idempotency key).
func event(tx string) []byte {
	return []byte(fmt.Sprintf(`{"transaction_id":%q,"registrant_dea":"BW4829137","ndc":"00406-0512-01","lot":"L24A0917",`+
		`"expiry":"2026-09-30","quantity_delta":"-30","unit":"EA","event_type":"dispense","dea_schedule":"II",`+
		`"occurred_at":"2025-03-14T15:42:10Z","actor_id":"RPH-0412"}`, tx))
}

// downstream is a system of record that answers 503 to the transactions
// marked failing.
type downstream struct {
	mu      sync.Mutex
	failing map[string]bool
}

func (d *downstream) set(tx string, failing bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failing[tx] = failing
}

func (d *downstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		TX string `json:"transaction_id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	d.mu.Lock()
	fail := d.failing[body.TX]
	d.mu.Unlock()
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// request calls a service endpoint (endpoint.CallRaw: an error reply is an
// *api.Error) and decodes the reply into out.
func request(tb testing.TB, nc *nats.Conn, subject string, req, out any) {
	tb.Helper()
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := endpoint.CallRaw(ctx, nc, subject, b)
	if err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		tb.Fatalf("%s reply: %v", subject, err)
	}
}

// TestReconcileMixedRun runs the real services over valid, structural,
// exhausted, redriven, poisoned and duplicate events; reconciliation must
// account for every one. Then an event published while the validator is
// stopped is listed as unaccounted once past the grace period.
func TestReconcileMixedRun(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	ds := &downstream{failing: map[string]bool{"TX-RETRY": true, "TX-POISON": true, "TX-OPEN": true}}
	hs := httptest.NewServer(ds)
	t.Cleanup(hs.Close)
	log := slog.New(slog.DiscardHandler)

	vcfg := validator.DefaultConfig()
	vcfg.MaxDeliver, vcfg.BackoffBase, vcfg.BackoffMax = 2, 10*time.Millisecond, 20*time.Millisecond
	vcfg.AckWait, vcfg.DownstreamURL, vcfg.DownstreamTimeout, vcfg.Workers = 2*time.Second, hs.URL, time.Second, 16
	v, err := validator.New(srv.Connect(t), vcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	stopValidator := natstest.Run(t, "validator", v.Run)
	qcfg := quarantiner.DefaultConfig()
	qcfg.RedriveCap, qcfg.TerminatedGrace, qcfg.RetryDelay, qcfg.Workers = 1, 100*time.Millisecond, 100*time.Millisecond, 4
	q, err := quarantiner.New(srv.Connect(t), qcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "quarantiner", q.Run)
	rcfg := redriver.DefaultConfig()
	rcfg.AllowAnonymous = true // a server without accounts: no caller to attach
	r, err := redriver.New(srv.Connect(t), rcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "redriver", r.Run)
	acfg := auditor.DefaultConfig()
	acfg.Grace, acfg.CheckpointInterval, acfg.ReconcileInterval = 300*time.Millisecond, 0, 0
	acfg.AllowAnonymous = true // a server without accounts: no caller to attach
	a, err := auditor.New(srv.Connect(t), acfg, log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "auditor", a.Run)

	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitServing(t, nc, access.Validator, access.Quarantiner, access.Redriver, access.Auditor)
	pub := func(subject string, data []byte) {
		t.Helper()
		if _, err := js.Publish(context.Background(), subject, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, tx := range []string{"TX-1", "TX-2", "TX-3", "TX-RETRY", "TX-POISON", "TX-OPEN"} {
		pub("events.pharmacy.dispense", event(tx))
	}
	pub("events.pharmacy.dispense", event("TX-1"))                                                                    // duplicate of a committed key
	pub("events.pharmacy.dispense", bytes.Replace(event("TX-BAD"), []byte("00406-0512-01"), []byte("0406-512-1"), 1)) // INVALID_NDC
	pub("events.pharmacy.dispense", []byte(`{"transaction_id": "TX-4",`))                                             // MALFORMED_JSON
	pub("events.nowhere.thing", []byte(`{}`))                                                                         // UNKNOWN_SUBJECT

	// Wait for the three exhausted events, then redrive two of them: one
	// now succeeds, one fails again and becomes poison (cap 1).
	list := func(status string) api.ListReply {
		var l api.ListReply
		request(t, nc, api.AuditList, api.ListRequest{Class: string(record.ClassExhausted), Status: status}, &l)
		return l
	}
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if n := list(string(record.StatusOpen)).Total; n != 3 {
			return fmt.Errorf("%d exhausted events open, want 3", n)
		}
		return nil
	})
	// TX-2 is committed by now: the same key with other content is no
	// duplicate but a conflict, quarantined IDEMPOTENCY_CONFLICT.
	pub("events.pharmacy.dispense", bytes.Replace(event("TX-2"), []byte(`"-30"`), []byte(`"-300"`), 1))
	keyOf := func(tx string) string {
		for _, it := range list("").Items {
			var g api.GetReply
			request(t, nc, api.AuditGet, api.GetRequest{DLQID: it.DLQID, IncludePayload: true, Reason: "test"}, &g)
			if strings.Contains(g.State.Payload.Data, tx) {
				return it.DLQID
			}
		}
		t.Fatalf("no exhausted event %s", tx)
		return ""
	}
	ds.set("TX-RETRY", false)
	for _, tx := range []string{"TX-RETRY", "TX-POISON"} {
		var rep api.RedriveReply
		request(t, nc, api.Redrive, api.RedriveRequest{DLQID: keyOf(tx)}, &rep)
	}

	want := map[string]int{
		api.ReconcileCommitted: 3, api.ReconcileDuplicate: 1, api.ReconcileOpen: 4,
		api.ReconcilePoison: 1, api.ReconcileResolved: 1, api.ReconcileReplay: 2, api.ReconcileConflict: 1,
	}
	wantOpen := map[string]int{string(record.ClassValidation): 3, string(record.ClassExhausted): 1}
	var rep api.ReconcileReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		rep = api.ReconcileReply{} // decoding into the last reply would merge its maps
		request(t, nc, api.AuditReconcile, api.ReconcileRequest{Grace: "0s", IDs: true}, &rep)
		if fmt.Sprint(rep.Counts) != fmt.Sprint(want) || fmt.Sprint(rep.OpenByClass) != fmt.Sprint(wantOpen) {
			return fmt.Errorf("counts %v open %v, want %v open %v", rep.Counts, rep.OpenByClass, want, wantOpen)
		}
		return nil
	})
	if rep.Events != 13 || len(rep.Unaccounted) != 0 {
		t.Fatalf("reconcile: %d events, unaccounted %v", rep.Events, rep.Unaccounted)
	}
	// Back from LEDGER: TX-1..3 committed first-hand and TX-RETRY by its
	// replay, each naming its EVENTS message.
	if l := rep.Ledger; l.Entries != 4 || l.Sourced != 4 || l.Unsourced != 0 {
		t.Fatalf("reconcile of LEDGER: %+v, want 4 entries, all sourced", l)
	}

	// The validator stops; an event published now is pending within the
	// grace period and unaccounted after it.
	stopValidator()
	pub("events.pharmacy.dispense", event("TX-LOST"))
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		rep = api.ReconcileReply{}
		request(t, nc, api.AuditReconcile, api.ReconcileRequest{Domain: "pharmacy"}, &rep)
		if len(rep.Unaccounted) != 1 || rep.Counts[api.ReconcileUnaccounted] != 1 {
			return fmt.Errorf("unaccounted %v counts %v", rep.Unaccounted, rep.Counts)
		}
		return nil
	})
	if u := rep.Unaccounted[0]; u.Subject != "events.pharmacy.dispense" || u.Key == "" || u.Seq != 14 {
		t.Fatalf("unaccounted event %+v, want the last one (seq 14) with its key", u)
	}
}
