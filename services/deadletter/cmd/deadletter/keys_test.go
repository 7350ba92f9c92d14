package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/decision"
)

// TestPeopleKey: `people key add` registers a person's dlqctl public key
// in the people file, `people key revoke` revokes it, `people ls` counts
// them; bad input is a clear error and changes nothing.
func TestPeopleKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stack.CredentialsFile)
	if _, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap); err != nil {
		t.Fatal(err)
	}
	// A key id is base64url: one in 64 begins with '-', which the command
	// must take for the id it is, not a flag. The test's key is one.
	var id string
	for !strings.HasPrefix(id, "-") {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id = decision.KeyID(pub)
	}
	steps := []struct {
		name string
		args []string
		want string // in the output
		err  error
	}{
		{name: "add", args: []string{"key", "add", "chen.wei", "--ed25519", id, "--label", "Laptop <Müller & Söhne> „陈伟“", "--data-dir", dir},
			want: "registered ed25519 key " + id + " for chen.wei"},
		{name: "the same key again", args: []string{"key", "add", "chen.wei", "--ed25519", id, "--data-dir", dir}, err: access.ErrKeyExists},
		{name: "not a key", args: []string{"key", "add", "chen.wei", "--ed25519", "<Müller & Söhne>", "--data-dir", dir}, err: decision.ErrKeyText},
		{name: "no key", args: []string{"key", "add", "chen.wei", "--data-dir", dir}, err: errPeopleUsage},
		{name: "both kinds", args: []string{"key", "add", "chen.wei", "--ed25519", id, "--passkey", "x", "--data-dir", dir}, err: errPeopleUsage},
		{name: "not a passkey registration", args: []string{"key", "add", "chen.wei", "--passkey", "passkey:<Müller & Söhne>", "--data-dir", dir}, err: decision.ErrRegistration},
		{name: "a publisher", args: []string{"key", "add", "publisher", "--ed25519", decision.KeyID([]byte(strings.Repeat("p", 32))), "--data-dir", dir}, err: access.ErrRole},
		{name: "nobody", args: []string{"key", "add", "陈伟", "--ed25519", decision.KeyID(make([]byte, 32)), "--data-dir", dir}, err: access.ErrNoPerson},
		{name: "an unknown word", args: []string{"key", "rotate", "chen.wei", "--data-dir", dir}, err: errPeopleUsage},
		{name: "revoke", args: []string{"key", "revoke", "chen.wei", id, "--data-dir", dir}, want: "revoked chen.wei's key " + id},
		{name: "revoke again", args: []string{"key", "revoke", "chen.wei", id, "--data-dir", dir}, want: "already revoked"},
		{name: "revoke an unknown key", args: []string{"key", "revoke", "chen.wei", "nope", "--data-dir", dir}, err: access.ErrNoKey},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			out, err := people(t, st.args...)
			if st.err == nil && err != nil || st.err != nil && !errors.Is(err, st.err) {
				t.Fatalf("people %s: %v, want %v\n%s", strings.Join(st.args, " "), err, st.err, out)
			}
			if !strings.Contains(out, st.want) {
				t.Fatalf("output lacks %q:\n%s", st.want, out)
			}
		})
	}
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := sec.Person("chen.wei")
	if len(p.Keys) != 1 || p.Keys[0].RevokedAt == nil || p.Keys[0].Label != "Laptop <Müller & Söhne> „陈伟“" {
		t.Fatalf("chen.wei's keys: %+v", p.Keys)
	}
	if ls := mustPeople(t, "ls", "--data-dir", dir); !strings.Contains(ls, "KEYS") || !strings.Contains(ls, "0 (+1 revoked)") {
		t.Fatalf("ls does not count the keys:\n%s", ls)
	}
}
