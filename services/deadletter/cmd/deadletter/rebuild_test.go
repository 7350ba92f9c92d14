package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval/approvaltest"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// rebuildWait bounds every wait for the system: generous, the machine is
// shared.
const rebuildWait = 90 * time.Second

// TestRebuildCommand (issue 38, E3/E4): HOLDS and IDEMPOTENCY wiped with
// their owners' credentials (delete markers: a purge or rollup is refused
// by the server); `deadletter rebuild`, run in-process as the data
// directory's administrator on the server its contexts name, reports
// every problem by key, kind and field (never a case id, a reason nor a
// payload value), writes nothing on a dry run, restores one bucket or
// all, and exits non-zero while problems remain. Afterwards the held
// chain is still held and its hold liftable again (the lift reaches its
// second person), and a resent event is a duplicate of the original.
func TestRebuildCommand(t *testing.T) {
	s := startRebuildStack(t)
	ctx := context.Background()
	subject := subjects.Event("pharmacy", "dispense")

	data, key := rebuildEvent(t, subject, "Müller & Söhne <Großhandel> \"Nord\" 陈伟")
	first, err := s.js(t, string(access.RolePublisher)).Publish(ctx, subject, data)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := s.js(t, access.Admin).KeyValue(ctx, subjects.IdempotencyBucket)
	if err != nil {
		t.Fatal(err)
	}
	var committed idempotency.KeyState
	natstest.CheckFor(t, rebuildWait, 20*time.Millisecond, func() error {
		st, found, err := idempotency.Lookup(ctx, keys, key)
		if err != nil || !found || !st.Committed() {
			return fmt.Errorf("key not committed yet (%v)", err)
		}
		committed = st
		return nil
	})
	dlqID := s.quarantined(t, "{\"broken\":\"Apotheke Müller & Söhne <Lot A1&B2>\"")
	const caseID = "CASE-DEA-2026 Müller & Söhne <Großhandel>"
	var placed api.HoldReply
	s.mustCall(t, inspectorName, api.HoldPlace, api.HoldPlaceRequest{CaseID: caseID, Reason: "subpoena, 陈伟 \"Nord\"",
		Target: api.HoldTarget{DLQID: dlqID}}, &placed)

	if n := s.wipe(t, access.Auditor, subjects.HoldsBucket); n != 1 {
		t.Fatalf("wiped %d holds, want 1", n)
	}
	if n := s.wipe(t, access.Validator, subjects.IdempotencyBucket); n != 1 {
		t.Fatalf("wiped %d keys, want 1", n)
	}
	if ae := s.call(t, operatorName, api.HoldLift, api.HoldLiftRequest{ID: placed.Hold.ID, CaseID: caseID, Reason: "case closed"}, nil); ae == nil || ae.Code != api.ErrNotFound {
		t.Fatalf("hold.lift of the wiped hold: %v, want NOT_FOUND (stranded)", ae)
	}

	dataDir := s.dataDir
	for _, tc := range []struct {
		name string
		args []string
		code int
		// want: lines of the output that must be there; keys: the keys
		// the table must name.
		want []string
		keys []string
	}{
		{"a bucket it does not know", []string{"--bucket", "LEDGER"}, exitFailed, nil, nil},
		{"dry run: reported, nothing written", []string{"--dry-run"}, exitFailed,
			[]string{"HOLDS: 1 problems (dry run: nothing written)", "IDEMPOTENCY: 1 problems (dry run: nothing written)", "compared"},
			[]string{placed.Hold.ID, key}},
		{"HOLDS alone", []string{"--bucket", subjects.HoldsBucket}, 0,
			[]string{"HOLDS: 1 problems, 1 created, 0 updated, 0 removed, 0 unchanged, 0 unrestorable, 0 retried; 0 remain", "restored"},
			[]string{placed.Hold.ID}},
		{"every bucket", nil, 0,
			[]string{"HOLDS: 0 problems", "APPROVALS: 0 problems", "DRAINS: 0 problems",
				"IDEMPOTENCY: 1 problems, 1 created, 0 updated, 0 removed, 0 unchanged, 0 unrestorable, 0 retried; 0 remain"},
			[]string{key}},
		{"again: nothing to do", []string{"--remove-extra"}, 0,
			[]string{"HOLDS: 0 problems", "APPROVALS: 0 problems", "DRAINS: 0 problems", "IDEMPOTENCY: 0 problems"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"rebuild", "--data-dir", dataDir, "--grace", "0s"}, tc.args...)
			code := dispatch(args, &out, &errOut)
			t.Logf("deadletter %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
			if code != tc.code {
				t.Fatalf("deadletter %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, tc.code, out.String(), errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, k := range tc.keys {
				if !regexp.MustCompile(regexp.QuoteMeta(k) + ` +missing`).MatchString(out.String()) {
					t.Errorf("output names no missing %s:\n%s", k, out.String())
				}
			}
			for _, v := range []string{"Müller", "陈伟", "CASE-DEA", "subpoena", "Lot A1"} {
				if strings.Contains(out.String()+errOut.String(), v) {
					t.Errorf("output carries a value %q:\n%s%s", v, out.String(), errOut.String())
				}
			}
		})
	}

	// The hold is listed and liftable again; its chain never stopped
	// being held.
	natstest.CheckFor(t, rebuildWait, 100*time.Millisecond, func() error {
		var list api.HoldListReply
		s.mustCall(t, viewerName, api.HoldList, api.HoldListRequest{}, &list)
		if len(list.Holds) != 1 || list.Holds[0].Hold.ID != placed.Hold.ID || list.Holds[0].Hold.CaseID != caseID || list.Holds[0].Hold.Status != api.HoldActive {
			return fmt.Errorf("hold.list: %d holds, want the restored one", len(list.Holds))
		}
		return nil
	})
	if ae := s.call(t, operatorName, api.Redrive, api.RedriveRequest{DLQID: dlqID, IncludeValidation: true, DryRun: true}, nil); ae == nil || ae.Code != api.ErrHeld {
		t.Errorf("redrive of the held chain: %v, want HELD", ae)
	}
	// The operator signs the lift with a key of her own (issue 38).
	op := approvaltest.Register(t, s.js(t, access.Admin), operatorName, access.RoleOperator)
	lift := api.HoldLiftRequest{ID: placed.Hold.ID, CaseID: caseID, Reason: "case closed <Müller & Söhne>"}
	lift.Signed = op.Lift(placed.Hold, lift, access.RoleOperator, time.Now())
	ae := s.call(t, operatorName, api.HoldLift, lift, nil)
	if ae == nil || ae.Code != api.ErrApprovalRequired || ae.Approval == nil || ae.Approval.HoldID != placed.Hold.ID {
		t.Errorf("hold.lift of the restored hold: %v, want APPROVAL_REQUIRED with its approval", ae)
	}

	// A resend is a duplicate of the original: the key still names it,
	// LEDGER holds one message.
	resend, err := s.js(t, string(access.RolePublisher)).Publish(ctx, subject, data)
	if err != nil {
		t.Fatal(err)
	}
	s.settled(t, resend.Sequence)
	st, found, err := idempotency.Lookup(ctx, keys, key)
	if err != nil || !found || st.SourceSeq != first.Sequence || st.LedgerSeq != committed.LedgerSeq {
		t.Errorf("after the resend the key names EVENTS %d, LEDGER %d (found %v, %v), want %d, %d", st.SourceSeq, st.LedgerSeq, found, err, first.Sequence, committed.LedgerSeq)
	}
	ledger, err := s.js(t, access.Admin).Stream(ctx, subjects.LedgerStream)
	if err != nil {
		t.Fatal(err)
	}
	subj := subjects.Ledger("pharmacy", key)
	in, err := ledger.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil || in.State.Subjects[subj] != 1 {
		t.Errorf("LEDGER holds %d messages of the key (%v), want 1", in.State.Subjects[subj], err)
	}
}

// TestRebuildCommandWithoutAStore: the command names what is wrong and
// touches nothing when the data directory has no credentials or the
// server is not there.
func TestRebuildCommandWithoutAStore(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no credentials", []string{"--data-dir", filepath.Join(dir, "nowhere")}, "no credentials in"},
		{"an argument", []string{"--data-dir", dir, "HOLDS"}, "unexpected \"HOLDS\""},
		{"dry run and remove", []string{"--data-dir", dir, "--dry-run", "--remove-extra"}, "--dry-run writes nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := dispatch(append([]string{"rebuild"}, tc.args...), &out, &errOut); code != exitFailed {
				t.Errorf("exit %d, want %d", code, exitFailed)
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.want)
			}
		})
	}
}

// The people of the default config the test acts as.
var (
	viewerName    = access.DefaultPerson(access.RoleViewer)
	operatorName  = access.DefaultPerson(access.RoleOperator)
	inspectorName = access.DefaultPerson(access.RoleInspector)
)

// rebuildStack is a running stack and a connection per user.
type rebuildStack struct {
	st      *stack.Stack
	dataDir string
	conns   map[string]*nats.Conn
}

// startRebuildStack runs the whole system on a free port with a
// temporary store.
func startRebuildStack(t *testing.T) *rebuildStack {
	t.Helper()
	cfg := stack.DefaultConfig()
	dir := t.TempDir()
	cfg.DataDir, cfg.AnchorDir = dir+"/data", dir+"/anchors"
	cfg.Port, cfg.SyncAlways, cfg.MetricsAddr, cfg.ConsoleAddr = -1, false, "", ""
	cfg.PasswordCost = access.MinBcryptCost
	cfg.Auditor.CheckpointInterval, cfg.Auditor.ReconcileInterval = 0, 0
	st, err := stack.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx) }()
	s := &rebuildStack{st: st, dataDir: cfg.DataDir, conns: map[string]*nats.Conn{}}
	t.Cleanup(func() {
		for _, nc := range s.conns {
			nc.Close()
		}
		cancel()
		select {
		case <-done:
		case <-time.After(rebuildWait):
			t.Errorf("the stack did not stop within %s", rebuildWait)
		}
	})
	select {
	case <-st.Ready():
	case err := <-done:
		t.Fatalf("stack exited: %v", err)
	case <-time.After(rebuildWait):
		t.Fatalf("stack not ready after %s", rebuildWait)
	}
	return s
}

// js is a JetStream handle as user.
func (s *rebuildStack) js(t *testing.T, user string) jetstream.JetStream {
	t.Helper()
	nc, ok := s.conns[user]
	if !ok {
		var err error
		if nc, err = s.st.ConnectAs(user); err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		s.conns[user] = nc
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// call sends req as user and decodes the reply into rep (nil: ignored);
// it returns the service error, if any.
func (s *rebuildStack) call(t *testing.T, user, subject string, req, rep any) *api.Error {
	t.Helper()
	s.js(t, user)
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.conns[user].Request(subject, b, 60*time.Second)
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
func (s *rebuildStack) mustCall(t *testing.T, user, subject string, req, rep any) {
	t.Helper()
	if ae := s.call(t, user, subject, req, rep); ae != nil {
		t.Fatalf("%s as %s: %s %s", subject, user, ae.Code, ae.Message)
	}
}

// quarantined publishes a broken pharmacy event and returns its chain's
// dlq id (the test's only chain).
func (s *rebuildStack) quarantined(t *testing.T, data string) string {
	t.Helper()
	if _, err := s.js(t, string(access.RolePublisher)).Publish(context.Background(), subjects.Event("pharmacy", "dispense"), []byte(data)); err != nil {
		t.Fatal(err)
	}
	var id string
	natstest.CheckFor(t, rebuildWait, 50*time.Millisecond, func() error {
		var page api.ListReply
		if ae := s.call(t, viewerName, api.AuditList, api.ListRequest{}, &page); ae != nil {
			return errors.New(ae.Code)
		}
		if len(page.Items) != 1 {
			return fmt.Errorf("%d chains listed, want 1", len(page.Items))
		}
		id = page.Items[0].DLQID
		return nil
	})
	return id
}

// wipe delete-marks every key of bucket as user, the bucket's owner (a
// purge or rollup is refused by the server, a delete marker is not).
func (s *rebuildStack) wipe(t *testing.T, user, bucket string) int {
	t.Helper()
	ctx := context.Background()
	js := s.js(t, user)
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := rebuild.Keys(ctx, js, bucket)
	if err != nil {
		t.Fatalf("keys of %s: %v", bucket, err)
	}
	for _, k := range keys {
		if err := kv.Delete(ctx, k); err != nil {
			t.Fatalf("delete %s %s as %s: %v", bucket, k, user, err)
		}
	}
	return len(keys)
}

// settled waits until the validator acknowledged EVENTS up to seq.
func (s *rebuildStack) settled(t *testing.T, seq uint64) {
	t.Helper()
	js := s.js(t, access.Admin)
	natstest.CheckFor(t, rebuildWait, 20*time.Millisecond, func() error {
		c, err := js.Consumer(context.Background(), subjects.EventsStream, subjects.ValidatorConsumer)
		if err != nil {
			return err
		}
		in, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if in.AckFloor.Stream < seq {
			return fmt.Errorf("validator acknowledged EVENTS up to %d, waiting for %d", in.AckFloor.Stream, seq)
		}
		return nil
	})
}

// rebuildEvent is the pharmacy example with a unique transaction id and
// note, and its idempotency key as the gate derives it.
func rebuildEvent(t *testing.T, subject, note string) ([]byte, string) {
	t.Helper()
	b, err := fs.ReadFile(schemas.FS, "testdata/pharmacy/valid/dispense-schedule-ii.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["transaction_id"] = "INV-REBUILD-CMD-" + time.Now().UTC().Format("150405.000000")
	doc["note"] = note
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	env, err := g.Check(subject, b)
	if err != nil { // a schema without a note
		delete(doc, "note")
		if b, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if env, err = g.Check(subject, b); err != nil {
			t.Fatalf("the example does not pass the gate: %v", err)
		}
	}
	return b, env.IdempotencyKey
}
