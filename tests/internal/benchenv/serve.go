package benchenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/streams"
)

// ServeStore is the child side of ChildServer: it runs an embedded server
// (no fsync, a random port) on the store dir, prints its client URL on a
// line of its own, and runs until its standard input closes.
func ServeStore(dir string) error {
	s, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1})
	if err != nil {
		return err
	}
	serveUntilStdinCloses(s)
	return nil
}

// serveUntilStdinCloses is a child server's life: it prints the server's
// client URL on a line of its own (the parent reads it), ignores the
// interrupt its terminal sends the whole group, and shuts the server down
// once the parent closes its standard input.
func serveUntilStdinCloses(s *server.Server) {
	fmt.Println(s.ClientURL())
	signal.Ignore(os.Interrupt)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	s.Shutdown()
	s.WaitForShutdown()
}

// ChildServer runs this executable again with args, which must make it
// call ServeStore, so that the server's CPU is not the bench's: it returns
// the server's URL and the func that stops the child and waits for it.
// The child dies with its parent.
func ChildServer(args ...string) (url string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	return startChild(exec.Command(self, args...))
}

// ChildStore is ChildServer, connected and provisioned: the server runs
// in a child process on the store dir, and the returned connection and
// JetStream context have every stream and bucket deadletter provisions
// (streams.EnsureCore and EnsureWORM, default options). stop closes the
// connection and stops the child.
func ChildStore(ctx context.Context, dir string) (nc *nats.Conn, js jetstream.JetStream, stop func(), err error) {
	url, stopServer, err := ChildServer("-serve", dir)
	if err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*nats.Conn, jetstream.JetStream, func(), error) {
		if nc != nil {
			nc.Close()
		}
		stopServer()
		return nil, nil, nil, err
	}
	if nc, err = nats.Connect(url); err != nil {
		return fail(err)
	}
	if js, err = jetstream.New(nc); err != nil {
		return fail(err)
	}
	o := streams.DefaultOptions()
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		return fail(err)
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		return fail(err)
	}
	return nc, js, func() { nc.Close(); stopServer() }, nil
}
