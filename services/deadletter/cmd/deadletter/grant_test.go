package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
)

// TestPeopleOneIdentity: `people add` refuses a second identity of an
// existing person (by the person's name, not the user name) and says how
// to grant the role; `people grant` gives the role to the same person;
// `--new-person` adds another person of the same name.
func TestPeopleOneIdentity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stack.CredentialsFile)
	if _, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap); err != nil {
		t.Fatal(err)
	}
	amara := access.DefaultPerson(access.RoleOperator)
	refusals := []struct {
		name string
		args []string
		want error
	}{
		{"her approver user", []string{"add", amara + ".approver", "--role", "approver", "--data-dir", dir}, access.ErrSecondIdentity},
		{"her display name", []string{"add", "a.okafor", "--role", "approver", "--display-name", "Amara Okafor", "--data-dir", dir}, access.ErrSecondIdentity},
		{"grant without a role", []string{"grant", amara, "--data-dir", dir}, errPeopleUsage},
		{"grant the role she has", []string{"grant", amara, "--role", "operator", "--data-dir", dir}, access.ErrHasRole},
		{"grant to no one", []string{"grant", "nobody", "--role", "viewer", "--data-dir", dir}, access.ErrNoPerson},
		{"--new-person on rotate", []string{"rotate", amara, "--new-person", "--data-dir", dir}, errPeopleUsage},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(path)
			out, err := people(t, tc.args...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if errors.Is(err, access.ErrSecondIdentity) && !strings.Contains(err.Error(), "people grant "+amara) {
				t.Errorf("the refusal does not say how to grant the role: %v", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Errorf("a refused command changed the credentials:\n%s", out)
			}
		})
	}
	out := mustPeople(t, "grant", amara, "--role", "approver", "--data-dir", dir)
	login := access.RoleLogin(amara, access.RoleApprover)
	if !strings.Contains(out, "granted: "+login+" (approver)") || !strings.Contains(out, "the same person") {
		t.Errorf("grant says:\n%s", out)
	}
	mustPeople(t, "add", "chen.wei2", "--role", "operator", "--display-name", "Chen Wei (陈伟)", "--new-person", "--data-dir", dir)
	var rows []listed
	if err := json.Unmarshal([]byte(mustPeople(t, "ls", "--json", "--data-dir", dir)), &rows); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, r := range rows {
		switch r.Name {
		case login:
			found++
			if r.PersonID != amara || r.Role != access.RoleApprover || r.DisplayName != "Amara Okafor" {
				t.Errorf("granted login %+v", r.Person)
			}
		case "chen.wei2":
			found++
			if r.PersonID != "chen.wei2" {
				t.Errorf("the other Chen Wei: %+v", r.Person)
			}
		}
	}
	if found != 2 {
		t.Fatalf("ls --json lacks the granted login or the other Chen Wei: %+v", rows)
	}
	if ls := mustPeople(t, "ls", "--data-dir", dir); !strings.Contains(ls, "PERSON") || !strings.Contains(ls, login) {
		t.Errorf("ls:\n%s", ls)
	}
}

// TestPeopleLsShowsWhatIsEnforced: `people ls` marks a change the running
// server has not applied yet (a disable, a rotation, an addition), from
// what the server last applied (stack.AppliedFile), and nothing once it
// is applied.
func TestPeopleLsShowsWhatIsEnforced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stack.CredentialsFile)
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	applied := filepath.Join(dir, stack.AppliedFile)
	if err := access.WriteApplied(applied, access.AppliedOf(sec, access.FileDigest(b), time.Now())); err != nil {
		t.Fatal(err)
	}
	amara, jonas := access.DefaultPerson(access.RoleOperator), access.DefaultPersonsOf(access.RoleOperator)[1]
	if ls := mustPeople(t, "ls", "--data-dir", dir); strings.Contains(ls, "not applied") || strings.Contains(ls, "NOT APPLIED") {
		t.Fatalf("ls before any change:\n%s", ls)
	}
	mustPeople(t, "rotate", amara, "--data-dir", dir)
	mustPeople(t, "disable", jonas, "--data-dir", dir)
	mustPeople(t, "add", "nadia.benali", "--role", "viewer", "--display-name", "Nadia Benali", "--data-dir", dir)
	var rows []listed
	if err := json.Unmarshal([]byte(mustPeople(t, "ls", "--json", "--data-dir", dir)), &rows); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{amara: "previous password still works", jonas: "still connects", "nadia.benali": "cannot connect yet"}
	for _, r := range rows {
		if w, ok := want[r.Name]; ok != (r.Pending != "") || !strings.Contains(r.Pending, w) {
			t.Errorf("%s: pending %q, want %q", r.Name, r.Pending, w)
		}
	}
	if ls := mustPeople(t, "ls", "--data-dir", dir); !strings.Contains(ls, "disabled (NOT APPLIED YET: still connects)") {
		t.Errorf("ls does not mark Jonas:\n%s", ls)
	}
	// Applied (what a running server writes after its reload).
	now, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if err := access.WriteApplied(applied, access.AppliedOf(now, access.FileDigest(b), time.Now())); err != nil {
		t.Fatal(err)
	}
	if ls := mustPeople(t, "ls", "--data-dir", dir); strings.Contains(ls, "not applied") || strings.Contains(ls, "NOT APPLIED") {
		t.Fatalf("ls once applied:\n%s", ls)
	}
}

// TestPeopleGrantKit: on a kit, a granted role login gets its user in
// every node's configuration, its password file and its context; the
// person's other files stay.
func TestPeopleGrantKit(t *testing.T) {
	dir := t.TempDir()
	o := kit.Cluster(3)
	o.ListenHost = "127.0.0.1"
	sec, err := kit.LoadSecrets(dir, cheap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kit.Generate(dir, sec, o); err != nil {
		t.Fatal(err)
	}
	amara := access.DefaultPerson(access.RoleOperator)
	login := access.RoleLogin(amara, access.RoleApprover)
	pw, err := os.ReadFile(filepath.Join(dir, kit.PasswordsDir, amara))
	if err != nil {
		t.Fatal(err)
	}
	mustPeople(t, "grant", amara, "--role", "approver", "--kit", dir)
	for _, rel := range []string{filepath.Join(kit.PasswordsDir, login), filepath.Join(kit.ContextsDir, login+".json")} {
		if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
	for _, n := range o.Nodes {
		b, err := os.ReadFile(filepath.Join(dir, kit.NodesDir, n.Name, kit.ServerConfFile))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"`+login+`"`) {
			t.Errorf("node %s has no user %s", n.Name, login)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(dir, kit.PasswordsDir, amara)); !bytes.Equal(after, pw) {
		t.Error("granting Amara a role changed her password")
	}
}
