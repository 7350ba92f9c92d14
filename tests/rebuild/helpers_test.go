// Package rebuild tests, on the whole system (the all-in-one stack, the
// default config's real identities, an embedded server), that every
// mutable index is checked against its write-once source and restored
// from it (issue 38, E3/E4): HOLDS wiped, an approval altered,
// IDEMPOTENCY wiped, a drain lost; each reported by rebuild.Compare and
// put back by rebuild.Restore with the owner's own credential, after
// which the system behaves as before the damage.
package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// waitFor bounds every wait for the system (a chain listed, a commit, a
// drain's pause, the stack's stop): generous, the machine is shared.
const waitFor = 90 * time.Second

// system is a running stack and a connection per user.
type system struct {
	st    *stack.Stack
	conns map[string]*nats.Conn
	// lifter is the operator with a registered decision key (signed).
	lifter *approvaltest.Person
}

// The connections are closed when the stack stops (start's cleanup), so a
// subtest may open one the next subtest uses.

// start runs the whole system on a free port with a temporary store.
func start(t *testing.T) *system {
	t.Helper()
	cfg := stack.DefaultConfig()
	dir := t.TempDir()
	cfg.DataDir, cfg.AnchorDir = dir+"/data", dir+"/anchors"
	cfg.Port, cfg.SyncAlways, cfg.MetricsAddr = -1, false, ""
	cfg.PasswordCost = access.MinBcryptCost
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	st, err := stack.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	s := &system{st: st, conns: map[string]*nats.Conn{}}
	t.Cleanup(func() {
		for _, nc := range s.conns {
			nc.Close()
		}
		cancel()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Errorf("the stack did not stop within %s", waitFor)
		}
	})
	select {
	case <-st.Ready():
	case err := <-done:
		t.Fatalf("stack exited: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("stack not ready after 90 s")
	}
	return s
}

// conn is a connection as user (a person or a service), kept for the
// test.
func (s *system) conn(t *testing.T, user string) *nats.Conn {
	t.Helper()
	if nc, ok := s.conns[user]; ok {
		return nc
	}
	nc, err := s.st.ConnectAs(user)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	s.conns[user] = nc
	return nc
}

// js is a JetStream handle as user.
func (s *system) js(t *testing.T, user string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(s.conn(t, user))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// call sends req as user and decodes the reply into rep (nil: ignored);
// it returns the service error, if any.
func (s *system) call(t *testing.T, user, subject string, req, rep any) *api.Error {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.conn(t, user).Request(subject, b, 60*time.Second)
	if err != nil {
		t.Fatalf("%s as %s: %v", subject, user, err)
	}
	if ae := endpoint.ErrorOf(m); ae != nil {
		return ae
	}
	if rep != nil {
		if err := json.Unmarshal(m.Data, rep); err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
	}
	return nil
}

// mustCall is call, failing the test on a service error.
func (s *system) mustCall(t *testing.T, user, subject string, req, rep any) {
	t.Helper()
	if ae := s.call(t, user, subject, req, rep); ae != nil {
		t.Fatalf("%s as %s: %s %s", subject, user, ae.Code, ae.Message)
	}
}

// The people of the default config the tests act as.
var (
	viewer    = access.DefaultPerson(access.RoleViewer)
	operator  = access.DefaultPerson(access.RoleOperator)
	inspector = access.DefaultPerson(access.RoleInspector)
)

// publish publishes data on subject as the publisher and returns the
// acknowledgement.
func (s *system) publish(t *testing.T, subject string, data []byte) *jetstream.PubAck {
	t.Helper()
	ack, err := s.js(t, string(access.RolePublisher)).Publish(context.Background(), subject, data)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return ack
}

// quarantine publishes a broken pharmacy event carrying marker and
// returns its chain's dlq id (found by its payload, read as the
// inspector).
func (s *system) quarantine(t *testing.T, marker string) string {
	t.Helper()
	s.publish(t, subjects.Event("pharmacy", "dispense"), []byte(`{"broken":"`+marker+`"`))
	var id string
	natstest.CheckFor(t, waitFor, 50*time.Millisecond, func() error {
		var page api.ListReply
		if ae := s.call(t, viewer, api.AuditList, api.ListRequest{}, &page); ae != nil {
			return errors.New(ae.Code)
		}
		for _, it := range page.Items {
			var rep api.GetReply
			if ae := s.call(t, inspector, api.AuditGet, api.GetRequest{DLQID: it.DLQID, IncludePayload: true, Reason: "rebuild test"}, &rep); ae != nil {
				continue
			}
			if rep.State.Payload == nil {
				continue
			}
			if b, err := rep.State.Payload.Bytes(); err == nil && strings.Contains(string(b), marker) {
				id = it.DLQID
				return nil
			}
		}
		return errors.New("no chain of the event listed yet")
	})
	return id
}

// wipe delete-marks every key of bucket as user (the owner's credential:
// a purge or rollup is refused by the server, a delete marker is not).
func (s *system) wipe(t *testing.T, user, bucket string) int {
	t.Helper()
	ctx := context.Background()
	kv, err := s.js(t, user).KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys := s.keys(t, user, bucket)
	for _, k := range keys {
		if err := kv.Delete(ctx, k); err != nil {
			t.Fatalf("delete %s %s as %s: %v", bucket, k, user, err)
		}
	}
	return len(keys)
}

// keys lists the live keys of bucket, read as user with the rebuild
// package's reader (no consumer: services may not create one).
func (s *system) keys(t *testing.T, user, bucket string) []string {
	t.Helper()
	keys, err := rebuild.Keys(context.Background(), s.js(t, user), bucket)
	if err != nil {
		t.Fatalf("keys of %s as %s: %v", bucket, user, err)
	}
	return keys
}

// compare is rebuild.Compare as user with no grace (the test's writes
// are all settled when it asks).
func (s *system) compare(t *testing.T, user, bucket string) []rebuild.Problem {
	t.Helper()
	ps, err := rebuild.New(s.js(t, user), rebuild.Options{Grace: -1}).Compare(context.Background(), bucket)
	if err != nil {
		t.Fatalf("compare %s as %s: %v", bucket, user, err)
	}
	return ps
}

// restore is rebuild.Restore as user with no grace.
func (s *system) restore(t *testing.T, user, bucket string) rebuild.Report {
	t.Helper()
	rep, err := rebuild.New(s.js(t, user), rebuild.Options{Grace: -1}).Restore(context.Background(), bucket)
	if err != nil {
		t.Fatalf("restore %s as %s: %v", bucket, user, err)
	}
	return rep
}

// kinds counts problems by kind, for the keys in want (nil: all).
func kinds(ps []rebuild.Problem, want map[string]bool) map[rebuild.Kind]int {
	out := map[rebuild.Kind]int{}
	for _, p := range ps {
		if want == nil || want[p.Key] {
			out[p.Kind]++
		}
	}
	return out
}

// noValues fails when a problem's detail carries one of the texts people
// typed.
func noValues(t *testing.T, ps []rebuild.Problem, texts ...string) {
	t.Helper()
	for _, p := range ps {
		for _, v := range texts {
			if strings.Contains(p.Detail, v) {
				t.Errorf("problem of %s carries a person's text %q: %s", p.Key, v, p.Detail)
			}
		}
	}
}

// signed is req, a lift of hold h, signed by the operator with a key of
// her own, registered in AUDIT on first use (issue 38: an unsigned lift
// is refused DECISION_UNSIGNED).
func (s *system) signed(t *testing.T, h api.Hold, req api.HoldLiftRequest) api.HoldLiftRequest {
	t.Helper()
	if s.lifter == nil {
		s.lifter = approvaltest.Register(t, s.js(t, access.Admin), operator, access.RoleOperator)
	}
	req.Signed = s.lifter.Lift(h, req, access.RoleOperator, time.Now())
	return req
}

// errorf is fmt.Errorf for CheckFor's conditions.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// rebuildCompare is rebuild.Compare as user with the default options
// (the grace audit.verify gives).
func rebuildCompare(t *testing.T, s *system, user, bucket string) ([]rebuild.Problem, error) {
	t.Helper()
	return rebuild.Compare(context.Background(), s.js(t, user), bucket)
}

// auditActions counts AUDIT's actions named action of object id (read
// as the admin).
func (s *system) auditActions(t *testing.T, object, id, action string) int {
	t.Helper()
	n := 0
	err := streams.ReadSubject(context.Background(), s.js(t, access.Admin), subjects.AuditStream, subjects.AuditAction(object, id),
		func(m *jetstream.RawStreamMsg) error {
			var a api.AuditAction
			if json.Unmarshal(m.Data, &a) == nil && a.Action == action && a.ObjectID == id {
				n++
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// putRawAs writes b on a bucket's key with js, unconditionally (a plain
// put by a writer of the bucket).
func putRawAs(t *testing.T, js jetstream.JetStream, bucket, key string, b []byte) {
	t.Helper()
	if _, err := js.Publish(context.Background(), subjects.BucketKey(bucket, key), b); err != nil {
		t.Fatal(err)
	}
}

// records counts the records of kind in dlqID's chain (read as the
// admin).
func (s *system) records(t *testing.T, dlqID, kind string) int {
	t.Helper()
	dom, _, _ := strings.Cut(dlqID, "_")
	n := 0
	err := streams.ReadSubject(context.Background(), s.js(t, access.Admin), subjects.QuarantineStream, subjects.Quarantine(dom, dlqID),
		func(m *jetstream.RawStreamMsg) error {
			var r struct {
				Kind string `json:"kind"`
			}
			if json.Unmarshal(m.Data, &r) == nil && r.Kind == kind {
				n++
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
