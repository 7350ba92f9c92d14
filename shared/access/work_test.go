package access_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestServicesCanDoTheirWork proves the permission lists are sufficient:
// each service does its real JetStream work under its own credentials.
func TestServicesCanDoTheirWork(t *testing.T) {
	t.Parallel()
	e := startEnv(t, seeded)
	client := e.js(t, e.conn(t, "", nil))
	for i := range 3 {
		if _, err := client.Publish(testCtx(t, 5*time.Second), subjects.Event("pharmacy", "dispense"), fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
			t.Fatalf("client publish event: %v", err)
		}
	}

	cases := []struct {
		name string
		user string
		work func(t *testing.T, js jetstream.JetStream)
	}{
		{"validator consumes EVENTS with its durable (fetch, consume, ack)", access.Validator, func(t *testing.T, js jetstream.JetStream) {
			ctx := testCtx(t, 10*time.Second)
			cons, err := js.CreateOrUpdateConsumer(ctx, subjects.EventsStream, jetstream.ConsumerConfig{
				Durable: subjects.ValidatorConsumer, AckPolicy: jetstream.AckExplicitPolicy,
				MaxDeliver: 5, AckWait: 30 * time.Second, FilterSubject: subjects.EventsAll,
			})
			if err != nil {
				t.Fatalf("create durable: %v", err)
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range batch.Messages() {
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
			if batch.Error() != nil {
				t.Fatal(batch.Error())
			}
			got := make(chan jetstream.Msg, 8)
			cc, err := cons.Consume(func(m jetstream.Msg) { got <- m }, jetstream.PullHeartbeat(time.Second))
			if err != nil {
				t.Fatalf("consume: %v", err)
			}
			defer cc.Stop()
			for range 2 {
				select {
				case m := <-got:
					if err := m.DoubleAck(ctx); err != nil {
						t.Fatalf("ack: %v", err)
					}
				case <-ctx.Done():
					t.Fatal("no message consumed")
				}
			}
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.AckFloor.Stream != 3 {
				t.Fatalf("ack floor %d, want 3", info.AckFloor.Stream)
			}
		}},
		{"validator claims and marks keys in IDEMPOTENCY, records ATTEMPTS", access.Validator, func(t *testing.T, js jetstream.JetStream) {
			ctx := testCtx(t, 10*time.Second)
			kv, err := js.KeyValue(ctx, subjects.IdempotencyBucket)
			if err != nil {
				t.Fatal(err)
			}
			rev, err := kv.Create(ctx, "pharmacy_0123", []byte("claimed"))
			if err != nil {
				t.Fatalf("create-if-absent: %v", err)
			}
			if _, err := kv.Update(ctx, "pharmacy_0123", []byte("committed"), rev); err != nil {
				t.Fatalf("revision CAS: %v", err)
			}
			ent, err := kv.Get(ctx, "pharmacy_0123")
			if err != nil || string(ent.Value()) != "committed" {
				t.Fatalf("get: %v %v", ent, err)
			}
			att, err := js.KeyValue(ctx, subjects.AttemptsBucket)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := att.Put(ctx, "1", []byte(`[]`)); err != nil {
				t.Fatalf("attempts put: %v", err)
			}
		}},
		{"validator commits to LEDGER conditionally and sends a failure", access.Validator, func(t *testing.T, js jetstream.JetStream) {
			ctx := testCtx(t, 10*time.Second)
			if _, err := js.Publish(ctx, subjects.Ledger("x", "y"), []byte(`{}`),
				jetstream.WithExpectLastSequencePerSubject(0), jetstream.WithMsgID("x_y")); err != nil {
				t.Fatalf("ledger commit: %v", err)
			}
			if _, err := js.Publish(ctx, subjects.Failure("pharmacy"), []byte(`{}`)); err != nil {
				t.Fatalf("failure publish: %v", err)
			}
		}},
		{"quarantiner appends a chain with Nats-Expected-Last-Subject-Sequence", access.Quarantiner, func(t *testing.T, js jetstream.JetStream) {
			ctx := testCtx(t, 10*time.Second)
			subj := subjects.Quarantine("pharmacy", "x")
			first, err := js.Publish(ctx, subj, []byte(`{"n":1}`), jetstream.WithExpectLastSequencePerSubject(0))
			if err != nil {
				t.Fatalf("first record: %v", err)
			}
			if _, err := js.Publish(ctx, subj, []byte(`{"n":2}`), jetstream.WithExpectLastSequencePerSubject(first.Sequence)); err != nil {
				t.Fatalf("second record: %v", err)
			}
			var apiErr *jetstream.APIError
			if _, err := js.Publish(ctx, subj, []byte(`{"n":3}`), jetstream.WithExpectLastSequencePerSubject(first.Sequence)); !errors.As(err, &apiErr) {
				t.Fatalf("stale chain head: want a server error, got %v", err)
			}
		}},
		{"quarantiner consumes FAILURES and ADVISORIES, reads ATTEMPTS", access.Quarantiner, func(t *testing.T, js jetstream.JetStream) {
			ctx := testCtx(t, 10*time.Second)
			for _, stream := range []string{subjects.FailuresStream, subjects.AdvisoriesStream} {
				cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "quarantiner", AckPolicy: jetstream.AckExplicitPolicy})
				if err != nil {
					t.Fatalf("durable on %s: %v", stream, err)
				}
				if _, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond)); err != nil {
					t.Fatalf("fetch %s: %v", stream, err)
				}
			}
			att, err := js.KeyValue(ctx, subjects.AttemptsBucket)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := att.Get(ctx, "nope"); !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatalf("attempts get: %v", err)
			}
		}},
		{"redriver replays an event and keeps its drain state", access.Redriver, func(t *testing.T, js jetstream.JetStream) {
			ctx := testCtx(t, 10*time.Second)
			if _, err := js.Publish(ctx, subjects.Event("pharmacy", "dispense"), []byte(`{"replay":true}`)); err != nil {
				t.Fatalf("replay: %v", err)
			}
			kv, err := js.KeyValue(ctx, subjects.DrainsBucket)
			if err != nil {
				t.Fatalf("drain bucket: %v", err)
			}
			rev, err := kv.Create(ctx, "d1", []byte("running"))
			if err != nil {
				t.Fatalf("drain state: %v", err)
			}
			if _, err := kv.Update(ctx, "d1", []byte("done"), rev); err != nil {
				t.Fatalf("drain state CAS: %v", err)
			}
			ledger, err := js.KeyValue(ctx, subjects.IdempotencyBucket)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ledger.Get(ctx, "pharmacy_0123"); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatalf("read commit state: %v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.work(t, e.js(t, e.conn(t, tc.user, nil)))
		})
	}

	t.Run("every user direct-gets EVENTS and QUARANTINE", func(t *testing.T) {
		for _, user := range nonAdmins() {
			t.Run(user, func(t *testing.T) {
				js := e.js(t, e.conn(t, user, nil))
				ctx := testCtx(t, 10*time.Second)
				for _, stream := range []string{subjects.EventsStream, subjects.QuarantineStream} {
					s, err := js.Stream(ctx, stream)
					if err != nil {
						t.Fatalf("%s info: %v", stream, err)
					}
					if !s.CachedInfo().Config.AllowDirect {
						t.Fatalf("%s: no direct get", stream)
					}
					m, err := s.GetMsg(ctx, 1) // AllowDirect: $JS.API.DIRECT.GET.<stream>
					if err != nil || m.Sequence != 1 {
						t.Fatalf("%s direct get: %v", stream, err)
					}
				}
			})
		}
	})
}

// TestAuditorWritesOnlyCheckpoints: the auditor appends to AUDIT (once the
// admin provisioned it) and nothing else; nobody else writes checkpoints.
func TestAuditorWritesOnlyCheckpoints(t *testing.T) {
	t.Parallel()
	e := startEnv(t, 0)
	ctx := testCtx(t, 10*time.Second)
	auditor := e.js(t, e.conn(t, access.Auditor, nil))
	if _, err := auditor.Publish(ctx, subjects.AuditCheckpoints, []byte(`{}`)); err != nil {
		t.Fatalf("auditor checkpoint: %v", err)
	}
	for _, tc := range []struct{ user, subject string }{
		{access.Auditor, subjects.Event("pharmacy", "dispense")},
		{access.Auditor, subjects.Ledger("x", "y")},
		{access.Client, subjects.AuditCheckpoints},
		{access.Validator, subjects.AuditCheckpoints},
		{access.Redriver, subjects.AuditCheckpoints},
	} {
		t.Run(tc.user+" to "+tc.subject, func(t *testing.T) {
			v := newViolations()
			js := e.js(t, e.conn(t, tc.user, v))
			if _, err := js.Publish(v.ctx(t), tc.subject, []byte(`{}`)); err == nil {
				t.Fatal("publish acknowledged")
			}
			v.saw(t, tc.subject)
		})
	}
	if n := e.info(t, subjects.AuditStream).State.Msgs; n != 1 {
		t.Fatalf("AUDIT has %d checkpoints, want 1", n)
	}
}

// TestMicroDiscoveryAndEndpoints: each service can run a micro service on
// its endpoint subjects and answer $SRV discovery; the client (no
// credentials) can discover them and call their endpoints, with nats.go
// and with the CLI.
func TestMicroDiscoveryAndEndpoints(t *testing.T) {
	t.Parallel()
	e := startEnv(t, 0)
	services := []struct {
		user      string
		endpoints []string
	}{
		{access.Validator, []string{"validator.check.pharmacy.dispense"}},
		{access.Quarantiner, []string{api.QuarantinerAppend}},
		{access.Redriver, []string{api.DrainStart, api.DrainStatus, api.DrainCancel, api.DrainList, api.Redrive, api.Release}},
		{access.Auditor, []string{api.AuditVerify, api.AuditReconcile, api.AuditGet, api.AuditList, api.AuditGroups, api.AuditCheckpoint}},
	}
	for _, s := range services {
		nc := e.conn(t, s.user, nil)
		svc, err := micro.AddService(nc, micro.Config{Name: "access-" + s.user, Version: "0.0.1"})
		if err != nil {
			t.Fatalf("%s: add service: %v", s.user, err)
		}
		t.Cleanup(func() { _ = svc.Stop() })
		for i, subj := range s.endpoints {
			err := svc.AddEndpoint(fmt.Sprintf("e%d", i), micro.HandlerFunc(func(r micro.Request) {
				_ = r.Respond([]byte(s.user + ":" + r.Subject()))
			}), micro.WithEndpointSubject(subj))
			if err != nil {
				t.Fatalf("%s: add endpoint %s: %v", s.user, subj, err)
			}
		}
	}
	client := e.conn(t, "", nil)
	for _, s := range services {
		t.Run(s.user, func(t *testing.T) {
			m, err := client.Request("$SRV.PING.access-"+s.user, nil, 5*time.Second)
			if err != nil {
				t.Fatalf("$SRV.PING: %v", err)
			}
			if !strings.Contains(string(m.Data), "access-"+s.user) {
				t.Fatalf("ping answer %s", m.Data)
			}
			for _, subj := range s.endpoints {
				if subj == api.QuarantinerAppend {
					// Operators write lifecycle records only through the
					// redriver, which records who and why.
					if _, err := client.Request(subj, []byte("{}"), time.Second); err == nil {
						t.Fatalf("client reached %s", subj)
					}
					continue
				}
				m, err := client.Request(subj, []byte("{}"), 5*time.Second)
				if err != nil {
					t.Fatalf("request %s: %v", subj, err)
				}
				if string(m.Data) != s.user+":"+subj {
					t.Fatalf("request %s: answer %q", subj, m.Data)
				}
				out, err := e.cli(t, "", "req", subj, "{}")
				if err != nil || !strings.Contains(out, s.user+":"+subj) {
					t.Fatalf("nats req %s: %v\n%s", subj, err, out)
				}
			}
		})
	}
	t.Run("redriver requests quarantiner endpoints", func(t *testing.T) {
		nc := e.conn(t, access.Redriver, nil)
		if _, err := nc.Request(api.QuarantinerAppend, nil, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("nats micro ls", func(t *testing.T) {
		out, err := e.cli(t, "", "micro", "ls")
		if err != nil {
			t.Fatalf("nats micro ls: %v\n%s", err, out)
		}
		for _, s := range services {
			if !strings.Contains(out, "access-"+s.user) {
				t.Errorf("nats micro ls lacks %s:\n%s", s.user, out)
			}
		}
	})
}

// TestClientCannotTouchServiceWork: the client cannot pull from or forge
// acknowledgements for the validator's consumer (a forged ack would make an
// event vanish uncommitted and unquarantined), and cannot create streams.
func TestClientCannotTouchServiceWork(t *testing.T) {
	t.Parallel()
	e := startEnv(t, 0)
	ctx := testCtx(t, 10*time.Second)
	vjs := e.js(t, e.conn(t, access.Validator, nil))
	cons, err := vjs.CreateOrUpdateConsumer(ctx, subjects.EventsStream, jetstream.ConsumerConfig{
		Durable: subjects.ValidatorConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	cjs := e.js(t, e.conn(t, "", nil))
	if _, err := cjs.Publish(ctx, subjects.Event("pharmacy", "dispense"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := <-batch.Messages()
	if m == nil {
		t.Fatal("validator got no event")
	}
	ackSubj := m.Reply()

	cases := []struct {
		name, subject string
		payload       string
	}{
		{"forged ack (v1 subject)", ackSubj, "+ACK"},
		{"forged term", ackSubj, "+TERM"},
		{"pull from the validator's consumer", "$JS.API.CONSUMER.MSG.NEXT.EVENTS.validator", `{"batch":1}`},
		{"delete the validator's consumer", "$JS.API.CONSUMER.DELETE.EVENTS.validator", ""},
		{"pause the validator's consumer", "$JS.API.CONSUMER.PAUSE.EVENTS.validator", `{"pause_until":"2099-01-01T00:00:00Z"}`},
		{"create a stream", "$JS.API.STREAM.CREATE.RP", `{"name":"RP","subjects":["rp.>"],"republish":{"src":">","dest":"quarantine.pharmacy.rp"}}`},
		{"delete EVENTS", "$JS.API.STREAM.DELETE.EVENTS", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newViolations()
			nc := e.conn(t, "", v)
			if m, err := nc.RequestWithContext(v.ctx(t), tc.subject, []byte(tc.payload)); err == nil {
				t.Fatalf("want no answer, got %q", m.Data)
			}
			v.saw(t, tc.subject)
		})
	}
	ctx = testCtx(t, 10*time.Second)
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 1 || info.AckFloor.Stream != 0 {
		t.Fatalf("validator's event was acknowledged by someone else: %+v", info)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatalf("the validator's own ack: %v", err)
	}
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if _, err := e.admin.Stream(ctx, "RP"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("RP: %v", err)
		}
		return nil
	})
}
