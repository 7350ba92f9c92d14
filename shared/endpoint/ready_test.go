package endpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/endpoint"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestServing: a micro service answers discovery before its endpoints
// exist; Serving says so, and says yes once every endpoint is listed.
func TestServing(t *testing.T) {
	nc := natstest.Start(t).Connect(t)
	svc, err := micro.AddService(nc, micro.Config{Name: "probe", Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := endpoint.Serving(ctx, nc, "probe"); err != nil {
		t.Fatalf("PING of an added service: %v", err)
	}
	if err := endpoint.Serving(ctx, nc, "probe", "probe.a", "probe.b"); err == nil {
		t.Fatal("Serving with no endpoints registered: nil")
	}
	noop := micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(nil) })
	if err := svc.AddEndpoint("a", noop, micro.WithEndpointSubject("probe.a")); err != nil {
		t.Fatal(err)
	}
	if err := endpoint.Serving(ctx, nc, "probe", "probe.a", "probe.b"); err == nil {
		t.Fatal("Serving with one of two endpoints: nil")
	}
	if err := svc.AddEndpoint("b", noop, micro.WithEndpointSubject("probe.b")); err != nil {
		t.Fatal(err)
	}
	if err := endpoint.WaitServing(ctx, nc, 10*time.Millisecond, "probe", "probe.a", "probe.b"); err != nil {
		t.Fatalf("WaitServing with both endpoints: %v", err)
	}
	if err := endpoint.Serving(ctx, nc, "nosuch", "x"); err == nil {
		t.Fatal("Serving of a service nobody runs: nil")
	}
}
