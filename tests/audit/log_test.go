package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestOneAuditLogLine (issue 15, bug 11): with the quarantiner and the
// auditor logging to one sink, each stored record has exactly one
// audit-log line, in one vocabulary (redrive_count, never redrives).
func TestOneAuditLogLine(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	logs := &natstest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	qcfg := quarantiner.DefaultConfig()
	qcfg.Workers = 2
	q, err := quarantiner.New(srv.Connect(t), qcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "quarantiner", q.Run)
	acfg := auditor.DefaultConfig()
	acfg.CheckpointInterval, acfg.ReconcileInterval = 0, 0
	acfg.AllowAnonymous = true
	a, err := auditor.New(srv.Connect(t), acfg, log)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Run(t, "auditor", a.Run)

	nc := srv.Connect(t)
	natstest.WaitServing(t, nc, access.Quarantiner, access.Auditor)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	f := record.Failure{Class: record.ClassValidation, Code: codes.MalformedJSON, Detail: "not JSON", Domain: "pharmacy",
		Subject: "events.pharmacy.dispense", Stream: subjects.EventsStream, Seq: 7, Deliveries: 1, Published: now,
		Payload: []byte("{"), FailedAt: now,
		Attempts: []record.Attempt{{At: now, Stage: record.StageValidate, Code: codes.MalformedJSON, Reason: "not JSON", Delivery: 1}}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), subjects.Failure("pharmacy"), b); err != nil {
		t.Fatal(err)
	}
	id := record.DLQIDFor(f)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := endpoint.CallRaw(ctx, nc, api.QuarantinerAppend, mustJSON(t, api.AppendRequest{DLQID: id, Domain: "pharmacy",
			Kind: record.KindResolved, Actor: "ops", Reason: "test"})); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		return nil
	})
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var rep api.GetReply
		request(t, nc, api.AuditGet, api.GetRequest{DLQID: id}, &rep)
		if len(rep.Records) != 2 || rep.State.Status != record.StatusResolved {
			return fmt.Errorf("%d records, %s", len(rep.Records), rep.State.Status)
		}
		return nil
	})
	// The auditor has applied both records: any line of its own is written.
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		out := logs.String()
		for _, ev := range []string{record.KindQuarantined.Event(), record.KindResolved.Event()} {
			if n := strings.Count(out, `"msg":"`+ev+`"`); n != 1 {
				return fmt.Errorf("%d %s lines, want 1:\n%s", n, ev, out)
			}
		}
		return nil
	})
	out := logs.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"msg":"DLQ_`) && (!strings.Contains(line, `"redrive_count":`) || strings.Contains(line, `"redrives"`)) {
			t.Errorf("audit line outside the vocabulary: %s", line)
		}
	}
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
