package kit

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/embedded"
)

// Replica describes the second copy: a server of its own (in another
// place: a single remote server, or the seed of a second cluster) in a
// JetStream domain of its own, joined to the primary cluster by a leaf
// node connection. Its leaf connection is bound, on the primary, to the
// backup account (access.BackupAccount) and, on the replica, to the
// services' account: the replica's admin mirrors the backup account's
// mirrors (package replica, EnsureFromBackup) into the replica's services'
// account, where the services run after a failover (replica.PromoteAll).
// It reaches nothing of the primary's services' account. It has the same
// accounts and users as the primary (access.ServerConfig), so the services
// and people connect to it with the same credentials.
type Replica struct {
	// Node is the replica server (ClusterPort unused: a server on its own).
	Node
	// Domain is the replica's JetStream domain. Default DefaultReplicaDomain.
	Domain string `json:"domain"`
	// PrimaryDomain is the primary cluster's JetStream domain (the
	// mirrors' external API $JS.<domain>.API). Default DefaultPrimaryDomain.
	PrimaryDomain string `json:"primary_domain"`
	// LeafPort is the port on which every primary node accepts the
	// replica's leaf node connection (unless the node has a LeafPort of
	// its own). Default DefaultLeafPort.
	LeafPort int `json:"leaf_port"`
}

// Defaults of Replica.
const (
	DefaultReplicaDomain = "dr"
	DefaultPrimaryDomain = "deadletter"
	DefaultLeafPort      = 7422
	// LeafUser authenticates the replica's leaf connection on the primary:
	// a user of access.BackupAccount (access.ReplicaLeafUser).
	LeafUser = access.ReplicaLeafUser
)

func (r Replica) withDefaults() Replica {
	if r.Domain == "" {
		r.Domain = DefaultReplicaDomain
	}
	if r.PrimaryDomain == "" {
		r.PrimaryDomain = DefaultPrimaryDomain
	}
	if r.LeafPort == 0 {
		r.LeafPort = DefaultLeafPort
	}
	return r
}

func (r Replica) validate(o Options) error {
	if r.Name == "" || r.Host == "" || r.ClientPort <= 0 || r.HTTPPort <= 0 {
		return fmt.Errorf("%w: the replica needs a name, a host, client and HTTP ports", ErrOptions)
	}
	for _, n := range o.Nodes {
		if n.Name == r.Name {
			return fmt.Errorf("%w: the replica %s has a primary node's name", ErrOptions, r.Name)
		}
	}
	if "$JS."+r.PrimaryDomain+".API" == access.BackupAPIPrefix || "$JS."+r.Domain+".API" == access.BackupAPIPrefix {
		return fmt.Errorf("%w: the JetStream domain %s is the backup account's import prefix", ErrOptions, access.ServiceAccount)
	}
	if r.Domain == r.PrimaryDomain {
		return fmt.Errorf("%w: the replica's JetStream domain is the primary's (%s)", ErrOptions, r.Domain)
	}
	leaf := map[string]string{}
	for _, n := range o.Nodes {
		at := fmt.Sprintf("%s:%d", n.Host, r.nodeLeafPort(n))
		if m, ok := leaf[at]; ok {
			return fmt.Errorf("%w: the nodes %s and %s both accept the replica's leaf connection on %s (Node.LeafPort)", ErrOptions, m, n.Name, at)
		}
		leaf[at] = n.Name
	}
	if o.TLSCert == "" && !embedded.Loopback(r.Host) {
		return fmt.Errorf("%w: the replica %s is reachable from the network without TLS", ErrOptions, r.Name)
	}
	return nil
}

// nodeLeafPort is the port on which node n accepts the replica's leaf
// connection.
func (r Replica) nodeLeafPort(n Node) int {
	if n.LeafPort != 0 {
		return n.LeafPort
	}
	return r.LeafPort
}

// EnsureReplicaUser gives LeafUser a password (and its bcrypt hash) when it
// has none, and reports whether it changed s (kept in s.Users, like the
// cluster users).
func EnsureReplicaUser(s *access.Secrets, opts ...access.Option) (bool, error) {
	if sec := s.Users[LeafUser]; sec.Password != "" && sec.Bcrypt != "" {
		return false, nil
	}
	// A cluster user's generator, for one more name.
	tmp := &access.Secrets{Users: map[string]access.Secret{}}
	if _, err := tmp.EnsureClusterUsers(opts...); err != nil {
		return false, err
	}
	s.Users[LeafUser] = tmp.Users[access.RouteUser]
	return true, nil
}

// withPrimaryLeaf adds to a primary node's rendered configuration its
// JetStream domain and the leaf node listener the replica dials, whose one
// user is bound to the backup account.
func withPrimaryLeaf(text string, sec *access.Secrets, o Options, n Node) (string, error) {
	r := o.Replica.withDefaults()
	if sec.Users[LeafUser].Bcrypt == "" {
		return "", fmt.Errorf("kit: no secret for %s (EnsureReplicaUser)", LeafUser)
	}
	// No leafnode users of its own: a leaf connection authenticates as a
	// user of the accounts (nats-server), here LeafUser of the backup
	// account, whose permissions bound what the replica may send into it
	// (access.ReplicaLeafDeny).
	lb := map[string]any{"host": o.ListenHost, "port": r.nodeLeafPort(n)}
	if o.TLSCert != "" {
		lb["tls"] = map[string]any{"cert_file": o.TLSCert, "key_file": o.TLSKey}
	}
	return edit(text, func(m map[string]any) {
		m["jetstream"].(map[string]any)["domain"] = r.PrimaryDomain
		m["leafnodes"] = lb
	})
}

// ReplicaFile returns the rendered configuration of the replica server:
// the accounts of the primary, its own JetStream domain, and a leaf
// node remote to every primary node binding its services' account to the
// primary's backup account.
func ReplicaFile(sec *access.Secrets, o Options) (string, error) {
	o = o.withDefaults()
	if o.Replica == nil {
		return "", fmt.Errorf("%w: no replica", ErrOptions)
	}
	r := o.Replica.withDefaults()
	if err := r.validate(o); err != nil {
		return "", err
	}
	accounts, err := access.ServerConfig(sec)
	if err != nil {
		return "", err
	}
	mon, leaf := sec.Users[access.Monitor], sec.Users[LeafUser]
	if mon.Bcrypt == "" || leaf.Password == "" {
		return "", fmt.Errorf("kit: no monitor or %s secret", LeafUser)
	}
	store := o.StoreDir
	if r.StoreDir != "" {
		store = r.StoreDir
	}
	pub, sub := monitorPermissions()
	f := embedded.File{
		ServerName: r.Name, Host: o.ListenHost, Port: r.ClientPort,
		StoreDir: store, SyncAlways: true, MaxPayload: o.MaxPayload,
		HTTP:     o.HTTPHost + ":" + strconv.Itoa(r.HTTPPort),
		Accounts: accounts,
		System: &embedded.SystemAccount{Name: access.SystemAccount, Users: []embedded.User{
			{User: access.Monitor, Password: mon.Bcrypt, Publish: pub, Subscribe: sub},
		}},
	}
	if o.TLSCert != "" {
		f.TLS = &embedded.TLSFiles{Cert: o.TLSCert, Key: o.TLSKey, CA: o.TLSCA}
	}
	text, err := f.Render()
	if err != nil {
		return "", err
	}
	scheme := "nats-leaf"
	if o.TLSCert != "" {
		scheme = "tls"
	}
	var urls []string
	for _, n := range o.Nodes {
		urls = append(urls, fmt.Sprintf("%s://%s:%s@%s:%d", scheme, LeafUser, leaf.Password, n.Host, r.nodeLeafPort(n)))
	}
	remote := map[string]any{"urls": urls, "account": access.ServiceAccount}
	if o.TLSCA != "" {
		remote["tls"] = map[string]any{"ca_file": o.TLSCA}
	}
	return edit(text, func(m map[string]any) {
		m["jetstream"].(map[string]any)["domain"] = r.Domain
		m["leafnodes"] = map[string]any{"remotes": []map[string]any{remote}}
	})
}

// ReplicaConfPath is the replica's configuration file in a kit.
func ReplicaConfPath(dir, name string) string {
	return filepath.Join(dir, NodesDir, name, ServerConfFile)
}

// edit decodes a rendered configuration (JSON), changes it and encodes it
// as embedded.File.Render does.
func edit(text string, fn func(map[string]any)) (string, error) {
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return "", fmt.Errorf("kit: %w", err)
	}
	fn(m)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return "", fmt.Errorf("kit: %w", err)
	}
	return b.String(), nil
}

// writeReplica writes the replica's configuration file and its digest.
func writeReplica(dir string, sec *access.Secrets, o Options, man *Manifest) error {
	text, err := ReplicaFile(sec, o)
	if err != nil {
		return err
	}
	path := ReplicaConfPath(dir, o.Replica.Name)
	if err := access.WriteFile(path, []byte(header+text)); err != nil {
		return err
	}
	man.Digests[o.Replica.Name], err = Digest(path)
	return err
}
