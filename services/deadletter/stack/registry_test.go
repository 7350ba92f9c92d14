package stack

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestPeopleRegisteredInAudit (issue #38): every person's record is in
// AUDIT from the start, and each people change (a key added, a key
// revoked, a role granted, a person disabled) applied by the running
// server is a new record there, written once, with who and what.
func TestPeopleRegisteredInAudit(t *testing.T) {
	s, cfg := startStack(t, t.TempDir())
	path := filepath.Join(cfg.DataDir, CredentialsFile)
	nc, err := s.ConnectAs(access.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	latest := func() map[string]decision.Entry {
		t.Helper()
		m, err := decision.NewRegistry(js).Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	start := latest()
	for _, pk := range s.Secrets().PersonKeys() {
		e, ok := start[pk.Person]
		if !ok {
			t.Fatalf("%s has no record in AUDIT at start", pk.Person)
		}
		// make run's example people have their dlqctl key, registered.
		kf, err := decision.ReadKeyFile(s.KeyFile(pk.Person))
		if err != nil {
			t.Fatalf("%s: %v", pk.Person, err)
		}
		if len(e.Keys.Keys) != 1 || e.Keys.Keys[0].ID != kf.KeyID {
			t.Fatalf("%s's record at start: %+v, key file %s", pk.Person, e.Keys, kf.KeyID)
		}
	}
	count := func() int {
		n := 0
		err := streams.ReadSubject(ctx, js, subjects.AuditStream, decision.PeopleAll, func(*jetstream.RawStreamMsg) error { n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()

	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := decision.Ed25519Key(decision.KeyID(pub), "Laptop „陈伟“ <büro> & co")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func(*access.Secrets) error
		person string
		want   func(api.PersonKeys) error
	}{
		{name: "key added", person: "chen.wei", change: func(sec *access.Secrets) error { return sec.AddKey("chen.wei", key, "root") },
			want: func(pk api.PersonKeys) error {
				// The example key make run gave chen.wei, and the new one.
				if pk.Event != access.EventKeyAdded || pk.By != "root" || len(pk.Keys) != 2 || pk.Keys[1].ID != key.ID || pk.Keys[1].RevokedAt != nil {
					return fmt.Errorf("%+v", pk)
				}
				return nil
			}},
		{name: "role granted", person: "chen.wei", change: func(sec *access.Secrets) error {
			_, err := sec.Grant("chen.wei", access.RoleOperator, "root", access.WithBcryptCost(access.MinBcryptCost))
			return err
		}, want: func(pk api.PersonKeys) error {
			if pk.Event != access.EventGranted || !slices.Equal(pk.Roles, []string{"approver", "operator"}) || len(pk.Keys) != 2 {
				return fmt.Errorf("%+v", pk)
			}
			return nil
		}},
		{name: "key revoked", person: "chen.wei", change: func(sec *access.Secrets) error { _, err := sec.RevokeKey("chen.wei", key.ID, "root"); return err },
			want: func(pk api.PersonKeys) error {
				if pk.Event != access.EventKeyRevoked || len(pk.Keys) != 2 || pk.Keys[0].RevokedAt != nil || pk.Keys[1].RevokedAt == nil {
					return fmt.Errorf("%+v", pk)
				}
				return nil
			}},
		{name: "person disabled", person: "jonas.mueller", change: func(sec *access.Secrets) error { _, err := sec.SetDisabled("jonas.mueller", true, "root"); return err },
			want: func(pk api.PersonKeys) error {
				if pk.Event != access.EventDisabled || !pk.Disabled || len(pk.Roles) != 0 {
					return fmt.Errorf("%+v", pk)
				}
				return nil
			}},
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			changePeople(t, path, st.change)
			natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
				e, ok := latest()[st.person]
				if !ok {
					return fmt.Errorf("no record of %s", st.person)
				}
				return st.want(e.Keys)
			})
			if got, want := count(), before+i+1; got != want {
				t.Fatalf("%d people records in AUDIT, want %d: one per change", got, want)
			}
		})
	}
}
