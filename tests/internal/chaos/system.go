package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
)

// System is a running deadletter without a workload of its own: the server
// and the services as processes, provisioned and started as Run does, for
// benchmarks that drive their own load, kills and measurements. Start one
// with Start, or receive one in Options.Inspect at the end of a Run.
type System struct{ c *cluster }

// Process is one running program of a System.
type Process struct {
	// Name is the program's instance name ("validator-1", "nats-server-1").
	Name string
	// PID is its process id (0 when it is not running).
	PID int
}

// Event is one planned publish of a workload (System.Events).
type Event struct {
	// Subject and Data are what to publish.
	Subject string
	Data    []byte
	// Key is a valid event's idempotency key (empty for a malformed one).
	Key string
	// Malformed events are quarantined by the validator at once;
	// Exhausting ones fail at the downstream until Heal, exhaust their
	// deliveries and are quarantined.
	Malformed, Exhausting bool
}

// Start sets up a System from o (the shares, Kills, ServerRestarts and
// Failpoint of o are not used: the caller drives the workload).
func Start(ctx context.Context, o Options) (*System, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	c := &cluster{o: o, svcs: map[string][]*proc{}, report: &Report{Kills: map[string]int{}, Restarts: map[string]int{}}}
	if err := c.setUp(ctx); err != nil {
		c.tearDown()
		return nil, err
	}
	return &System{c: c}, nil
}

// Close stops the services, then the server.
func (s *System) Close() { s.c.tearDown() }

// Connect connects as user (a service, a person, "publisher" or the admin).
func (s *System) Connect(user string, opts ...nats.Option) (*nats.Conn, error) {
	return s.c.connect(user, opts...)
}

// StoreDir is the server's JetStream store directory (one server).
func (s *System) StoreDir() string { return filepath.Join(s.c.o.Dir, "store") }

// Processes lists the server nodes and every service instance.
func (s *System) Processes() []Process {
	var out []Process
	add := func(p *proc) {
		p.mu.Lock()
		defer p.mu.Unlock()
		pid := 0
		if p.cmd != nil && p.cmd.Process != nil {
			pid = p.cmd.Process.Pid
		}
		out = append(out, Process{Name: p.name, PID: pid})
	}
	for _, p := range s.c.servers {
		add(p)
	}
	for _, name := range serviceNames {
		for _, p := range s.c.svcs[name] {
			add(p)
		}
	}
	return out
}

// serviceNames are the services in the order a System lists them.
var serviceNames = []string{access.Validator, access.Quarantiner, access.Redriver, access.Auditor}

// instance returns the first instance of service.
func (s *System) instance(service string) (*proc, error) {
	ps := s.c.svcs[service]
	if len(ps) == 0 {
		return nil, fmt.Errorf("chaos: no service %q", service)
	}
	return ps[0], nil
}

// Kill sends SIGKILL to the first instance of service and waits until it
// has exited.
func (s *System) Kill(service string) error {
	p, err := s.instance(service)
	if err != nil {
		return err
	}
	p.signal(syscall.SIGKILL, true)
	return nil
}

// Restart starts the first instance of service again (after Kill).
func (s *System) Restart(service string) error {
	p, err := s.instance(service)
	if err != nil {
		return err
	}
	return p.start()
}

// Tail returns the last n bytes of the log of the first instance of
// service.
func (s *System) Tail(service string, n int64) string {
	p, err := s.instance(service)
	if err != nil {
		return ""
	}
	return p.tail(n)
}

// Events plans n distinct events across the domains, malformed and
// exhausting the given shares of them (the downstream fails the exhausting
// ones until Heal), in a random order seeded by seed.
func (s *System) Events(n int, malformed, exhausting float64, seed uint64) ([]Event, error) {
	o := s.c.o
	o.Events, o.Malformed, o.Exhausting, o.Transient, o.Republished = n, malformed, exhausting, 0, 0
	evs, err := plan(o, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), s.c.down)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = Event{Subject: e.subject, Data: e.data, Key: e.key, Malformed: e.fate == fateMalformed, Exhausting: e.fate == fateExhaust}
	}
	return out, nil
}

// FailAlways makes the downstream fail the event of key until Heal (it
// exhausts its deliveries and is quarantined).
func (s *System) FailAlways(key string) { s.c.down.failAlways(key) }

// Heal ends the downstream's outage: every key is accepted from now on.
func (s *System) Heal() { s.c.down.heal() }

// WaitServices waits until every service answers discovery.
func (s *System) WaitServices(ctx context.Context) error { return s.c.waitServices(ctx) }
