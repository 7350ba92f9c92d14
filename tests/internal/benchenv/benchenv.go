// Package benchenv starts what every benchmark command needs: an embedded
// NATS server on a free port with a temporary store, a connection, and every
// stream provisioned as the administrator's step does.
package benchenv

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Env is a running benchmark server.
type Env struct {
	Server *server.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	// Options are the stream options provisioned.
	Options streams.Options
	dir     string
	// url and nodes: a cluster's (StartCluster), else Server's.
	url   string
	nodes []node
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
	if err := e.provision(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// provision provisions the core streams and the WORM stores with
// e.Options, as the administrator's step does.
func (e *Env) provision(ctx context.Context) error {
	if err := streams.EnsureCore(ctx, e.JS, e.Options); err != nil {
		return err
	}
	return streams.EnsureWORM(ctx, e.JS, e.Options)
}

// URL is the server's client URL.
func (e *Env) URL() string {
	if e.Server == nil {
		return e.url
	}
	return e.Server.ClientURL()
}

// Close closes the connection, stops the server and removes its store.
func (e *Env) Close() {
	if e.NC != nil {
		e.NC.Close()
	}
	if e.Server != nil {
		e.Server.Shutdown()
		e.Server.WaitForShutdown()
	}
	for _, n := range e.nodes {
		n.stop()
	}
	_ = os.RemoveAll(e.dir)
}

// CPUProfile starts profiling this process's CPU into the file path, and
// an execution trace into path+".trace", and returns the func that stops
// both, writes a heap profile of what is live at that moment (after a
// collection) into path+".heap", and closes the files; with path empty it
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
	// The execution trace of the same phase, next to the profile: where
	// goroutines wait (go tool trace -pprof=sync|syscall|net FILE).
	tf, err := os.Create(path + ".trace")
	if err != nil {
		pprof.StopCPUProfile()
		_ = f.Close()
		return nil, err
	}
	if err := trace.Start(tf); err != nil {
		_ = tf.Close()
		tf = nil
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		if tf != nil {
			trace.Stop()
			_ = tf.Close()
		}
		// What the collector marks at each cycle: the live heap of the
		// server, the services and the bench in this process.
		if hf, err := os.Create(path + ".heap"); err == nil {
			runtime.GC()
			_ = pprof.Lookup("heap").WriteTo(hf, 0)
			_ = hf.Close()
		}
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

// ReadQuarantine reads n messages of QUARANTINE with an ordered consumer
// (with lastPerChain, only the last record of every chain, as a drain's
// selection reads it) and does nothing else with them.
func ReadQuarantine(ctx context.Context, js jetstream.JetStream, n int, lastPerChain bool) error {
	cfg := jetstream.OrderedConsumerConfig{}
	if lastPerChain {
		cfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	}
	cons, err := js.OrderedConsumer(ctx, subjects.QuarantineStream, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return err
	}
	defer it.Stop()
	for seen := 0; seen < n; seen++ {
		if _, err := it.Next(); err != nil {
			return fmt.Errorf("read QUARANTINE: %w after %d messages", err, seen)
		}
	}
	return nil
}

// ValidatorConsumer is a durable consumer configured as the validator's
// (ack wait, max deliver and max ack pending of its default configuration),
// for the benchmarks' store-bound floors.
func ValidatorConsumer(durable string) jetstream.ConsumerConfig {
	v := validator.DefaultConfig()
	return jetstream.ConsumerConfig{
		Durable:       durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       v.AckWait,
		MaxDeliver:    v.MaxDeliver,
		MaxAckPending: max(1024, 4*v.Workers),
	}
}
