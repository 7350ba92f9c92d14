package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
)

var cheap = access.WithBcryptCost(access.MinBcryptCost)

func init() {
	// Cheap hashes for what the command generates: the race detector
	// makes a default-cost bcrypt check take seconds.
	secretOptions = []access.Option{cheap}
}

func people(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runPeople(args, &out)
	return out.String(), err
}

func mustPeople(t *testing.T, args ...string) string {
	t.Helper()
	out, err := people(t, args...)
	if err != nil {
		t.Fatalf("deadletter people %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestPeopleDataDir: on a `make run` data directory the command lists the
// people, adds one (flags after the name too), rotates and disables one
// without touching the others' secrets, and refuses what it must.
func TestPeopleDataDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stack.CredentialsFile)
	orig, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	amara, jonas := access.DefaultPerson(access.RoleOperator), access.DefaultPersonsOf(access.RoleOperator)[1]

	ls := mustPeople(t, "ls", "--data-dir", dir)
	for _, want := range []string{"NAME", amara, "Jonas Müller", "Chen Wei (陈伟)", "publisher-bw4829137", "operator"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls lacks %q:\n%s", want, ls)
		}
	}
	out := mustPeople(t, "add", "bob.schneider", "--data-dir", dir, "--role", "operator", "--display-name", "Bob Schneider <Müller & Söhne>")
	if !strings.Contains(out, "added: bob.schneider (operator)") || !strings.Contains(out, "within seconds") {
		t.Errorf("add says:\n%s", out)
	}
	mustPeople(t, "rotate", jonas, "--data-dir", dir)
	mustPeople(t, "disable", jonas, "--data-dir", dir)
	if out := mustPeople(t, "disable", jonas, "--data-dir", dir); !strings.Contains(out, "already disabled") {
		t.Errorf("second disable says %q", out)
	}
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range orig.Users {
		if changed := sec.Users[name] != s; changed != (name == jonas) {
			t.Errorf("secret of %s changed: %v", name, changed)
		}
	}
	if p, _ := sec.Person(jonas); !p.Disabled || len(p.History) != 2 {
		t.Errorf("jonas: %+v", p)
	}
	if p, ok := sec.Person("bob.schneider"); !ok || p.Role != access.RoleOperator || p.DisplayName != "Bob Schneider <Müller & Söhne>" || sec.Users["bob.schneider"].Password == "" {
		t.Errorf("bob: %+v", p)
	}
	if ls := mustPeople(t, "ls", "--data-dir", dir); !strings.Contains(ls, "disabled") || !strings.Contains(ls, "Bob Schneider <Müller & Söhne>") {
		t.Errorf("ls after the changes:\n%s", ls)
	}

	refusals := []struct {
		name string
		args []string
		want error
	}{
		{"no action", nil, errPeopleUsage},
		{"unknown action", []string{"remove", amara, "--data-dir", dir}, errPeopleUsage},
		{"no name", []string{"rotate", "--data-dir", dir}, errPeopleUsage},
		{"a role on rotate", []string{"rotate", amara, "--role", "approver", "--data-dir", dir}, errPeopleUsage},
		{"a name taken in another role", []string{"add", amara, "--role", "approver", "--data-dir", dir}, access.ErrPersonExists},
		{"a name never reused", []string{"add", jonas, "--role", "operator", "--data-dir", dir}, access.ErrPersonExists},
		{"an unknown role", []string{"add", "eve", "--role", "root", "--data-dir", dir}, access.ErrRole},
		{"an unknown person", []string{"enable", "nobody", "--data-dir", dir}, access.ErrNoPerson},
		{"no data directory", []string{"ls", "--data-dir", filepath.Join(dir, "none")}, fs.ErrNotExist},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(path)
			if _, err := people(t, tc.args...); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("a refused command changed the credentials")
			}
		})
	}
}

// TestPeopleKit: on a kit, rotating Jonas regenerates the node files with
// only his hash line changed and his password file; Amara's password file
// and every other line stay; disabling him removes his password and
// context files and his lines.
func TestPeopleKit(t *testing.T) {
	dir := t.TempDir()
	o := kit.Cluster(3)
	o.ListenHost = "127.0.0.1"
	for i := range o.Nodes {
		o.Nodes[i].Host = "127.0.0.1"
		o.Nodes[i].ClientPort += i
		o.Nodes[i].ClusterPort += i
		o.Nodes[i].HTTPPort += i
	}
	sec, err := kit.LoadSecrets(dir, cheap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kit.Generate(dir, sec, o); err != nil {
		t.Fatal(err)
	}
	amara, jonas := access.DefaultPerson(access.RoleOperator), access.DefaultPersonsOf(access.RoleOperator)[1]
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	node := filepath.Join(kit.NodesDir, "n2", kit.ServerConfFile)
	conf, amaraPW, jonasPW := read(node), read("passwords/"+amara), read("passwords/"+jonas)

	out := mustPeople(t, "rotate", jonas, "--kit", dir)
	if !strings.Contains(out, "regenerated the kit") || !strings.Contains(out, "reload") {
		t.Errorf("rotate on a kit says:\n%s", out)
	}
	if read("passwords/"+amara) != amaraPW || read("passwords/"+jonas) == jonasPW {
		t.Error("rotating Jonas changed Amara's password file, or not his")
	}
	before, after := strings.Split(conf, "\n"), strings.Split(read(node), "\n")
	if len(before) != len(after) {
		t.Fatalf("rotation changed the line count of %s", node)
	}
	// The file's keys are sorted: a user's password line comes before its
	// permissions and its "user" line.
	var changed []string
	for i := range before {
		if before[i] == after[i] {
			continue
		}
		user := ""
		for _, l := range after[i:] {
			if strings.Contains(l, `"user": `) {
				user = strings.TrimSpace(l)
				break
			}
		}
		changed = append(changed, strings.TrimSpace(after[i])+" of "+user)
	}
	if len(changed) != 1 || !strings.Contains(changed[0], `"password": "$2`) || !strings.HasSuffix(changed[0], `"user": "`+jonas+`"`) {
		t.Errorf("rotating Jonas changed %d lines of %s: %v", len(changed), node, changed)
	}

	mustPeople(t, "disable", jonas, "--kit", dir)
	for _, rel := range []string{"passwords/" + jonas, "contexts/" + jonas + ".json"} {
		if _, err := os.Stat(filepath.Join(dir, rel)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after disabling Jonas: %v", rel, err)
		}
	}
	// Jonas stays a user only of the disabled account, which can do
	// nothing but tell him he is disabled (access.DisabledAccount).
	opts, err := server.ProcessConfigFile(filepath.Join(dir, node))
	if err != nil {
		t.Fatal(err)
	}
	accountOf := map[string]string{}
	for _, u := range opts.Users {
		accountOf[u.Username] = u.Account.Name
	}
	if accountOf[jonas] != access.DisabledAccount || accountOf[amara] != access.RoleAccount(access.RoleOperator) {
		t.Errorf("after disabling Jonas, his account %q and Amara's %q", accountOf[jonas], accountOf[amara])
	}
	m, err := kit.LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := kit.Digest(filepath.Join(dir, node)); err != nil || d != m.Digests["n2"] {
		t.Errorf("the manifest's digest of n2 is not the regenerated file's: %v", err)
	}
}
