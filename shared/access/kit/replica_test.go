package kit_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
)

// TestReplicaKit: a kit with a replica gives every primary node its
// JetStream domain and a leaf listener, and the replica a file of its own
// whose leaf remote binds the services' account to the primary's backup
// account; bad replica options are refused, one row each.
func TestReplicaKit(t *testing.T) {
	base := func() kit.Options {
		o := kit.Cluster(3)
		o.ListenHost = "127.0.0.1"
		for i := range o.Nodes {
			o.Nodes[i].Host = "127.0.0." + string(rune('1'+i)) // a leaf URL each
			o.Nodes[i].ClientPort += i
			o.Nodes[i].ClusterPort += i
			o.Nodes[i].HTTPPort += i
		}
		o.Replica = &kit.Replica{Node: kit.Node{Name: "dr1", Host: "127.0.0.1", ClientPort: 5222, HTTPPort: 5822, StoreDir: "/var/lib/nats-dr"}}
		return o
	}
	dir := t.TempDir()
	sec, err := kit.LoadSecrets(dir, access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*kit.Options)
	}{
		{"no host", func(o *kit.Options) { o.Replica.Host = "" }},
		{"no client port", func(o *kit.Options) { o.Replica.ClientPort = 0 }},
		{"a primary node's name", func(o *kit.Options) { o.Replica.Name = "n2" }},
		{"the primary's domain", func(o *kit.Options) { o.Replica.Domain = kit.DefaultPrimaryDomain }},
		{"the backup account's import prefix as a domain", func(o *kit.Options) { o.Replica.PrimaryDomain = access.ServiceAccount }},
		{"reachable without TLS", func(o *kit.Options) { o.Replica.Host = "dr.example.com" }},
		{"two nodes on one host and leaf port", func(o *kit.Options) { o.Nodes[1].Host = o.Nodes[0].Host }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.edit(&o)
			if _, err := kit.Generate(t.TempDir(), sec, o); !errors.Is(err, kit.ErrOptions) {
				t.Errorf("generated: %v", err)
			}
		})
	}

	o := base()
	m, err := kit.Generate(dir, sec, o)
	if err != nil {
		t.Fatal(err)
	}
	if m.Digests["dr1"] == "" {
		t.Errorf("no digest of the replica's file: %v", m.Digests)
	}
	for _, n := range o.Nodes {
		so, err := server.ProcessConfigFile(filepath.Join(dir, kit.NodesDir, n.Name, kit.ServerConfFile))
		if err != nil {
			t.Fatal(err)
		}
		if so.JetStreamDomain != kit.DefaultPrimaryDomain || so.LeafNode.Port != kit.DefaultLeafPort || len(so.LeafNode.Users) != 0 {
			t.Errorf("%s: domain %q, leaf port %d, leaf users %d", n.Name, so.JetStreamDomain, so.LeafNode.Port, len(so.LeafNode.Users))
		}
		found := false
		for _, u := range so.Users {
			if u.Username == access.ReplicaLeafUser {
				found = u.Account.Name == access.BackupAccount && u.Permissions != nil && u.Permissions.Publish != nil && len(u.Permissions.Publish.Deny) > 0
			}
		}
		if !found {
			t.Errorf("%s: no %s user in %s with a deny list", n.Name, access.ReplicaLeafUser, access.BackupAccount)
		}
	}
	ro, err := server.ProcessConfigFile(kit.ReplicaConfPath(dir, "dr1"))
	if err != nil {
		t.Fatal(err)
	}
	if ro.JetStreamDomain != kit.DefaultReplicaDomain || !ro.SyncAlways || ro.StoreDir != "/var/lib/nats-dr" || len(ro.LeafNode.Remotes) != 1 ||
		ro.LeafNode.Remotes[0].LocalAccount != access.ServiceAccount || len(ro.LeafNode.Remotes[0].URLs) != 3 {
		t.Fatalf("replica: domain %q sync %v store %q remotes %d, first %+v", ro.JetStreamDomain, ro.SyncAlways, ro.StoreDir, len(ro.LeafNode.Remotes), *ro.LeafNode.Remotes[0])
	}
	if u := ro.LeafNode.Remotes[0].URLs[0].User.Username(); u != kit.LeafUser {
		t.Errorf("the replica dials as %q", u)
	}
}
