// Command flood measures what a flood of failed logins costs a person's
// command (issue #38: "a person's request stays within 2× its idle
// latency during a 300-connect wrong-password flood"), against the floor
// of the same flood when a refused login costs the server nothing.
//
// One server with the deployment's accounts and people (access.Secrets at
// access.PasswordHashCost) and a whoami responder. A person's command is
// what natscli does: connect with the password, one request, close. Each
// round measures, in a rotating order:
//
//   - idle: the command alone;
//   - wrong-password: 300 connects (4 threads) naming an existing person
//     with a wrong password (the server checks the bcrypt hash);
//   - unknown-user: 300 connects naming no user the server has (refused
//     without any hash check): the floor of any cheaper password check;
//   - bare-tcp: 300 TCP connects that close at once (no CONNECT at all):
//     the floor of a per-address limit that refuses in the server.
//
// Two things a person does are timed during each: a command as natscli
// runs it (connect with the password, one request, close) and a request
// on a connection the person holds open (a console session, a running
// dlqctl).
//
// Everything runs on one machine, so each flood's client competes for the
// same CPUs as the server: the floods are the same count, and their
// figures are read against each other in the same round.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/embedded"
)

// kinds of flood, "idle" none.
var kinds = []string{"idle", "wrong-password", "unknown-user", "bare-tcp"}

func main() {
	rounds := flag.Int("rounds", 5, "rounds of every kind")
	total := flag.Int("n", 300, "connects per flood")
	threads := flag.Int("threads", 4, "flooding threads")
	flag.Parse()
	if err := run(*rounds, *total, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

func run(rounds, total, threads int) error {
	sec, err := access.NewSecrets(access.DefaultPeople())
	if err != nil {
		return err
	}
	text, err := access.ServerConfig(sec)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "flood")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1, ConfigText: text})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	svc, err := nats.Connect(url, sec.NATSOptions(access.Auditor)...)
	if err != nil {
		return err
	}
	defer svc.Close()
	m, err := micro.AddService(svc, micro.Config{Name: "whoami", Version: "1.0.0"})
	if err != nil {
		return err
	}
	if err := m.AddEndpoint("who", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte(`{}`)) }),
		micro.WithEndpointSubject(api.AuditWhoami)); err != nil {
		return err
	}
	person, victim := access.DefaultPerson(access.RoleViewer), access.DefaultPerson(access.RoleOperator)
	opts := sec.NATSOptions(person)
	// open is the person's connection a console session or a running
	// dlqctl holds: its requests need no new login.
	open, err := nats.Connect(url, opts...)
	if err != nil {
		return err
	}
	defer open.Close()
	request := func() (time.Duration, error) {
		began := time.Now()
		if _, err := open.Request(api.AuditWhoami, []byte(`{}`), 20*time.Second); err != nil {
			return 0, err
		}
		return time.Since(began), nil
	}
	command := func() (time.Duration, error) {
		began := time.Now()
		nc, err := nats.Connect(url, append(opts, nats.NoReconnect(), nats.Timeout(20*time.Second))...)
		if err != nil {
			return 0, err
		}
		defer nc.Close()
		if _, err := nc.Request(api.AuditWhoami, []byte(`{}`), 20*time.Second); err != nil {
			return 0, err
		}
		return time.Since(began), nil
	}
	all, reqs := map[string][]time.Duration{}, map[string][]time.Duration{}
	floodTime := map[string][]time.Duration{}
	for r := range rounds {
		for i := range kinds {
			kind := kinds[(i+r)%len(kinds)]
			for _, w := range []struct {
				fn  func() (time.Duration, error)
				got map[string][]time.Duration
			}{{command, all}, {request, reqs}} {
				ds, took, err := measure(kind, url, victim, total, threads, w.fn)
				if err != nil {
					return fmt.Errorf("round %d, %s: %w", r+1, kind, err)
				}
				w.got[kind] = append(w.got[kind], ds...)
				floodTime[kind] = append(floodTime[kind], took)
			}
			fmt.Printf("round %d %-15s command median %-10s request median %s\n", r+1, kind, median(all[kind]), median(reqs[kind]))
		}
	}
	idle, idleReq := median(all["idle"]), median(reqs["idle"])
	fmt.Printf("\n| flood (%d connects, %d threads) | command (connect, request, close) | × idle | request on an open connection | × idle | flood time |\n|---|---|---|---|---|---|\n", total, threads)
	for _, k := range kinds {
		fmt.Printf("| %s | %s | %.2f | %s | %.2f | %s |\n", k, median(all[k]).Round(10*time.Microsecond), float64(median(all[k]))/float64(idle),
			median(reqs[k]).Round(time.Microsecond), float64(median(reqs[k]))/float64(idleReq), median(floodTime[k]).Round(time.Millisecond))
	}
	return nil
}

// measure runs the flood of kind (none for idle) and the person's commands
// until it ends (idle: 15 commands).
func measure(kind, url, victim string, total, threads int, command func() (time.Duration, error)) ([]time.Duration, time.Duration, error) {
	var ds []time.Duration
	if kind == "idle" {
		for range 15 {
			d, err := command()
			if err != nil {
				return nil, 0, err
			}
			ds = append(ds, d)
		}
		return ds, 0, nil
	}
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- flood(kind, url, victim, total, threads) }()
	for {
		select {
		case err := <-done:
			return ds, time.Since(began), err
		default:
		}
		d, err := command()
		if err != nil {
			return nil, 0, err
		}
		ds = append(ds, d)
	}
}

// flood makes total connects of kind from threads goroutines.
func flood(kind, url, victim string, total, threads int) error {
	addr := url[len("nats://"):]
	var wg sync.WaitGroup
	errs := make(chan error, threads)
	for i := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range total / threads {
				switch kind {
				case "bare-tcp":
					c, err := net.Dial("tcp", addr)
					if err != nil {
						errs <- err
						return
					}
					c.Close()
				default:
					user, pass := victim, fmt.Sprintf("0123456789abcdef-wrong-%d", i)
					if kind == "unknown-user" {
						user = fmt.Sprintf("nobody-%d", i)
					}
					nc, err := nats.Connect(url, nats.UserInfo(user, pass), nats.NoReconnect(), nats.Timeout(20*time.Second))
					if err == nil {
						nc.Close()
						errs <- errors.New("a wrong login was accepted")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
