package stack

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/natstest"
)

// call sends req to subject on nc and decodes the reply into rep.
func call(t *testing.T, nc *nats.Conn, subject string, req, rep any) {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	m, err := nc.Request(subject, b, 30*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("%s: %s %s", subject, code, m.Header.Get(micro.ErrorHeader))
	}
	if err := json.Unmarshal(m.Data, rep); err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
}

// startStack runs a stack on dataDir (random port, cheap hashes, no
// console or metrics) until the test ends; each of before changes it
// before it runs.
func startStack(t *testing.T, dataDir string, before ...func(*Stack)) (*Stack, Config) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.AnchorDir = dataDir, t.TempDir()
	cfg.Port = -1
	cfg.PasswordCost = access.MinBcryptCost
	cfg.MetricsAddr, cfg.ConsoleAddr = "", ""
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(s)
	}
	natstest.Run(t, "stack", s.Run)
	select {
	case <-s.Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("stack not ready")
	}
	return s, cfg
}

// TestLegacyDataDir: a data directory of an earlier version, whose people
// were one user per role, starts with its role users still working (their
// names are in its records) and the named people added beside them.
func TestLegacyDataDir(t *testing.T) {
	dir := t.TempDir()
	var legacy []access.Person
	for _, r := range access.Roles {
		legacy = append(legacy, access.Person{Name: string(r), Role: r})
	}
	if _, err := access.LoadOrCreate(filepath.Join(dir, CredentialsFile), legacy, access.WithBcryptCost(access.MinBcryptCost)); err != nil {
		t.Fatal(err)
	}
	s, _ := startStack(t, dir)
	for _, user := range []string{"operator", "approver", access.DefaultPerson(access.RoleOperator), access.DefaultPerson(access.RoleApprover)} {
		nc, err := s.ConnectAs(user)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		var who api.WhoamiReply
		call(t, nc, api.AuditWhoami, struct{}{}, &who)
		nc.Close()
		if who.User != user {
			t.Errorf("whoami as %s: %+v", user, who)
		}
		if _, err := os.Stat(s.ContextFile(user)); err != nil {
			t.Errorf("context of %s: %v", user, err)
		}
	}
}

// TestPeopleReload: a running stack applies a change to its credentials
// file (what `deadletter people` writes) without a restart: Jonas,
// disabled, is disconnected and told he is disabled when he connects
// again, his context file is gone, and
// the hold he placed still names him; Amara is never disconnected; a
// person added meanwhile can connect with the context written for her.
func TestPeopleReload(t *testing.T) {
	s, cfg := startStack(t, t.TempDir())
	amara, jonas := access.DefaultPerson(access.RoleOperator), access.DefaultPersonsOf(access.RoleOperator)[1]
	connect := func(user string) (*nats.Conn, error) { return s.ConnectAs(user, nats.NoReconnect()) }
	a, err := connect(amara)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	j, err := connect(jonas)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()

	var placed api.HoldReply
	call(t, j, api.HoldPlace, api.HoldPlaceRequest{CaseID: "CASE-Müller & Söhne <Großhandel>", Reason: "DEA inquiry",
		Target: api.HoldTarget{PartyID: "BW4829137"}, Confirm: true}, &placed)
	if placed.Hold.PlacedBy != jonas {
		t.Fatalf("hold placed by %q, want %s", placed.Hold.PlacedBy, jonas)
	}

	// What `deadletter people disable` and `add` do to the file.
	path := filepath.Join(cfg.DataDir, CredentialsFile)
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sec.SetDisabled(jonas, true, "test"); err != nil {
		t.Fatal(err)
	}
	const nadia = "nadia.benali"
	if err := sec.AddPerson(access.Person{Name: nadia, DisplayName: "Nadia Benali", Role: access.RoleViewer}, "test", access.WithBcryptCost(access.MinBcryptCost)); err != nil {
		t.Fatal(err)
	}
	if err := sec.Save(path); err != nil {
		t.Fatal(err)
	}

	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if !j.IsClosed() {
			return errors.New("Jonas is still connected")
		}
		if _, err := os.Stat(s.ContextFile(jonas)); !errors.Is(err, os.ErrNotExist) {
			return errors.New("Jonas's context file is still there")
		}
		if _, err := os.Stat(s.ContextFile(nadia)); err != nil {
			return err
		}
		return nil
	})
	// With his password he is let in only to be told he is disabled.
	if nc, err := connect(jonas); err != nil {
		t.Fatalf("Jonas's connect: %v, want a connection that can only ask who he is", err)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		disabled, err := access.Disabled(ctx, nc)
		cancel()
		nc.Close()
		if err != nil || !disabled {
			t.Fatalf("Jonas disabled %v, %v", disabled, err)
		}
	}
	if a.IsClosed() {
		t.Fatal("Amara was disconnected by Jonas's change")
	}
	var list api.HoldListReply
	call(t, a, api.HoldList, api.HoldListRequest{}, &list)
	if len(list.Holds) != 1 || list.Holds[0].Hold.PlacedBy != jonas {
		t.Fatalf("holds after Jonas was disabled: %+v, want his hold still placed by %s", list.Holds, jonas)
	}

	// Nadia connects with the context the stack wrote for her.
	var c access.NATSContext
	b, err := os.ReadFile(s.ContextFile(nadia))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil || c.User != nadia || !strings.Contains(c.Description, "Nadia Benali") {
		t.Fatalf("context %+v: %v", c, err)
	}
	n, err := nats.Connect(c.URL, nats.UserInfo(c.User, c.Password), nats.CustomInboxPrefix(c.InboxPrefix))
	if err != nil {
		t.Fatalf("Nadia: %v", err)
	}
	defer n.Close()
	var who api.WhoamiReply
	call(t, n, api.AuditWhoami, struct{}{}, &who)
	if who.User != nadia || who.Role != string(access.RoleViewer) {
		t.Fatalf("whoami %+v", who)
	}
}
