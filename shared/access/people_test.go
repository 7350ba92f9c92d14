package access_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/natstest"
)

var cheap = access.WithBcryptCost(access.MinBcryptCost)

func newSecrets(t *testing.T) *access.Secrets {
	t.Helper()
	sec, err := access.NewSecrets(access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func render(t *testing.T, sec *access.Secrets) string {
	t.Helper()
	text, err := access.ServerConfig(sec)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestDefaultPeopleAreIndividuals: make run's people are named people, at
// least two operators and two approvers, one role each; no user is named
// after a role but the all-parties publisher.
func TestDefaultPeopleAreIndividuals(t *testing.T) {
	count := map[access.Role]int{}
	for _, p := range access.DefaultPeople() {
		count[p.Role]++
		if p.Role != access.RolePublisher && (p.Name == string(p.Role) || !access.ValidPersonName(p.Name) || p.DisplayName == "") {
			t.Errorf("default person %+v: want a person's name and a display name", p)
		}
	}
	for r, atLeast := range map[access.Role]int{access.RoleOperator: 2, access.RoleApprover: 2, access.RoleViewer: 1, access.RoleInspector: 1, access.RolePolicy: 1, access.RolePublisher: 4} {
		if count[r] < atLeast {
			t.Errorf("%d default people of role %s, want at least %d", count[r], r, atLeast)
		}
	}
	if ops := access.DefaultPersonsOf(access.RoleOperator); len(ops) < 2 || ops[0] != access.DefaultPerson(access.RoleOperator) {
		t.Errorf("operators %v", ops)
	}
	if _, err := access.ServerConfig(newSecrets(t)); err != nil {
		t.Fatal(err)
	}
}

// TestPeopleChanges: each change to the people, good or refused, one row.
func TestPeopleChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(*access.Secrets) error
		want   error
	}{
		{"add an operator", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "bob.schneider", DisplayName: "Bob Schneider <Großhandel & Söhne>", Role: access.RoleOperator}, "admin", cheap)
		}, nil},
		{"add a publisher of one party", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "pharmacie-st-etienne", Role: access.RolePublisher, Parties: access.Parties{"pharmacy": {"BS1234563"}}}, "admin", cheap)
		}, nil},
		{"a name in upper case", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "Bob", Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrPersonName},
		{"a non-ASCII name", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "jonas.müller", Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrPersonName},
		{"a name with a wildcard", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "eve.>", Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrPersonName},
		{"two dots", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "eve..x", Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrPersonName},
		{"65 characters", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: strings.Repeat("a", 65), Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrPersonName},
		{"a publisher with a dot", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "pub.x", Role: access.RolePublisher}, "admin", cheap)
		}, access.ErrPublisherName},
		{"the same person in a second role", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: access.DefaultPerson(access.RoleOperator), Role: access.RoleApprover}, "admin", cheap)
		}, access.ErrPersonExists},
		{"a service's name", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: access.Redriver, Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrPersonExists},
		{"the monitor's name", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: access.Monitor, Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrPersonExists},
		{"an inbox inside another's", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "amara_okafor", Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrInboxClash},
		{"an unknown role", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "eve", Role: "admin"}, "admin", cheap)
		}, access.ErrRole},
		{"a display name with a terminal escape", func(s *access.Secrets) error {
			return s.AddPerson(access.Person{Name: "eve", DisplayName: "Eve\x1b[2J", Role: access.RoleViewer}, "admin", cheap)
		}, access.ErrDisplayName},
		{"disable no one", func(s *access.Secrets) error {
			_, err := s.SetDisabled("nobody", true, "admin")
			return err
		}, access.ErrNoPerson},
		{"rotate no one", func(s *access.Secrets) error { return s.Rotate("nobody", "admin", cheap) }, access.ErrNoPerson},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sec := newSecrets(t)
			before := render(t, sec)
			err := tc.change(sec)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			after := render(t, sec)
			if tc.want != nil && after != before {
				t.Error("a refused change changed the configuration")
			}
			if tc.want == nil && after == before {
				t.Error("an accepted change did not change the configuration")
			}
		})
	}
}

// changedLines returns the lines of b that differ from a's (same line
// count) and whether the counts match.
func changedLines(a, b string) ([]int, bool) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al) != len(bl) {
		return nil, false
	}
	var out []int
	for i := range al {
		if al[i] != bl[i] {
			out = append(out, i)
		}
	}
	return out, true
}

// TestRotateTouchesOnlyThePerson: rotating Jonas changes his password and
// the one configuration line of his hash; Amara's secret and every other
// user's line stay as they were. Disabling him moves his user into the
// disabled account, changing no other account.
func TestRotateTouchesOnlyThePerson(t *testing.T) {
	sec := newSecrets(t)
	jonas, amara := access.DefaultPersonsOf(access.RoleOperator)[1], access.DefaultPerson(access.RoleOperator)
	before, users := render(t, sec), maps(sec.Users)
	if err := sec.Rotate(jonas, "admin", cheap); err != nil {
		t.Fatal(err)
	}
	after := render(t, sec)
	for name, s := range users {
		if changed := sec.Users[name] != s; changed != (name == jonas) {
			t.Errorf("secret of %s changed: %v", name, changed)
		}
	}
	lines, same := changedLines(before, after)
	al := strings.Split(after, "\n")
	if !same || len(lines) != 1 || !strings.Contains(al[lines[0]], `"password": "$2`) || !strings.Contains(al[lines[0]-1], `"user": "`+jonas+`"`) {
		t.Fatalf("rotating %s changed lines %v (same count %v), want only his password hash", jonas, lines, same)
	}
	if sec.Users[amara] != users[amara] {
		t.Error("Amara's secret changed")
	}
	if p, _ := sec.Person(jonas); len(p.History) != 1 || p.History[0].Event != access.EventRotated || p.History[0].By != "admin" {
		t.Errorf("history %+v", p.History)
	}

	if changed, err := sec.SetDisabled(jonas, true, "admin"); err != nil || !changed {
		t.Fatal(changed, err)
	}
	// His user moves to the disabled account, where it may only ask who
	// it is; every other account is as it was.
	disabled := render(t, sec)
	var was, is struct {
		Accounts map[string]struct {
			JetStream string           `json:"jetstream"`
			Users     []map[string]any `json:"users"`
			Exports   any              `json:"exports"`
			Imports   any              `json:"imports"`
		} `json:"accounts"`
	}
	if err := json.Unmarshal([]byte(after), &was); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(disabled), &is); err != nil {
		t.Fatal(err)
	}
	off := is.Accounts[access.DisabledAccount]
	if len(off.Users) != 1 || off.Users[0]["user"] != jonas || off.Users[0]["password"] != sec.Users[jonas].Bcrypt {
		t.Fatalf("the disabled account's users: %v", off.Users)
	}
	perms, _ := json.Marshal(off.Users[0]["permissions"])
	if want := `{"publish":{"allow":["` + access.UserInfoSubject + `"]},"subscribe":{"allow":["` + access.InboxPrefix(jonas) + `.\u003e"]}}`; string(perms) != want {
		t.Errorf("his permissions %s, want %s", perms, want)
	}
	if n := strings.Count(disabled, `"`+jonas+`"`); n != 1 {
		t.Errorf("%s named %d times in the configuration", jonas, n)
	}
	for name, acc := range was.Accounts {
		if name == access.DisabledAccount {
			continue
		}
		now := is.Accounts[name]
		var kept []map[string]any
		for _, u := range acc.Users {
			if u["user"] != jonas {
				kept = append(kept, u)
			}
		}
		a, _ := json.Marshal([]any{acc.JetStream, kept, acc.Exports, acc.Imports})
		b, _ := json.Marshal([]any{now.JetStream, now.Users, now.Exports, now.Imports})
		if !bytes.Equal(a, b) && !(len(kept) == 0 && len(now.Users) == 0) {
			t.Errorf("disabling %s changed the account %s", jonas, name)
		}
	}
	if changed, _ := sec.SetDisabled(jonas, true, "admin"); changed {
		t.Error("disabling twice changed something")
	}
	if _, err := sec.SetDisabled(jonas, false, "admin"); err != nil || render(t, sec) != after {
		t.Errorf("enabling %s did not restore the configuration: %v", jonas, err)
	}
}

func maps(m map[string]access.Secret) map[string]access.Secret {
	out := make(map[string]access.Secret, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestDisabledPersonCannotConnect runs a real server on the generated
// configuration: a disabled person's open connection is closed by the
// configuration reload (his user moved to the disabled account) and a new
// one is told he is disabled (TestDisabledPersonIsToldSo: and can do
// nothing else), while the others stay connected; enabled again, the person connects; a rotated password
// closes the person's connection and only the new password works.
func TestDisabledPersonCannotConnect(t *testing.T) {
	sec := newSecrets(t)
	cfg := embedded.Config{ConfigText: render(t, sec)}
	srv := natstest.StartConfig(t, cfg)
	amara, jonas := access.DefaultPerson(access.RoleOperator), access.DefaultPersonsOf(access.RoleOperator)[1]
	connect := func(user string, s *access.Secrets) (*nats.Conn, error) {
		return nats.Connect(srv.ClientURL(), append(s.NATSOptions(user), nats.NoReconnect(), nats.Name("people-test-"+user))...)
	}
	mustConnect := func(user string) *nats.Conn {
		nc, err := connect(user, sec)
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	reload := func() {
		t.Helper()
		c := cfg
		c.ConfigText, c.StoreDir = render(t, sec), srv.StoreDir
		if err := embedded.Reload(srv.Server, c); err != nil {
			t.Fatal(err)
		}
	}
	closed := func(nc *nats.Conn) func() error {
		return func() error {
			if !nc.IsClosed() {
				return errors.New("still connected")
			}
			return nil
		}
	}
	toldDisabled := func(user string) {
		t.Helper()
		nc := mustConnect(user)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if disabled, err := access.Disabled(ctx, nc); err != nil || !disabled {
			t.Fatalf("%s: disabled %v, %v", user, disabled, err)
		}
		nc.Close()
	}
	refused := func(user string, s *access.Secrets) {
		t.Helper()
		nc, err := connect(user, s)
		if err == nil {
			nc.Close()
			t.Fatalf("%s connected", user)
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Fatalf("connect as %s: %v, want an authorization violation", user, err)
		}
	}
	a, j := mustConnect(amara), mustConnect(jonas)

	if _, err := sec.SetDisabled(jonas, true, "admin"); err != nil {
		t.Fatal(err)
	}
	reload()
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, closed(j))
	toldDisabled(jonas)
	if err := a.Flush(); err != nil || a.IsClosed() {
		t.Fatalf("Amara's connection after Jonas was disabled: %v", err)
	}

	if _, err := sec.SetDisabled(jonas, false, "admin"); err != nil {
		t.Fatal(err)
	}
	reload()
	mustConnect(jonas)

	old := access.Secrets{Users: maps(sec.Users)}
	if err := sec.Rotate(amara, "admin", cheap); err != nil {
		t.Fatal(err)
	}
	reload()
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, closed(a))
	refused(amara, &old)
	mustConnect(amara)

	// A role with every person disabled is an account without users: the
	// server takes it, and everyone of that role is told they are
	// disabled.
	for _, name := range access.DefaultPersonsOf(access.RoleOperator) {
		if _, err := sec.SetDisabled(name, true, "admin"); err != nil {
			t.Fatal(err)
		}
	}
	reload()
	toldDisabled(amara)
	mustConnect(access.DefaultPerson(access.RoleViewer))
}

// TestLegacyCredentials: credentials of an earlier version (one user per
// role) keep their role users, which still connect; MigrateLegacy (what
// `make run` does) adds the named people beside them, once; a kit's
// secrets are not migrated.
func TestLegacyCredentials(t *testing.T) {
	var legacy []access.Person
	for _, r := range access.Roles {
		legacy = append(legacy, access.Person{Name: string(r), Role: r})
	}
	path := filepath.Join(t.TempDir(), "credentials.json")
	first, err := access.LoadOrCreate(path, legacy, cheap)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.People) != len(legacy) || sec.Users["operator"] != first.Users["operator"] {
		t.Fatalf("loading changed the people of an earlier version: %+v", sec.People)
	}
	changed, err := sec.MigrateLegacy(cheap)
	if err != nil || !changed {
		t.Fatalf("migrate: %v, %v", changed, err)
	}
	for _, p := range access.DefaultPeople() {
		got, ok := sec.Person(p.Name)
		if !ok || got.Role != p.Role || got.Disabled {
			t.Errorf("after migration %s is %+v", p.Name, got)
		}
	}
	if again, _ := sec.MigrateLegacy(cheap); again {
		t.Error("a second migration changed the people")
	}
	if err := sec.Save(path); err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartConfig(t, embedded.Config{ConfigText: render(t, sec)})
	for _, user := range []string{"operator", "approver", access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleApprover)} {
		nc, err := nats.Connect(srv.ClientURL(), sec.NATSOptions(user)...)
		if err != nil {
			t.Fatalf("%s cannot connect after the migration: %v", user, err)
		}
		nc.Close()
	}
	// Once the role users are disabled, nothing is migrated again.
	for _, r := range access.Roles {
		if r != access.RolePublisher {
			if _, err := sec.SetDisabled(string(r), true, "admin"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if again, _ := sec.MigrateLegacy(cheap); again {
		t.Error("migrated again after the role users were disabled")
	}
	// Secrets without role users are left alone.
	if changed, _ := newSecrets(t).MigrateLegacy(cheap); changed {
		t.Error("migrated a file without role users")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file: %v, %v", fi, err)
	}
}

// TestEarlierNames: a person of a file written before names were checked
// (an e-mail address) still renders, with an inbox of one token; a name
// with a space or a control character never does.
func TestEarlierNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"alice@example.com", true},
		{"Jonas.Mueller", true},
		{"jonas müller", false},
		{"eve\n", false},
		{"", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec := newSecrets(t)
			sec.People = append(sec.People, access.Person{Name: tc.name, Role: access.RoleViewer})
			sec.Users[tc.name] = sec.Users[access.DefaultPerson(access.RoleViewer)]
			_, err := access.ServerConfig(sec)
			if (err == nil) != tc.ok {
				t.Fatalf("ServerConfig: %v, want ok %v", err, tc.ok)
			}
			if tc.ok && strings.Count(access.InboxPrefix(tc.name), ".") != 1 {
				t.Errorf("inbox prefix %q is more than one token", access.InboxPrefix(tc.name))
			}
		})
	}
}
