// Package benchenv starts what every benchmark command needs: an embedded
// NATS server on a free port with a temporary store, a connection, and every
// stream provisioned as the administrator's step does.
package benchenv

import (
	"context"
	"os"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/streams"
)

// Env is a running benchmark server.
type Env struct {
	Server *server.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	// Options are the stream options provisioned.
	Options streams.Options
	dir     string
}

// Start starts the server (fsyncing every write when syncAlways) and
// provisions the core streams and the WORM stores.
func Start(ctx context.Context, syncAlways bool) (*Env, error) {
	dir, err := os.MkdirTemp("", "deadletter-bench-")
	if err != nil {
		return nil, err
	}
	e := &Env{dir: dir, Options: streams.DefaultOptions()}
	if e.Server, err = embedded.Start(embedded.Config{StoreDir: dir, Port: -1, SyncAlways: syncAlways}); err != nil {
		e.Close()
		return nil, err
	}
	if e.NC, err = nats.Connect(e.Server.ClientURL()); err != nil {
		e.Close()
		return nil, err
	}
	if e.JS, err = jetstream.New(e.NC); err != nil {
		e.Close()
		return nil, err
	}
	if err := streams.EnsureCore(ctx, e.JS, e.Options); err != nil {
		e.Close()
		return nil, err
	}
	if err := streams.EnsureWORM(ctx, e.JS, e.Options); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// URL is the server's client URL.
func (e *Env) URL() string { return e.Server.ClientURL() }

// Close closes the connection, stops the server and removes its store.
func (e *Env) Close() {
	if e.NC != nil {
		e.NC.Close()
	}
	if e.Server != nil {
		e.Server.Shutdown()
		e.Server.WaitForShutdown()
	}
	_ = os.RemoveAll(e.dir)
}

// CPUProfile starts profiling this process's CPU into the file path and
// returns the func that stops it and closes the file; with path empty it
// does nothing.
func CPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// CPUTime is the user+sys CPU time of this process so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
