package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/natstest"
)

// changePeople does what `deadletter people` does to the credentials
// file: under its lock, load, change, save.
func changePeople(t *testing.T, path string, change func(*access.Secrets) error) {
	t.Helper()
	unlock, err := access.LockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		t.Fatal(err)
	}
	if err := change(sec); err != nil {
		t.Fatal(err)
	}
	if err := sec.Save(path); err != nil {
		t.Fatal(err)
	}
}

// TestChangeDuringReloadApplied (issue #38, E9): an administrator rotates
// Amara's password, and disables Jonas while the server is reloading
// after the rotation: both changes are applied within seconds (Jonas is
// disconnected and told he is disabled, Amara's old password is
// refused), and what
// the server enforces (AppliedFile) says so: nothing is pending.
func TestChangeDuringReloadApplied(t *testing.T) {
	amara, jonas := access.DefaultPerson(access.RoleOperator), access.DefaultPersonsOf(access.RoleOperator)[1]
	var path string
	var once sync.Once
	disabled := make(chan struct{})
	s, cfg := startStack(t, t.TempDir(), func(s *Stack) {
		s.loadedHook = func() {
			// The first reload (the rotation's) has read the file: the
			// disable is written now, before it is applied.
			once.Do(func() {
				changePeople(t, path, func(sec *access.Secrets) error {
					_, err := sec.SetDisabled(jonas, true, "offboarding")
					return err
				})
				close(disabled)
			})
		}
	})
	path = filepath.Join(cfg.DataDir, CredentialsFile)
	old := s.Secrets()
	j, err := s.ConnectAs(jonas, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()

	changePeople(t, path, func(sec *access.Secrets) error {
		return sec.Rotate(amara, "offboarding", access.WithBcryptCost(access.MinBcryptCost))
	})
	select {
	case <-disabled:
	case <-time.After(30 * time.Second):
		t.Fatal("no reload after the rotation")
	}
	dial := func(user string, sec *access.Secrets) error {
		nc, err := nats.Connect(s.srv.ClientURL(), append(sec.NATSOptions(user), nats.NoReconnect(), nats.Timeout(10*time.Second))...)
		if err == nil {
			nc.Close()
		}
		return err
	}
	// Jonas's password still opens a connection that can only ask who
	// he is (access.Disabled).
	toldDisabled := func(user string, sec *access.Secrets) bool {
		nc, err := nats.Connect(s.srv.ClientURL(), append(sec.NATSOptions(user), nats.NoReconnect(), nats.Timeout(10*time.Second))...)
		if err != nil {
			return false
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		disabled, err := access.Disabled(ctx, nc)
		return err == nil && disabled
	}
	natstest.CheckFor(t, 15*time.Second, 50*time.Millisecond, func() error {
		switch {
		case !j.IsClosed():
			return errors.New("Jonas is still connected")
		case !toldDisabled(jonas, old):
			return errors.New("Jonas is not told he is disabled")
		case dial(amara, old) == nil:
			return errors.New("Amara's old password still works")
		}
		return nil
	})
	if err := dial(amara, s.Secrets()); err != nil {
		t.Fatalf("Amara with her new password: %v", err)
	}
	if !toldDisabled(jonas, old) {
		t.Fatal("Jonas is not told he is disabled")
	}
	// What the server enforces is what the file says: nothing pending.
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		applied, err := access.LoadApplied(filepath.Join(cfg.DataDir, AppliedFile))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if applied.Digest != access.FileDigest(b) {
			return errors.New("the applied digest is not the file's")
		}
		sec := s.Secrets()
		for _, p := range sec.People {
			if why := applied.Pending(sec, p); why != "" {
				return fmt.Errorf("%s: %s", p.Name, why)
			}
		}
		return nil
	})
}

// TestOldHashesMadeCheap (issue #38, E11): a data directory whose
// password hashes were made at a higher cost than the configured one (an
// earlier version's, at bcrypt's default 10; one above here, cheaper
// under the race detector) is hashed again at start, at the configured
// cost, with the same passwords: the person connects with the password
// she had.
func TestOldHashesMadeCheap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, CredentialsFile)
	const nadia = "nadia.benali"
	old, err := access.LoadOrCreate(path, []access.Person{{Name: nadia, DisplayName: "Nadia Benali (نادية)", Role: access.RoleViewer}},
		access.WithBcryptCost(access.MinBcryptCost+1))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startStack(t, dir)
	sec := s.Secrets()
	if sec.Users[nadia].Password != old.Users[nadia].Password {
		t.Fatal("her password changed")
	}
	if c, err := bcrypt.Cost([]byte(sec.Users[nadia].Bcrypt)); err != nil || c != access.MinBcryptCost {
		t.Fatalf("her hash has cost %d (%v), want %d", c, err, access.MinBcryptCost)
	}
	nc, err := nats.Connect(s.srv.ClientURL(), old.NATSOptions(nadia)...)
	if err != nil {
		t.Fatalf("Nadia with the password she had: %v", err)
	}
	nc.Close()
}
