package access_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestPersonOf: a role login is its person's; any other user is its own
// person, an earlier file's e-mail address with a '+' included.
func TestPersonOf(t *testing.T) {
	tests := []struct{ user, person string }{
		{"amara.okafor", "amara.okafor"},
		{"amara.okafor+approver", "amara.okafor"},
		{"chen.wei+inspector", "chen.wei"},
		{"amara.okafor.approver", "amara.okafor.approver"},
		{"amara+ops@example.com", "amara+ops@example.com"},
		{"publisher+publisher", "publisher+publisher"},
		{"+approver", "+approver"},
		{"operator", "operator"},
	}
	for _, tc := range tests {
		t.Run(tc.user, func(t *testing.T) {
			if got := access.PersonOf(tc.user); got != tc.person {
				t.Fatalf("PersonOf(%q) = %q, want %q", tc.user, got, tc.person)
			}
		})
	}
	if !access.SamePerson("amara.okafor", "amara.okafor+approver") || access.SamePerson("amara.okafor", "amara.okafor.approver") || access.SamePerson("", "") {
		t.Fatal("SamePerson")
	}
}

// TestOneIdentityPerPerson: a person holds roles, never a second
// identity: add refuses one by the person's name (display name, or a user
// name extending theirs), grant gives a role login of the same person,
// once per role, and disabling the person disables every login of theirs.
func TestOneIdentityPerPerson(t *testing.T) {
	amara := access.DefaultPerson(access.RoleOperator)
	tests := []struct {
		name   string
		change func(*access.Secrets) error
		want   error
	}{
		{"a second user named after her", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: amara + ".approver", Role: access.RoleApprover}, "admin", cheap)
		}, access.ErrSecondIdentity},
		{"a second user with her display name", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "a.okafor", DisplayName: "  amara   OKAFOR ", Role: access.RoleApprover}, "admin", cheap)
		}, access.ErrSecondIdentity},
		{"a second user with Chen's name in Chinese too", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "wei.chen", DisplayName: "Chen Wei (陈伟)", Role: access.RoleOperator}, "admin", cheap)
		}, access.ErrSecondIdentity},
		{"another person of the same name, said so", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "chen.wei2", DisplayName: "Chen Wei (陈伟)", Role: access.RoleOperator}, "admin", cheap, access.DistinctPerson())
		}, nil},
		{"grant her the approver role", func(s *access.Secrets) error {
			_, err := s.Grant(amara, access.RoleApprover, "admin", cheap)
			return err
		}, nil},
		{"grant her the role she has", func(s *access.Secrets) error {
			_, err := s.Grant(amara, access.RoleOperator, "admin", cheap)
			return err
		}, access.ErrHasRole},
		{"grant a publisher role", func(s *access.Secrets) error {
			_, err := s.Grant(amara, access.RolePublisher, "admin", cheap)
			return err
		}, access.ErrRole},
		{"grant a role to a publisher", func(s *access.Secrets) error {
			_, err := s.Grant("publisher", access.RoleViewer, "admin", cheap)
			return err
		}, access.ErrRole},
		{"grant to no one", func(s *access.Secrets) error {
			_, err := s.Grant("nobody", access.RoleViewer, "admin", cheap)
			return err
		}, access.ErrNoPerson},
		{"grant to a role login", func(s *access.Secrets) error {
			login, err := s.Grant(amara, access.RoleApprover, "admin", cheap)
			if err != nil {
				return err
			}
			_, err = s.Grant(login, access.RoleViewer, "admin", cheap)
			return err
		}, access.ErrNoPerson},
		{"a role login written by hand for no person", func(s *access.Secrets) error {
			s.People = append(s.People, access.Person{Name: access.RoleLogin("eve", access.RoleApprover), Role: access.RoleApprover})
			_, err := access.ServerConfig(s)
			return err
		}, access.ErrPersonID},
		{"a person id written by hand", func(s *access.Secrets) error {
			s.People = append(s.People, access.Person{Name: "eve", PersonID: "amara.okafor", Role: access.RoleViewer})
			_, err := access.ServerConfig(s)
			return err
		}, access.ErrPersonID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sec := newSecrets(t)
			if err := tc.change(sec); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}

	// Granted, the login is the same person, in the approvers' account;
	// disabling Amara disables both; enabling names one user.
	sec := newSecrets(t)
	login, err := sec.Grant(amara, access.RoleApprover, "admin", cheap)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := sec.Person(login)
	if !ok || p.PersonID != amara || p.Role != access.RoleApprover || p.DisplayName != "Amara Okafor" || !access.SamePerson(login, amara) {
		t.Fatalf("granted login %+v", p)
	}
	if changed, err := sec.SetDisabled(amara, true, "admin"); err != nil || !changed {
		t.Fatal(changed, err)
	}
	for _, name := range []string{amara, login} {
		if p, _ := sec.Person(name); !p.Disabled {
			t.Errorf("%s not disabled with the person", name)
		}
	}
	if _, err := sec.SetDisabled(amara, false, "admin"); err != nil {
		t.Fatal(err)
	}
	if p, _ := sec.Person(login); !p.Disabled {
		t.Error("enabling the person enabled her role login too")
	}
}

// TestRoleLoginConnects: a granted role login connects to the server,
// in its role's account, and the server attests it as that user (the
// name a service compares by person).
func TestRoleLoginConnects(t *testing.T) {
	sec := newSecrets(t)
	amara := access.DefaultPerson(access.RoleOperator)
	login, err := sec.Grant(amara, access.RoleApprover, "admin", cheap)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartConfig(t, embedded.Config{ConfigText: render(t, sec)})
	svc := srv.Connect(t, sec.NATSOptions(access.Auditor)...)
	// An endpoint of the approvers' import answering who called.
	m, err := micro.AddService(svc, micro.Config{Name: "whoami", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	subject := api.AuditWhoami
	if err := m.AddEndpoint("who", micro.HandlerFunc(func(r micro.Request) {
		id, err := access.CallerOf(nats.Header(r.Headers()))
		if err != nil {
			_ = r.Error("403", err.Error(), nil)
			return
		}
		_ = r.RespondJSON(id)
	}), micro.WithEndpointSubject(subject)); err != nil {
		t.Fatal(err)
	}
	nc := srv.Connect(t, sec.NATSOptions(login)...)
	var id access.Identity
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		rep, err := nc.Request(subject, []byte(`{}`), 2*time.Second)
		if err != nil {
			return err
		}
		return json.Unmarshal(rep.Data, &id)
	})
	if id.User != login || id.Role != access.RoleApprover || access.PersonOf(id.User) != amara {
		t.Fatalf("the server attests %+v", id)
	}
}

// TestPersonIDOnLoad: a credentials file written before person ids gets
// one per user on load (a legacy role user its own), and keeps them.
func TestPersonIDOnLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials.json")
	legacy := []access.Person{{Name: "operator", Role: access.RoleOperator}, {Name: "amara.okafor", Role: access.RoleOperator},
		{Name: "amara.okafor.approver", DisplayName: "Amara Okafor", Role: access.RoleApprover}}
	sec, err := access.NewSecrets(legacy, cheap)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sec.People {
		sec.People[i].PersonID = ""
	}
	if err := sec.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got.People {
		if p.PersonID != p.Name {
			t.Errorf("%s: person id %q, want its own", p.Name, p.PersonID)
		}
	}
	b, _ := os.ReadFile(path)
	var onDisk access.Secrets
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.People[0].PersonID != "operator" {
		t.Fatalf("person ids not kept in the file: %v", err)
	}
	if other, ok := got.SecondIdentityOf(got.People[2]); !ok || other != "amara.okafor" {
		t.Errorf("amara.okafor.approver not flagged as a second identity of amara.okafor: %q", other)
	}
}

// TestRehash: hashes made at a higher cost than PasswordHashCost (an
// earlier version's, at bcrypt's default 10; one above here, cheaper under
// the race detector) are made again at PasswordHashCost with the same
// passwords, once.
func TestRehash(t *testing.T) {
	sec, err := access.NewSecrets([]access.Person{{Name: "jonas.mueller", DisplayName: "Jonas Müller", Role: access.RoleOperator}},
		access.WithBcryptCost(access.PasswordHashCost+1))
	if err != nil {
		t.Fatal(err)
	}
	before := maps(sec.Users)
	if changed, err := sec.Rehash(); err != nil || !changed {
		t.Fatalf("Rehash = %v, %v; want a change", changed, err)
	}
	for name, s := range sec.Users {
		if s.Password == "" {
			if s != before[name] {
				t.Errorf("%s: a service's secret changed", name)
			}
			continue
		}
		c, err := bcrypt.Cost([]byte(s.Bcrypt))
		if err != nil || c != access.PasswordHashCost || s.Password != before[name].Password ||
			bcrypt.CompareHashAndPassword([]byte(s.Bcrypt), []byte(s.Password)) != nil {
			t.Errorf("%s: cost %d (%v), password kept %v", name, c, err, s.Password == before[name].Password)
		}
	}
	if changed, err := sec.Rehash(); err != nil || changed {
		t.Fatalf("a second Rehash = %v, %v; want nothing", changed, err)
	}
}
