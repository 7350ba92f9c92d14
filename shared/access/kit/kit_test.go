package kit_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/embedded"
)

func generate(tb testing.TB, dir string, o kit.Options) *kit.Manifest {
	tb.Helper()
	sec, err := kit.LoadSecrets(dir, access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		tb.Fatal(err)
	}
	m, err := kit.Generate(dir, sec, o)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func loopback(n int) kit.Options {
	o := kit.Cluster(n)
	o.ListenHost = "127.0.0.1"
	for i := range o.Nodes {
		o.Nodes[i].Host = "127.0.0.1"
		o.Nodes[i].ClientPort += i
		o.Nodes[i].ClusterPort += i
		o.Nodes[i].HTTPPort += i
	}
	return o
}

// TestGenerate checks the files of a kit: secrets mode 0600, every node's
// file loads with its routes, system account and no no_auth_user, and a
// second run from the same secrets writes the same files.
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	m := generate(t, dir, loopback(3))
	before := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		before[rel] = b
		fi, _ := d.Info()
		if rel != kit.ManifestFile && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", rel, fi.Mode().Perm())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{kit.SecretsFile, kit.ManifestFile, "services/validator.nk", "services/quarantiner.nk", "services/redriver.nk",
		"services/auditor.nk", "services/replay.secret", "services/" + kit.PublishersFile, "passwords/admin", "passwords/monitor", "contexts/admin.json", "contexts/monitor.json",
		"services/" + access.BackupUser + ".nk", "passwords/" + access.BackupAdmin, "contexts/" + access.BackupAdmin + ".json"}
	for _, p := range access.DefaultPeople() {
		want = append(want, "passwords/"+p.Name, "contexts/"+p.Name+".json")
	}
	for _, n := range m.Options.Nodes {
		want = append(want, filepath.Join(kit.NodesDir, n.Name, kit.ServerConfFile))
	}
	for _, w := range want {
		if _, ok := before[w]; !ok {
			t.Errorf("no %s", w)
		}
	}
	if len(before) != len(want) {
		t.Errorf("%d files, want %d", len(before), len(want))
	}

	for _, n := range m.Options.Nodes {
		t.Run("node "+n.Name, func(t *testing.T) {
			path := filepath.Join(dir, kit.NodesDir, n.Name, kit.ServerConfFile)
			o, err := server.ProcessConfigFile(path)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case o.ServerName != n.Name || o.Port != n.ClientPort || o.Cluster.Port != n.ClusterPort || o.HTTPPort != n.HTTPPort:
				t.Errorf("name %s ports %d %d %d", o.ServerName, o.Port, o.Cluster.Port, o.HTTPPort)
			case !o.JetStream || !o.SyncAlways || o.MaxPayload != embedded.DefaultMaxPayload:
				t.Errorf("jetstream %v sync always %v max payload %d", o.JetStream, o.SyncAlways, o.MaxPayload)
			case len(o.Routes) != 2 || o.Cluster.Username != access.RouteUser || o.Cluster.Name != kit.DefaultCluster:
				t.Errorf("cluster %+v routes %v", o.Cluster, o.Routes)
			case o.NoAuthUser != "" || o.SystemAccount != access.SystemAccount:
				t.Errorf("no_auth_user %q system account %q", o.NoAuthUser, o.SystemAccount)
			case o.ConfigDigest() != m.Digests[n.Name]:
				t.Errorf("digest %s, manifest %s", o.ConfigDigest(), m.Digests[n.Name])
			}
			if bytes.Contains(before[filepath.Join(kit.NodesDir, n.Name, kit.ServerConfFile)], []byte("no_auth_user")) {
				t.Error("no_auth_user in the file")
			}
		})
	}

	generate(t, dir, loopback(3))
	for rel, b := range before {
		after, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || !bytes.Equal(after, b) {
			t.Errorf("%s changed on regeneration", rel)
		}
	}
}

// TestOneNode: a kit of one node is a server on its own: no cluster block
// (it rendered "routes": null, which nats-server refused to parse), with
// a replica too.
func TestOneNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replica bool
	}{
		{"alone", false},
		{"with a replica", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := loopback(1)
			if tc.replica {
				o.Replica = &kit.Replica{Node: kit.Node{Name: "dr1", Host: "127.0.0.1", ClientPort: 5222, HTTPPort: 5822}}
			}
			m := generate(t, dir, o)
			path := filepath.Join(dir, kit.NodesDir, "n1", kit.ServerConfFile)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(`"cluster"`)) || bytes.Contains(b, []byte("null")) {
				t.Errorf("a one-node file with a cluster block or a null")
			}
			so, err := server.ProcessConfigFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if so.Cluster.Port != 0 || len(so.Routes) != 0 || !so.JetStream || so.ConfigDigest() != m.Digests["n1"] {
				t.Errorf("cluster port %d routes %v jetstream %v", so.Cluster.Port, so.Routes, so.JetStream)
			}
			if tc.replica {
				if so.LeafNode.Port != kit.DefaultLeafPort {
					t.Errorf("leaf port %d", so.LeafNode.Port)
				}
				if _, err := server.ProcessConfigFile(kit.ReplicaConfPath(dir, "dr1")); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestNodeFileIsTheEmbeddedBoundary checks a node's file enforces the
// boundary the embedded server of `make run` loads: the same users, nkeys,
// accounts and permissions (one renderer, embedded.File, and one source,
// access.ServerConfig).
func TestNodeFileIsTheEmbeddedBoundary(t *testing.T) {
	dir := t.TempDir()
	generate(t, dir, loopback(3))
	sec, err := kit.LoadSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	node, err := server.ProcessConfigFile(filepath.Join(dir, kit.NodesDir, "n1", kit.ServerConfFile))
	if err != nil {
		t.Fatal(err)
	}
	text, err := access.ServerConfig(sec)
	if err != nil {
		t.Fatal(err)
	}
	single, err := embedded.File{ServerName: "deadletter", Host: "127.0.0.1", Port: 4222, StoreDir: "data", SyncAlways: true, MaxPayload: embedded.DefaultMaxPayload, Accounts: text}.Render()
	if err != nil {
		t.Fatal(err)
	}
	emb := &server.Options{}
	if err := emb.ProcessConfigString(single); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(node), describe(emb); got != want {
		t.Fatalf("the node's boundary differs from the embedded server's:\nnode:\n%s\nembedded:\n%s", got, want)
	}
	if node.MaxPayload != emb.MaxPayload || node.SyncAlways != emb.SyncAlways {
		t.Errorf("max payload %d / %d, sync always %v / %v", node.MaxPayload, emb.MaxPayload, node.SyncAlways, emb.SyncAlways)
	}
}

// describe lists the users, nkeys and their accounts and permissions of
// the services' and the role accounts.
func describe(o *server.Options) string {
	var lines []string
	perm := func(p *server.Permissions) string {
		if p == nil {
			return "unrestricted"
		}
		s := ""
		if p.Publish != nil {
			s += "pub " + strings.Join(p.Publish.Allow, ",") + " deny " + strings.Join(p.Publish.Deny, ",")
		}
		if p.Subscribe != nil {
			s += " sub " + strings.Join(p.Subscribe.Allow, ",") + " deny " + strings.Join(p.Subscribe.Deny, ",")
		}
		return s
	}
	for _, u := range o.Users {
		if u.Account.Name == access.SystemAccount {
			continue
		}
		lines = append(lines, u.Username+" "+u.Account.Name+" "+u.Password+" "+perm(u.Permissions))
	}
	for _, u := range o.Nkeys {
		lines = append(lines, u.Nkey+" "+u.Account.Name+" "+perm(u.Permissions))
	}
	for _, a := range o.Accounts {
		if a.Name != access.SystemAccount && a.Name != "$G" {
			lines = append(lines, "account "+a.Name)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestOptionsRefused checks what the generator refuses.
func TestOptionsRefused(t *testing.T) {
	noTLS := kit.Cluster(3) // hosts n1..n3 on 0.0.0.0: the network
	dup := loopback(3)
	dup.Nodes[1].Name = dup.Nodes[0].Name
	tooMany := loopback(3)
	tooMany.Replicas = 5
	halfTLS := loopback(3)
	halfTLS.TLSCert = "/etc/nats/cert.pem"
	fewZones := loopback(3)
	for i, z := range []string{"a", "a", "b"} {
		fewZones.Nodes[i].Zone = z
	}
	someZones := loopback(3)
	someZones.Nodes[0].Zone = "a"
	for name, o := range map[string]kit.Options{
		"network without TLS": noTLS, "duplicate names": dup, "more replicas than nodes": tooMany, "certificate without key": halfTLS,
		"fewer zones than replicas": fewZones, "a node without a zone": someZones,
	} {
		t.Run(name, func(t *testing.T) {
			sec, err := kit.LoadSecrets(t.TempDir(), access.WithBcryptCost(bcrypt.MinCost))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kit.Generate(t.TempDir(), sec, o); !errors.Is(err, kit.ErrOptions) {
				t.Fatalf("err %v, want ErrOptions", err)
			}
		})
	}
}

// TestReservedNames checks a person cannot take a cluster user's name.
func TestReservedNames(t *testing.T) {
	sec, err := access.NewSecrets([]access.Person{{Name: access.Monitor, Role: access.RoleViewer}}, access.WithBcryptCost(bcrypt.MinCost))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sec.EnsureClusterUsers(); !errors.Is(err, access.ErrReservedName) {
		t.Fatalf("err %v, want ErrReservedName", err)
	}
}

// TestZones: with a zone per node, each node's file tags the node with its
// zone and makes the server place every stream's replicas in distinct
// zones (the file loads into the server's options with both).
func TestZones(t *testing.T) {
	o := loopback(5)
	o.Replicas = 3
	for i, z := range []string{"a", "b", "c", "a", "b"} {
		o.Nodes[i].Zone = z
	}
	dir := t.TempDir()
	m := generate(t, dir, o)
	for i, n := range m.Options.Nodes {
		opts, err := server.ProcessConfigFile(filepath.Join(dir, kit.NodesDir, n.Name, kit.ServerConfFile))
		if err != nil {
			t.Fatal(err)
		}
		if want := kit.ZoneTag + o.Nodes[i].Zone; !slices.Contains([]string(opts.Tags), want) || opts.JetStreamUniqueTag != kit.ZoneTag {
			t.Errorf("%s: tags %v, unique tag %q; want %s and %s", n.Name, opts.Tags, opts.JetStreamUniqueTag, want, kit.ZoneTag)
		}
	}
}
