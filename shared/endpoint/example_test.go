package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// lotRequest asks which lot a supplier's traceability lot code names.
type lotRequest struct {
	Supplier string `json:"supplier"`
	TLC      string `json:"tlc"`
}

// Validate is called after strict decoding: a refusal names the member.
func (r lotRequest) Validate() error {
	if r.TLC == "" {
		return api.BadField("tlc", "a traceability lot code is required")
	}
	return nil
}

// lotReply is the answer.
type lotReply struct {
	Lot string `json:"lot"`
}

// An endpoint is a typed handler added to a NATS micro service: requests
// are decoded strictly (an unknown member is refused) and validated
// before the handler runs, the handler's error reaches the caller as an
// *api.Error with its code, and endpoint.Call is the typed client. This
// example runs a real embedded server, as every test of the project does.
func Example() {
	dir, err := os.MkdirTemp("", "endpoint-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.WaitForShutdown()
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	svc, err := micro.AddService(nc, micro.Config{Name: "lots", Version: "1.0.0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := endpoint.NewServer(nc, endpoint.Options{})
	spec := endpoint.Spec{Name: "lot", Subject: "example.lot", Description: "the lot of a TLC", Timeout: 5 * time.Second}
	err = endpoint.Add(s, svc, spec, func(_ context.Context, _ endpoint.Meta, req lotRequest) (lotReply, error) {
		if req.Supplier != "Müller & Söhne <Großhandel>" {
			return lotReply{}, api.Errorf(api.ErrNotFound, "no such supplier")
		}
		return lotReply{Lot: req.TLC + "/A"}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	rep, err := endpoint.Call[lotRequest, lotReply](ctx, nc, "example.lot", lotRequest{Supplier: "Müller & Söhne <Großhandel>", TLC: "RL250312A"})
	fmt.Println(rep.Lot, err)

	_, err = endpoint.Call[lotRequest, lotReply](ctx, nc, "example.lot", lotRequest{Supplier: "Pharmacie Saint-Étienne", TLC: "RL250312A"})
	var e *api.Error
	fmt.Println(errors.As(err, &e), e.Code)

	_, err = endpoint.Call[lotRequest, lotReply](ctx, nc, "example.lot", lotRequest{Supplier: "Müller & Söhne <Großhandel>"})
	fmt.Println(api.AsError(err).Code, api.AsError(err).Field)

	_, err = endpoint.CallRaw(ctx, nc, "example.lot", []byte(`{"tlc":"RL250312A","actor":"someone else"}`))
	fmt.Println(api.AsError(err).Code, api.AsError(err).Field)

	// Stop the micro service first, then wait for the requests in flight.
	_ = svc.Stop()
	s.Wait()
	// Output:
	// RL250312A/A <nil>
	// true NOT_FOUND
	// BAD_REQUEST tlc
	// BAD_REQUEST actor
}
