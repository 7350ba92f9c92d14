package rebuild

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
)

// TestRequestsReaders (ADR 0024): REQUESTS holds request bodies and
// corrected payloads (PHI). Of the default config's identities, the
// redriver (its writer) and the auditor (audit.verify) read it; no
// person (an inspector, an operator: their accounts have no JetStream)
// nor the validator or the quarantiner reads it or writes a request into
// it. A person reads an approval's body only through approval.get, with
// a role that approves or reads payloads (a viewer's copy is redacted,
// as before).
func TestRequestsReaders(t *testing.T) {
	s := start(t)
	id := s.quarantine(t, "requests Müller & Söhne <Großhandel> 陈伟")
	var placed api.HoldReply
	s.mustCall(t, inspector, api.HoldPlace, api.HoldPlaceRequest{CaseID: "CASE-DEA <7> & Müller", Reason: "subpoena \"Nord\"",
		Target: api.HoldTarget{DLQID: id}}, &placed)
	ae := s.call(t, operator, api.HoldLift, s.signed(t, placed.Hold, api.HoldLiftRequest{ID: placed.Hold.ID, CaseID: "CASE-DEA <7> & Müller",
		Reason: "case closed: 陈伟 & <Süd>"}), nil)
	if ae == nil || ae.Approval == nil {
		t.Fatalf("hold.lift: %v, want APPROVAL_REQUIRED", ae)
	}
	subject := streams.ApprovalRequestSubject(ae.Approval.ID)
	for _, tc := range []struct {
		user       string
		read, sent bool
	}{
		{access.Redriver, true, true},
		{access.Auditor, true, false},
		{access.Validator, false, false},
		{access.Quarantiner, false, false},
		{operator, false, false},
		{inspector, false, false},
		{viewer, false, false},
		{access.DefaultPerson(access.RoleApprover), false, false},
	} {
		t.Run(tc.user, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			nc := s.conn(t, tc.user)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			got, found, err := streams.ReadOnce(ctx, js, streams.RequestsStream, subject)
			switch {
			case tc.read && (err != nil || !found):
				t.Errorf("read as %s: found %v, %v; want the request", tc.user, found, err)
			case tc.read:
				var a api.Approval
				if json.Unmarshal(got, &a) != nil || a.ID != ae.Approval.ID {
					t.Errorf("read as %s: not the approval's request", tc.user)
				}
			case err == nil || found:
				t.Errorf("read as %s: found %v, %v; want no read", tc.user, found, err)
			}
			// A forged request of a new id: only the writer's credential
			// gets one into REQUESTS (and a stored one is never replaced).
			m := nats.NewMsg(streams.ApprovalRequestSubject("appr-20261207T000000-f0f0f0f0f0f0f0f0"))
			m.Data = []byte(`{"id":"appr-20261207T000000-f0f0f0f0f0f0f0f0"}`)
			_, err = js.PublishMsg(ctx, m)
			if sent := err == nil; sent != tc.sent && !(tc.sent && isMaxMsgs(err)) {
				t.Errorf("a request written as %s: %v, want written %v", tc.user, err, tc.sent)
			}
		})
	}
	// The approvers read the body through approval.get; a viewer's copy
	// carries none.
	approver := access.DefaultPerson(access.RoleApprover)
	var full api.ApprovalReply
	s.mustCall(t, approver, api.ApprovalGet, api.ApprovalGetRequest{ID: ae.Approval.ID}, &full)
	if len(full.Approval.Request) == 0 {
		t.Errorf("approval.get as the approver: no request body")
	}
	var redacted api.ApprovalReply
	if e := s.call(t, viewer, api.ApprovalGet, api.ApprovalGetRequest{ID: ae.Approval.ID}, &redacted); e == nil && len(redacted.Approval.Request) != 0 {
		t.Errorf("approval.get as the viewer carries the request body")
	}
}

// isMaxMsgs reports whether err is REQUESTS' refusal of a second message
// on a subject.
func isMaxMsgs(err error) bool {
	var apiErr *jetstream.APIError
	return err != nil && errors.As(err, &apiErr) && apiErr.ErrorCode == streams.ErrCodeMaxMsgsPerSubject
}
