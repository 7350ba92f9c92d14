package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/tests/internal/jaeger"
)

// TestUntracedEventIsOneStory publishes an event WITHOUT a traceparent (as
// `nats pub` and most producers do) while the downstream answers 503, so it
// exhausts; then an operator redrives it with a correction. In Jaeger every
// delivery's validate span, the quarantine span and its record write share
// one trace, the one the first record and audit.get's trace_url name; the
// corrected, redrive_requested and replayed records name traces whose root
// links that trace and carries its id (issue #15, bug 4).
func TestUntracedEventIsOneStory(t *testing.T) {
	natstest.Long(t, "Jaeger")
	const maxDeliver = 3
	j := jaeger.Start(t)
	s, up := outageStack(t, j, maxDeliver)
	js, pubjs := connect(t, s, access.Admin), connect(t, s, string(access.RolePublisher))
	data := example(t, "pharmacy/valid/dispense-schedule-ii.json", "events.pharmacy.dispense", "",
		"INV-2025-0181", markerRetry, "RPH-0412", markerRetry2)
	ack, err := pubjs.Publish(context.Background(), "events.pharmacy.dispense", data) // no headers at all
	if err != nil {
		t.Fatal(err)
	}
	rec := quarantined(t, js, ack.Sequence)
	if rec.Class != record.ClassExhausted || rec.TraceID == "" {
		t.Fatalf("record class %s trace %q, want exhausted with a trace", rec.Class, rec.TraceID)
	}

	// The validator reports the exhausted event to FAILURES on its last
	// delivery; the quarantine span is that report's consumer.
	const advisory = "quarantine dlq.intake.pharmacy"
	t.Run("deliveries and quarantine share the record's trace", func(t *testing.T) {
		tr := waitTrace(t, j, rec.TraceID, func(tr jaeger.Trace) error {
			if err := need(tr, validatorService, "validate events.pharmacy.dispense", maxDeliver); err != nil {
				return err
			}
			if err := need(tr, quarantinerService, advisory, 1); err != nil {
				return err
			}
			return need(tr, quarantinerService, "send quarantine.", 1)
		})
		deliveries := map[string]bool{}
		for _, v := range tr.Find(validatorService, "validate events.pharmacy.dispense") {
			deliveries[v.Tag("messaging.nats.jetstream.delivery_count")] = true
			checkTags(t, v, map[string]string{"messaging.nats.jetstream.sequence": strconv.FormatUint(ack.Sequence, 10)})
		}
		for i := 1; i <= maxDeliver; i++ {
			if !deliveries[strconv.Itoa(i)] {
				t.Errorf("delivery %d is not in the record's trace (have %v)\n%s", i, deliveries, describe(tr))
			}
		}
		q := one(t, tr, quarantinerService, advisory)
		checkTags(t, q, map[string]string{"deadletter.dlq_id": rec.DLQID, "deadletter.outcome": string(record.KindQuarantined)})
		if rec.SpanID != q.SpanID {
			t.Errorf("record span %s, want the quarantine span %s", rec.SpanID, q.SpanID)
		}
		checkParent(t, one(t, tr, quarantinerService, "send quarantine."), q)
	})

	up.Store(true)
	nc, err := s.ConnectAs(access.DefaultPerson(access.RoleOperator))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// A correction of a Schedule II dispense waits for a second person
	// under the default policy (issue #40): this store's policy role
	// keeps the identity rule, so that it is corrected at once.
	pnc, err := s.ConnectAs(access.DefaultPerson(access.RolePolicy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pnc.Close)
	identity := approval.DefaultPolicy()
	identity.Corrections = approval.CorrectionsIdentity
	var pol api.PolicyReply
	request(t, pnc, api.PolicySet, api.PolicySetRequest{Policy: identity, Reason: "the tracing test corrects at once"}, &pol)
	var rep api.RedriveReply
	request(t, nc, api.Redrive, api.RedriveRequest{DLQID: rec.DLQID, Payload: data, Reason: "downstream recovered"}, &rep)
	var got api.GetReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		request(t, nc, api.AuditGet, api.GetRequest{DLQID: rec.DLQID}, &got)
		if got.State.Status != record.StatusResolved {
			return fmt.Errorf("chain %s", got.State.Status)
		}
		return nil
	})
	if !strings.HasSuffix(got.TraceURL, "/trace/"+rec.TraceID) {
		t.Errorf("audit.get trace_url %q does not name the event's trace %s", got.TraceURL, rec.TraceID)
	}

	traces := map[record.Kind]string{}
	for _, r := range got.Records {
		var rr record.Record
		if err := json.Unmarshal(r.Record, &rr); err != nil {
			t.Fatal(err)
		}
		traces[rr.Kind] = r.TraceID
		if r.TraceID == "" || !strings.HasSuffix(r.TraceURL, "/trace/"+r.TraceID) {
			t.Errorf("audit.get: %s record trace %q url %q", rr.Kind, r.TraceID, r.TraceURL)
		}
	}
	if traces[record.KindQuarantined] != rec.TraceID {
		t.Errorf("audit.get: quarantined record trace %s, want %s", traces[record.KindQuarantined], rec.TraceID)
	}
	for _, kind := range []record.Kind{record.KindCorrected, record.KindRedriveRequested, record.KindReplayed} {
		t.Run(string(kind)+" record's trace is joined to the event's", func(t *testing.T) {
			id := traces[kind]
			if id == "" {
				t.Fatalf("no %s record (have %v)", kind, traces)
			}
			if id == rec.TraceID {
				return // the same trace
			}
			tr := waitTrace(t, j, id, func(tr jaeger.Trace) error {
				if len(tr.Spans) == 0 {
					return fmt.Errorf("no span")
				}
				if kind == record.KindReplayed {
					return need(tr, validatorService, "commit ", 1)
				}
				return nil
			})
			linked := false
			for _, sp := range tr.Spans {
				if sp.Parent() != "" {
					continue
				}
				if sp.Tag("deadletter.original_trace_id") != rec.TraceID {
					t.Errorf("root %q of %s's trace: original_trace_id %q, want %s", sp.OperationName, kind, sp.Tag("deadletter.original_trace_id"), rec.TraceID)
				}
				for _, ref := range sp.References {
					if ref.RefType == "FOLLOWS_FROM" && ref.TraceID == rec.TraceID {
						linked = true
					}
				}
			}
			if !linked {
				t.Errorf("the %s record's trace %s links nothing to the event's trace %s\n%s", kind, id, rec.TraceID, describe(tr))
			}
		})
	}
	checkNoMarkers(t, j, s.logs.String(), markerRetry, markerRetry2)
}
