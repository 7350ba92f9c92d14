package access_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/natstest"
)

// deniedWatch is a connection's permission violations, as a client sees
// them (nats.go reports them asynchronously).
type deniedWatch struct {
	mu   sync.Mutex
	errs []error
}

func (d *deniedWatch) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		d.mu.Lock()
		d.errs = append(d.errs, err)
		d.mu.Unlock()
	}
}

func (d *deniedWatch) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.errs)
}

// TestDisabledPersonIsToldSo (issue #40, O7) runs a real server on the
// generated configuration with Jonas disabled: with his own password he
// connects, is refused every endpoint of his former role, and the server
// tells his client he is disabled (access.Disabled, "this person is
// disabled"); he can reach nobody, not even another disabled person.
// Nobody else learns anything new: a wrong password for him is refused
// exactly as a name nobody has, and an enabled person asking the same
// question learns only that she is not disabled.
func TestDisabledPersonIsToldSo(t *testing.T) {
	sec := newSecrets(t)
	amara, jonas := access.DefaultPerson(access.RoleOperator), access.DefaultPersonsOf(access.RoleOperator)[1]
	chen := access.DefaultPerson(access.RoleApprover)
	for _, name := range []string{jonas, chen} {
		if _, err := sec.SetDisabled(name, true, "admin"); err != nil {
			t.Fatal(err)
		}
	}
	srv := natstest.StartConfig(t, embedded.Config{ConfigText: render(t, sec)})
	connect := func(user, password string, w *deniedWatch) (*nats.Conn, error) {
		return nats.Connect(srv.ClientURL(), nats.UserInfo(user, password), nats.CustomInboxPrefix(access.InboxPrefix(user)),
			nats.NoReconnect(), nats.Name("disabled-test"), nats.ErrorHandler(w.handler))
	}
	ask := func(nc *nats.Conn) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return access.Disabled(ctx, nc)
	}
	wrongPassword := strings.Repeat("0", 48)
	for _, tc := range []struct {
		name, user, password string
		// refused: the connect fails with the server's authorization
		// violation, the same words for every refusal.
		refused  bool
		disabled bool
	}{
		{name: "disabled Jonas with his password", user: jonas, password: sec.Users[jonas].Password, disabled: true},
		{name: "disabled Chen Wei (陈伟) with his password", user: chen, password: sec.Users[chen].Password, disabled: true},
		{name: "disabled Jonas with a wrong password", user: jonas, password: wrongPassword, refused: true},
		{name: "disabled Jonas with Amara's password", user: jonas, password: sec.Users[amara].Password, refused: true},
		{name: "a name nobody has: Müller & Söhne <Großhandel>", user: "müller&söhne<großhandel>", password: wrongPassword, refused: true},
		{name: "enabled Amara", user: amara, password: sec.Users[amara].Password},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &deniedWatch{}
			nc, err := connect(tc.user, tc.password, w)
			if tc.refused {
				if err == nil {
					nc.Close()
					t.Fatal("connected")
				}
				// Every refusal reads the same: nothing says the name
				// exists, or is disabled.
				if !errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "disabled") {
					t.Fatalf("connect: %v, want the plain authorization violation", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer nc.Close()
			disabled, err := ask(nc)
			if err != nil || disabled != tc.disabled {
				t.Fatalf("Disabled: %v, %v; want %v", disabled, err, tc.disabled)
			}
			if !tc.disabled {
				return
			}
			if got := access.ErrDisabled.Error(); got != "this person is disabled" {
				t.Errorf("the message reads %q", got)
			}
			// Nothing of the former role answers: every request is a
			// permission violation (dropped by the server), and the
			// other disabled person's inbox is out of reach.
			other := chen
			if tc.user == chen {
				other = jonas
			}
			for _, subj := range []string{api.DrainStart, api.AuditWhoami, "hold.list", "$SRV.PING", "events.pharmacy.dispense",
				access.InboxPrefix(other) + ".x", "$SYS.REQ.USER." + access.DisabledAccount + ".INFO", "$JS.API.INFO"} {
				before := w.count()
				// A violation means the server dropped the message.
				if err := nc.PublishRequest(subj, nc.NewRespInbox(), []byte(`{"reason":"Müller & Söhne <Großhandel>"}`)); err != nil {
					t.Fatal(err)
				}
				natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
					if w.count() == before {
						return errors.New("no permission violation for " + subj)
					}
					return nil
				})
			}
			// Counted before the subscription: the server's violation may
			// come back before SubscribeSync returns.
			before := w.count()
			if _, err := nc.SubscribeSync(access.InboxPrefix(other) + ".>"); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
				if w.count() == before {
					return errors.New("no permission violation for the subscription to another inbox")
				}
				return nil
			})
		})
	}
}

// BenchmarkDisabled is what a refused client pays to learn whether its
// person is disabled: one $SYS.REQ.USER.INFO round trip to the server.
func BenchmarkDisabled(b *testing.B) {
	sec, err := access.NewSecrets(access.DefaultPeople(), cheap)
	if err != nil {
		b.Fatal(err)
	}
	jonas := access.DefaultPersonsOf(access.RoleOperator)[1]
	if _, err := sec.SetDisabled(jonas, true, "admin"); err != nil {
		b.Fatal(err)
	}
	text, err := access.ServerConfig(sec)
	if err != nil {
		b.Fatal(err)
	}
	srv := natstest.StartConfig(b, embedded.Config{ConfigText: text})
	nc, err := nats.Connect(srv.ClientURL(), append(sec.NATSOptions(jonas), nats.NoReconnect())...)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	for b.Loop() {
		if d, err := access.Disabled(ctx, nc); err != nil || !d {
			b.Fatal(d, err)
		}
	}
}
