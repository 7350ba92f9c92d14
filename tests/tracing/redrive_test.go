package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/tests/internal/jaeger"
)

const redriverService = "deadletter-redriver"

// request calls a service endpoint as a client (endpoint.CallRaw: an error
// reply is an *api.Error) and decodes the reply.
func request(tb testing.TB, nc *nats.Conn, subject string, req, reply any) {
	tb.Helper()
	b, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := endpoint.CallRaw(ctx, nc, subject, b)
	if err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
	if err := json.Unmarshal(body, reply); err != nil {
		tb.Fatal(err)
	}
}

// TestRedriveIsNewLinkedTrace: an event exhausts while the downstream is
// down; after recovery a drain replays it. The replay is a NEW trace whose
// root redrive span links to the original trace and carries its id; the
// validator's processing of the replay (validate, commit) joins it; and
// audit.get finds both traces from the dlq id.
func TestRedriveIsNewLinkedTrace(t *testing.T) {
	natstest.Long(t, "Jaeger")
	j := jaeger.Start(t)
	pub := provider(t, j, publisherService)
	s, up := outageStack(t, j, 2)
	js, pubjs := connect(t, s, access.Admin), connect(t, s, string(access.RolePublisher))
	data := example(t, "pharmacy/valid/dispense-schedule-ii.json", "events.pharmacy.dispense", "")
	ev := publish(t, pubjs, pub, "events.pharmacy.dispense", data)
	rec := quarantined(t, js, ev.seq)
	if rec.Class != record.ClassExhausted || rec.TraceID != ev.traceID {
		t.Fatalf("record class %s trace %s, want exhausted in %s", rec.Class, rec.TraceID, ev.traceID)
	}

	up.Store(true)
	nc, err := s.ConnectAs(access.DefaultPerson(access.RoleOperator))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var started api.DrainStartReply
	request(t, nc, api.DrainStart, api.DrainStartRequest{Filter: api.DrainFilter{DLQIDs: []string{rec.DLQID}}, Actor: "test", Reason: "recovered"}, &started)
	var got api.GetReply
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		request(t, nc, api.AuditGet, api.GetRequest{DLQID: rec.DLQID}, &got)
		if got.State.Status != record.StatusResolved {
			return fmt.Errorf("chain %s", got.State.Status)
		}
		return nil
	})
	var redriveTrace string
	for _, r := range got.Records {
		var rr record.Record
		if err := json.Unmarshal(r.Record, &rr); err != nil {
			t.Fatal(err)
		}
		switch {
		case rr.Kind == record.KindQuarantined && r.TraceID != ev.traceID:
			t.Errorf("audit.get: first record trace %s, want the original %s", r.TraceID, ev.traceID)
		case rr.Kind == record.KindReplayed:
			redriveTrace = r.TraceID
		}
		if r.TraceID != "" && !strings.HasSuffix(r.TraceURL, "/trace/"+r.TraceID) {
			t.Errorf("audit.get: trace url %q for %s", r.TraceURL, r.TraceID)
		}
	}
	if redriveTrace == "" || redriveTrace == ev.traceID {
		t.Fatalf("the replayed record's trace %q must be a new trace, not the original %s", redriveTrace, ev.traceID)
	}
	tr := waitTrace(t, j, redriveTrace, func(tr jaeger.Trace) error {
		if err := need(tr, redriverService, "redrive ", 1); err != nil {
			return err
		}
		if err := need(tr, validatorService, "validate ", 1); err != nil {
			return err
		}
		return need(tr, validatorService, "commit ", 1)
	})
	root := one(t, tr, redriverService, "redrive ")
	if root.Parent() != "" {
		t.Errorf("the redrive span has a parent %s: it must start the new trace", root.Parent())
	}
	checkTags(t, root, map[string]string{"deadletter.dlq_id": rec.DLQID, "deadletter.original_trace_id": ev.traceID, "deadletter.redrive_count": "1"})
	linked := false
	for _, ref := range root.References {
		if ref.RefType == "FOLLOWS_FROM" && ref.TraceID == ev.traceID {
			linked = true
		}
	}
	if !linked {
		t.Errorf("the redrive span does not link the original trace: %+v", root.References)
	}
	v := one(t, tr, validatorService, "validate ")
	checkParent(t, v, root)
	c := one(t, tr, validatorService, "commit ")
	checkParent(t, c, v)
	if c.Tag("otel.status_code") == "ERROR" {
		t.Errorf("the replay's commit failed: %+v", c.Tags)
	}
}

// outageStack starts the stack with every service traced to j and a
// downstream that answers 503 until up is set, the validator giving up
// after maxDeliver deliveries with short back-off: an event published
// meanwhile exhausts and is quarantined, and a redrive after up commits.
func outageStack(tb testing.TB, j *jaeger.Jaeger, maxDeliver int) (*running, *atomic.Bool) {
	tb.Helper()
	up := &atomic.Bool{}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(down.Close)
	s := startStack(tb, func(c *stack.Config) {
		c.Validator.TracerProvider = provider(tb, j, validatorService)
		c.Quarantiner.TracerProvider = provider(tb, j, quarantinerService)
		c.Redriver.TracerProvider = provider(tb, j, redriverService)
		c.Validator.DownstreamURL = down.URL
		c.Validator.DownstreamTimeout, c.Validator.ClaimLease = 2*time.Second, 5*time.Second
		c.Validator.MaxDeliver = maxDeliver
		c.Validator.BackoffBase, c.Validator.BackoffMax = 20*time.Millisecond, 50*time.Millisecond
	})
	return s, up
}
