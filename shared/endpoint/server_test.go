package endpoint_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
)

// echoRequest is the test endpoint's request.
type echoRequest struct {
	Payload json.RawMessage `json:"payload"`
}

// TestErrorCarriesApproval: an APPROVAL_REQUIRED error reaches the client
// with its pending approval (api.Error.Approval), and the handler sees the
// request's body byte for byte (Meta.Body) besides its decoded form.
func TestErrorCarriesApproval(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	svc, err := micro.AddService(nc, micro.Config{Name: "endpointtest", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	s := endpoint.NewServer(nc, endpoint.Options{})
	t.Cleanup(s.Wait)
	var body []byte
	if err := endpoint.Add(s, svc, endpoint.Spec{Name: "hold", Subject: "test.hold"}, func(_ context.Context, m endpoint.Meta, _ echoRequest) (struct{}, error) {
		body = m.Body
		return struct{}{}, &api.Error{Code: api.ErrApprovalRequired, Message: "waits", Approval: &api.Approval{ID: "appr-1", Action: api.ActionCorrect, DiffFields: []string{"event_type"}}}
	}); err != nil {
		t.Fatal(err)
	}
	// The request comes from another connection: the endpoint's
	// subscription must have reached the server first (CI once saw the
	// request answered "no responders").
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sent := []byte("{\"payload\": {\n  \"a\": \"<b>\"\n}}")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = endpoint.CallRaw(ctx, srv.Connect(t), "test.hold", sent)
	e := api.AsError(err)
	if e == nil || e.Code != api.ErrApprovalRequired || e.Approval == nil || e.Approval.ID != "appr-1" || e.Approval.DiffFields[0] != "event_type" {
		t.Fatalf("error %+v, want %s with approval appr-1", e, api.ErrApprovalRequired)
	}
	if string(body) != string(sent) {
		t.Errorf("Meta.Body %q, want the request as sent %q", body, sent)
	}
}
