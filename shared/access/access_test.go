package access_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestTable checks the shape of the table: unique names, one unrestricted
// admin, every other user denied the protected mutations and the WORM
// provisioning, and quarantine.> allowed to the quarantiner only.
func TestTable(t *testing.T) {
	specs := access.Specs()
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			t.Fatalf("user %s twice", s.Name)
		}
		seen[s.Name] = true
		if s.Doc == "" {
			t.Errorf("%s: no doc", s.Name)
		}
	}
	for _, name := range []string{access.Admin, access.Validator, access.Quarantiner, access.Redriver, access.Auditor, access.Client} {
		if !seen[name] {
			t.Errorf("user %s missing", name)
		}
	}
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			if s.Name == access.Admin {
				if !s.Unrestricted || s.ServerPermissions() != nil {
					t.Fatal("admin must be unrestricted")
				}
				return
			}
			if s.Unrestricted {
				t.Fatal("only the admin is unrestricted")
			}
			var must []string
			for _, stream := range access.ProtectedStreams {
				for _, op := range []string{"UPDATE", "DELETE", "PURGE", "MSG.DELETE"} {
					must = append(must, "$JS.API.STREAM."+op+"."+stream)
				}
			}
			for _, stream := range access.WORMStreams {
				must = append(must, "$JS.API.STREAM.CREATE."+stream, "$JS.API.STREAM.RESTORE."+stream)
			}
			for _, d := range must {
				if !slices.Contains(s.Publish.Deny, d) {
					t.Errorf("publish deny lacks %s", d)
				}
			}
			quarantineDenied := slices.Contains(s.Publish.Deny, subjects.QuarantineAll)
			if quarantineDenied == (s.Name == access.Quarantiner) {
				t.Errorf("quarantine.> denied = %v", quarantineDenied)
			}
			if !slices.Contains(s.Subscribe.Allow, "_INBOX.>") {
				t.Error("cannot receive replies")
			}
		})
	}
}

// TestUsers checks the server users: all of them, with their passwords,
// the no-auth user among them.
func TestUsers(t *testing.T) {
	pw, err := access.NewPasswords()
	if err != nil {
		t.Fatal(err)
	}
	users := access.Users(pw)
	if len(users) != len(access.Names()) {
		t.Fatalf("%d users, want %d", len(users), len(access.Names()))
	}
	found := false
	for _, u := range users {
		if u.Password != pw[u.Username] {
			t.Errorf("%s: wrong password", u.Username)
		}
		if (u.Permissions == nil) != (u.Username == access.Admin) {
			t.Errorf("%s: permissions %v", u.Username, u.Permissions)
		}
		found = found || u.Username == access.NoAuthUser
	}
	if !found {
		t.Fatalf("no-auth user %s is not a user", access.NoAuthUser)
	}
}

// TestPasswords covers generation, persistence and the connect option.
func TestPasswords(t *testing.T) {
	t.Run("new passwords are random and complete", func(t *testing.T) {
		a, err := access.NewPasswords()
		if err != nil {
			t.Fatal(err)
		}
		b, err := access.NewPasswords()
		if err != nil {
			t.Fatal(err)
		}
		distinct := map[string]bool{}
		for _, name := range access.Names() {
			if len(a[name]) < 32 || a[name] == b[name] {
				t.Errorf("%s: weak or repeated password %q", name, a[name])
			}
			distinct[a[name]] = true
		}
		if len(distinct) != len(access.Names()) {
			t.Error("two users share a password")
		}
	})
	t.Run("LoadOrCreate creates 0600 and reloads the same", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "data", "credentials.json")
		first, err := access.LoadOrCreate(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
		}
		again, err := access.LoadOrCreate(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range access.Names() {
			if first[name] != again[name] {
				t.Errorf("%s: password changed across loads", name)
			}
		}
	})
	t.Run("a user added since gets a password, the others keep theirs", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "credentials.json")
		b, _ := json.Marshal(access.Passwords{access.Admin: "kept-admin-password-0123456789abcdef"})
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := access.LoadOrCreate(path)
		if err != nil {
			t.Fatal(err)
		}
		if p[access.Admin] != "kept-admin-password-0123456789abcdef" || p[access.Auditor] == "" {
			t.Fatalf("got %v", p)
		}
		again, err := access.LoadOrCreate(path)
		if err != nil || again[access.Auditor] != p[access.Auditor] {
			t.Fatalf("filled password not persisted: %v", err)
		}
	})
	t.Run("a file readable by others is refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "credentials.json")
		if err := os.WriteFile(path, []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := access.LoadOrCreate(path); err == nil {
			t.Fatal("0644 credentials accepted")
		}
	})
	t.Run("a corrupt file is an error, not silently replaced", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "credentials.json")
		if err := os.WriteFile(path, []byte(`{"admin":`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := access.LoadOrCreate(path); err == nil {
			t.Fatal("corrupt credentials accepted")
		}
	})
	t.Run("NATSOption of an unknown user fails the connect", func(t *testing.T) {
		var o nats.Options
		if err := (access.Passwords{}).NATSOption("nobody")(&o); err == nil {
			t.Fatal("no error")
		}
		p := access.Passwords{access.Client: "pw"}
		if err := p.NATSOption(access.Client)(&o); err != nil || o.User != access.Client || o.Password != "pw" {
			t.Fatalf("option: %v %+v", err, o)
		}
	})
}
