//go:build failpoint

// Package outcome shows, deterministically, the race of issue #37: an
// event that exhausts its deliveries while the validator handling its
// last delivery dies, and the server's max-deliveries advisory (a core
// message) is lost, as it is when ADVISORIES has no leader at that moment.
// Before the fix nothing ever gave such an event an outcome. Now the
// validator decides exhaustion itself, the consumer allows one spare
// delivery for a validator killed on the last one, and the auditor's
// reconciliation repairs what is still left without an outcome.
//
// Every service runs in this process as its own user on a secured
// embedded server; a failpoint "kill" closes the service's connection and
// ends the goroutine handling the event, as SIGKILL would.
package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/chains"
)

// maxDeliver is the validator's attempts per event in these tests.
const maxDeliver = 3

type env struct {
	srv  *natstest.Secured
	js   jetstream.JetStream
	gate *gate.Gate
	down *httptest.Server
	vcfg validator.Config
	qcfg quarantiner.Config
	// people by role
	operator, viewer *nats.Conn
}

func logger() *slog.Logger {
	if os.Getenv("TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// newEnv provisions a secured server whose downstream always fails (every
// event exhausts its deliveries), with the consumers the administrator
// provisions for these configurations.
func newEnv(t *testing.T) *env {
	t.Helper()
	srv := natstest.StartSecured(t, streams.DefaultOptions())
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, gate: g}
	if e.js, err = jetstream.New(srv.ConnectAs(t, access.Admin)); err != nil {
		t.Fatal(err)
	}
	e.down = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "system of record down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(e.down.Close)
	e.vcfg = validator.DefaultConfig()
	e.vcfg.Provision, e.vcfg.CreateConsumer = false, false
	e.vcfg.MaxDeliver, e.vcfg.DownstreamURL = maxDeliver, e.down.URL
	e.vcfg.BackoffBase, e.vcfg.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	e.vcfg.AckWait, e.vcfg.ClaimLease, e.vcfg.DownstreamTimeout = time.Second, time.Second, 500*time.Millisecond
	e.vcfg.InstanceID = "validator-outcome-test"
	e.qcfg = quarantiner.DefaultConfig()
	e.qcfg.Provision, e.qcfg.CreateConsumer = false, false
	e.qcfg.AckWait, e.qcfg.RetryDelay, e.qcfg.TerminatedGrace = 2*time.Second, 100*time.Millisecond, 200*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := stack.ProvisionConsumers(ctx, e.js, e.vcfg, e.qcfg); err != nil {
		t.Fatal(err)
	}
	e.operator = srv.ConnectAs(t, access.DefaultPerson(access.RoleOperator))
	e.viewer = srv.ConnectAs(t, access.DefaultPerson(access.RoleViewer))
	return e
}

// startValidator runs a validator armed at fp (nil: none); its kill closes
// its connection and ends the goroutine handling the event. It returns a
// channel closed at the kill.
func (e *env) startValidator(t *testing.T, fp string) <-chan struct{} {
	t.Helper()
	cfg := e.vcfg
	nc := e.srv.ConnectAs(t, access.Validator)
	killed := make(chan struct{})
	if fp != "" {
		a, err := failpoint.Parse(fp)
		if err != nil {
			t.Fatal(err)
		}
		var once atomic.Bool
		cfg.Failpoint = a.WithKill(func() {
			if once.CompareAndSwap(false, true) {
				nc.Close()
				close(killed)
			}
			runtime.Goexit()
		})
	}
	v, err := validator.New(nc, cfg, logger())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "validator", v.Run)
	return killed
}

// startQuarantiner runs a quarantiner, armed at fp when set.
func (e *env) startQuarantiner(t *testing.T, fp string) {
	t.Helper()
	cfg := e.qcfg
	if fp != "" {
		a, err := failpoint.Parse(fp)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Failpoint = a
	}
	q, err := quarantiner.New(e.srv.ConnectAs(t, access.Quarantiner), cfg, logger())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "quarantiner", q.Run)
	natstest.WaitServing(t, e.viewer, "quarantiner")
}

// startAuditor runs the auditor, its periodic reconciliation repairing
// every interval (0: none) with a short grace period.
func (e *env) startAuditor(t *testing.T, interval time.Duration) {
	t.Helper()
	cfg := auditor.DefaultConfig()
	cfg.Grace, cfg.CheckpointInterval, cfg.ReconcileInterval, cfg.ReconcileWindow = 200*time.Millisecond, 0, interval, time.Hour
	a, err := auditor.New(e.srv.ConnectAs(t, access.Auditor), cfg, logger())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "auditor", a.Run)
	natstest.WaitServing(t, e.viewer, "auditor")
}

// publish publishes a valid dispense of a controlled substance, with the
// trade's characters in its free text, and returns its idempotency key.
func (e *env) publish(t *testing.T, tx string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"transaction_id": tx, "registrant_dea": "BW4829137", "ndc": "00406-0512-01",
		"lot": "A1&B<2>\"ü\"", "expiry": "2027-09-30", "quantity_delta": "-30", "unit": "EA",
		"event_type": "dispense", "dea_schedule": "II", "occurred_at": "2026-12-07T15:42:10Z", "actor_id": "RPH-0412 陈伟 & Müller",
	})
	if err != nil {
		t.Fatal(err)
	}
	const subject = "events.pharmacy.dispense"
	env, err := e.gate.Check(subject, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.Publish(context.Background(), subject, b); err != nil {
		t.Fatal(err)
	}
	return env.IdempotencyKey
}

// waitKilled waits for a failpoint's kill.
func waitKilled(t *testing.T, killed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the failpoint was not reached (%s)", what)
	}
}

// settled polls until the validator's consumer has nothing left to
// deliver or waiting for an acknowledgement.
func (e *env) settled(t *testing.T) {
	t.Helper()
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		c, err := e.js.Consumer(context.Background(), subjects.EventsStream, subjects.ValidatorConsumer)
		if err != nil {
			return err
		}
		info, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return fmt.Errorf("consumer pending %d, ack pending %d", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// exhaustedOnce polls until key's chain holds exactly one record, an
// exhausted one, and returns it.
func (e *env) exhaustedOnce(t *testing.T, key string, within time.Duration) record.Record {
	t.Helper()
	var recs []record.Record
	natstest.CheckFor(t, within, 50*time.Millisecond, func() error {
		var err error
		recs, _, err = chains.Read(t, e.js, key)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return errors.New("no quarantine record")
		}
		return nil
	})
	if len(recs) != 1 || recs[0].Class != record.ClassExhausted {
		t.Fatalf("chain %s: %d records (first class %s), want one exhausted record", key, len(recs), recs[0].Class)
	}
	return recs[0]
}

// TestKilledOnLastDeliveryAdvisoryLost: the validator dies while it
// reports an event exhausted on its last delivery, and the max-deliveries
// advisory never reaches the quarantiner. The consumer's spare delivery
// gives the event to another validator, which reports it exhausted (never
// tries it again): one sealed record, with the attempts of every delivery.
// Before the fix the server stopped delivering it there and the event
// stayed in EVENTS with no outcome.
func TestKilledOnLastDeliveryAdvisoryLost(t *testing.T) {
	e := newEnv(t)
	e.startQuarantiner(t, string(failpoint.QuarantinerDropMaxDeliveries))
	key := e.publish(t, "TX-37-LAST")
	killed := e.startValidator(t, string(failpoint.ValidatorLastDelivery)+":"+key)
	waitKilled(t, killed, "last delivery")
	e.startValidator(t, "")
	r := e.exhaustedOnce(t, key, 30*time.Second)
	if r.ErrorCode != codes.DownstreamUnavailable || r.DeliveryCount != maxDeliver+validator.SpareDeliveries {
		t.Errorf("record: code %s after %d deliveries, want %s after %d", r.ErrorCode, r.DeliveryCount, codes.DownstreamUnavailable,
			maxDeliver+validator.SpareDeliveries)
	}
	if len(r.Attempts) != maxDeliver {
		t.Errorf("record holds %d attempts, want the %d tries of the event", len(r.Attempts), maxDeliver)
	}
	e.settled(t)
}

// TestKilledOnSpareDeliveryRepaired: the validator dies on the last
// delivery and again on the spare one, and the advisory is lost (a third
// validator runs, with nothing left to deliver): the
// auditor's periodic reconciliation finds the event unaccounted once the
// consumer settled it, records the repair in AUDIT and has the quarantiner
// seal it, exactly once; an operator's repair afterwards finds nothing
// left, and a viewer may not repair.
func TestKilledOnSpareDeliveryRepaired(t *testing.T) {
	e := newEnv(t)
	e.startQuarantiner(t, string(failpoint.QuarantinerDropMaxDeliveries))
	key := e.publish(t, "TX-37-SPARE")
	fp := string(failpoint.ValidatorLastDelivery) + ":" + key
	waitKilled(t, e.startValidator(t, fp), "last delivery")
	waitKilled(t, e.startValidator(t, fp), "spare delivery")
	// A validator pulling again is what makes the server find the
	// deliveries run out (and send the advisory, lost here).
	e.startValidator(t, "")
	e.settled(t)
	e.startAuditor(t, 250*time.Millisecond)
	r := e.exhaustedOnce(t, key, 30*time.Second)
	if r.SourceStream != subjects.EventsStream || r.SourceSeq != 1 || r.Payload == nil {
		t.Errorf("record source %s/%d (payload kept: %v), want EVENTS/1 verbatim", r.SourceStream, r.SourceSeq, r.Payload != nil)
	}
	// Recorded in AUDIT as the auditor's.
	audit, err := e.js.Stream(context.Background(), subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := audit.GetLastMsgForSubject(context.Background(), subjects.AuditAction("reconcile", ">"))
	if err != nil {
		t.Fatalf("no repair in AUDIT: %v", err)
	}
	var act api.AuditAction
	if err := json.Unmarshal(m.Data, &act); err != nil || act.Action != "repair_requested" || act.ObjectID != "1" || act.Actor != "auditor" {
		t.Errorf("AUDIT action %+v (%v), want repair_requested of event 1 by auditor", act, err)
	}
	// Accounted for now; an operator's repair finds nothing to do.
	var rep api.ReconcileReply
	natstest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var err error
		rep, err = endpoint.Call[api.ReconcileRequest, api.ReconcileReply](context.Background(), e.operator, api.AuditReconcile,
			api.ReconcileRequest{Grace: "0s", Repair: true})
		if err != nil {
			return err
		}
		if rep.Counts[api.ReconcileOpen] != 1 || rep.Counts[api.ReconcileUnaccounted] != 0 || len(rep.Repaired) != 0 {
			return fmt.Errorf("reconcile %+v, want 1 open, nothing unaccounted or repaired", rep.Counts)
		}
		return nil
	})
	if recs, _, _ := chains.Read(t, e.js, key); len(recs) != 1 {
		t.Errorf("chain %s has %d records after a second repair, want 1", key, len(recs))
	}
	_, err = endpoint.Call[api.ReconcileRequest, api.ReconcileReply](context.Background(), e.viewer, api.AuditReconcile,
		api.ReconcileRequest{Repair: true})
	if ae := (*api.Error)(nil); !errors.As(err, &ae) || ae.Code != api.ErrForbidden {
		t.Errorf("a viewer's repair: %v, want %s", err, api.ErrForbidden)
	}
}

// TestRepairWaitsForTheValidator: an event still being retried (its
// deliveries not settled) is never repaired, however old: a repair then
// could sit beside a later commit.
func TestRepairWaitsForTheValidator(t *testing.T) {
	e := newEnv(t)
	e.startQuarantiner(t, "")
	e.startAuditor(t, 0)
	key := e.publish(t, "TX-37-WAIT")
	// No validator runs: the event is received, never delivered.
	var rep api.ReconcileReply
	natstest.CheckFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var err error
		rep, err = endpoint.Call[api.ReconcileRequest, api.ReconcileReply](context.Background(), e.operator, api.AuditReconcile,
			api.ReconcileRequest{Grace: "0s", Repair: true})
		if err != nil {
			return err
		}
		if rep.Counts[api.ReconcileUnaccounted] != 1 {
			return fmt.Errorf("reconcile %+v, want the event unaccounted", rep.Counts)
		}
		return nil
	})
	if len(rep.Repaired) != 0 || rep.RepairDeferred != 1 {
		t.Errorf("repaired %d, deferred %d; want 0 and 1", len(rep.Repaired), rep.RepairDeferred)
	}
	if recs, _, _ := chains.Read(t, e.js, key); len(recs) != 0 {
		t.Errorf("an event the validator may still deliver was quarantined (%d records)", len(recs))
	}
	// The quarantiner refuses it too, asked directly (as a compromised
	// auditor would).
	_, err := endpoint.Call[api.RepairRequest, api.RepairReply](context.Background(), e.srv.ConnectAs(t, access.Auditor), api.QuarantinerRepair,
		api.RepairRequest{Stream: subjects.EventsStream, Seq: 1, By: "auditor"})
	if ae := (*api.Error)(nil); !errors.As(err, &ae) || ae.Code != api.ErrConflict {
		t.Errorf("a repair of an unsettled event: %v, want %s", err, api.ErrConflict)
	}
}

// TestRepairRefusesACommittedEvent: the auditor's credential asking the
// quarantiner to repair an event LEDGER holds committed from that very
// message is refused: a record beside a commit would say it failed.
func TestRepairRefusesACommittedEvent(t *testing.T) {
	e := newEnv(t)
	e.vcfg.DownstreamURL = "" // the commit is the LEDGER write alone
	e.startQuarantiner(t, "")
	e.startValidator(t, "")
	key := e.publish(t, "TX-37-COMMITTED")
	e.settled(t)
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		ledger, err := e.js.Stream(context.Background(), subjects.LedgerStream)
		if err != nil {
			return err
		}
		_, err = ledger.GetLastMsgForSubject(context.Background(), subjects.Ledger("pharmacy", key))
		return err
	})
	_, err := endpoint.Call[api.RepairRequest, api.RepairReply](context.Background(), e.srv.ConnectAs(t, access.Auditor), api.QuarantinerRepair,
		api.RepairRequest{Stream: subjects.EventsStream, Seq: 1, By: "auditor"})
	if ae := (*api.Error)(nil); !errors.As(err, &ae) || ae.Code != api.ErrConflict {
		t.Errorf("a repair of a committed event: %v, want %s", err, api.ErrConflict)
	}
	if recs, _, _ := chains.Read(t, e.js, key); len(recs) != 0 {
		t.Errorf("a committed event got %d quarantine records", len(recs))
	}
}
