package redteam

import (
	"errors"
	"golang.org/x/crypto/bcrypt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/natstest"
)

// floodServer starts a server with the default people at the password
// hash cost of opts (none: the deployment's), a whoami responder in the
// services' account, and returns it with the secrets.
func floodServer(t *testing.T, opts ...access.Option) (*natstest.Server, *access.Secrets) {
	t.Helper()
	sec, err := access.NewSecrets(access.DefaultPeople(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	text, err := access.ServerConfig(sec)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartConfig(t, embedded.Config{ConfigText: text})
	svc := srv.Connect(t, sec.NATSOptions(access.Auditor)...)
	m, err := micro.AddService(svc, micro.Config{Name: "whoami", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddEndpoint("who", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte(`{}`)) }),
		micro.WithEndpointSubject(api.AuditWhoami)); err != nil {
		t.Fatal(err)
	}
	return srv, sec
}

// personRequest is what a person's natscli does for one command: connect
// with the password, one request, close. It returns how long that took.
func personRequest(srv *natstest.Server, sec *access.Secrets, user string) (time.Duration, error) {
	began := time.Now()
	nc, err := nats.Connect(srv.ClientURL(), append(sec.NATSOptions(user), nats.NoReconnect(), nats.Timeout(20*time.Second))...)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	if _, err := nc.Request(api.AuditWhoami, []byte(`{}`), 20*time.Second); err != nil {
		return 0, err
	}
	return time.Since(began), nil
}

// median of n person requests.
func medianRequest(t *testing.T, srv *natstest.Server, sec *access.Secrets, user string, n int) time.Duration {
	t.Helper()
	ds := make([]time.Duration, 0, n)
	for range n {
		d, err := personRequest(srv, sec, user)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// flood makes total connects with a wrong password for user, from
// threads goroutines, until done; it returns how many were refused.
func flood(srv *natstest.Server, user string, threads, total int) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range total / threads {
				nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(user, "0123456789abcdef-wrong-"+string(rune('a'+i))),
					nats.NoReconnect(), nats.Timeout(20*time.Second))
				if err == nil {
					nc.Close()
					continue
				}
				if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return refused
}

// TestWrongPasswordFloodCostsLittle (issue #38, E11): 300 connects with
// a wrong password for an existing person, from 4 threads, against a
// server with the deployment's password hashes (access.PasswordHashCost):
// every one is refused, and a person's command (connect, request, close)
// during the flood takes at most twice what it took idle with the hashes
// of the earlier default cost (bcrypt's 10), where each wrong password
// cost the server a full bcrypt check (measured on the 2-core VM with a
// server at cost 10: idle 0.16 s; during the flood a median of 1.1 s, the
// flood itself 74 s). That idle time is taken as the idle command here
// plus one cost-10 check: a server at cost 10 under the race detector
// takes so long to check a password that the client's connect fails
// (the server's first PING comes before its PONG).
func TestWrongPasswordFloodCostsLittle(t *testing.T) {
	viewer, victim := access.DefaultPerson(access.RoleViewer), access.DefaultPerson(access.RoleOperator)
	srv, sec := floodServer(t)
	if c, err := bcrypt.Cost([]byte(sec.Users[viewer].Bcrypt)); err != nil || c != access.PasswordHashCost {
		t.Fatalf("a person's hash has cost %d (%v), want %d", c, err, access.PasswordHashCost)
	}
	idle := medianRequest(t, srv, sec, viewer, 15)
	before := idle + costCheck(t, bcrypt.DefaultCost)
	began := time.Now()
	var during []time.Duration
	// A fast machine may end a flood before a few commands ran: another
	// flood then, up to 3.
	for round := 0; round < 3 && len(during) < 5; round++ {
		done := make(chan int)
		go func() { done <- flood(srv, victim, 4, 300) }()
	measure:
		for {
			select {
			case n := <-done:
				if n != 300 {
					t.Errorf("%d of 300 wrong-password connects refused", n)
				}
				break measure
			default:
			}
			d, err := personRequest(srv, sec, viewer)
			if err != nil {
				t.Fatal(err)
			}
			during = append(during, d)
		}
	}
	if len(during) == 0 {
		t.Fatal("no command of the person ran during a flood")
	}
	slices.Sort(during)
	median := during[len(during)/2]
	t.Logf("a person's command: %s idle at bcrypt cost %d (idle here plus one check); at cost %d %s idle, %s median (max %s, %d commands) during 300 wrong-password connects from 4 threads (%s)",
		before, bcrypt.DefaultCost, access.PasswordHashCost, idle, median, during[len(during)-1], len(during), time.Since(began).Round(time.Millisecond))
	if median > 2*before {
		t.Errorf("a person's command took %s (median) during the flood, more than twice the %s it took idle before", median, before)
	}
}

// costCheck is the median time of 3 bcrypt checks of a password at cost.
func costCheck(t *testing.T, cost int) time.Duration {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte("0123456789abcdef0123456789abcdef0123456789abcdef"), cost)
	if err != nil {
		t.Fatal(err)
	}
	ds := make([]time.Duration, 3)
	for i := range ds {
		began := time.Now()
		if err := bcrypt.CompareHashAndPassword(h, []byte("0123456789abcdef0123456789abcdef0123456789abcdef")); err != nil {
			t.Fatal(err)
		}
		ds[i] = time.Since(began)
	}
	slices.Sort(ds)
	return ds[1]
}
