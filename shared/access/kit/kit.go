// Package kit generates the deployment kit of a NATS cluster from the one
// source of the trust boundary (package access) and the one renderer of a
// deadletter nats-server's configuration (embedded.File, which the
// embedded server of `make run` loads too): a nats-server.conf per node,
// every user's secret file, and a natscli context per person, the admin
// and the monitoring user. Check compares a running cluster with them.
//
// People: each person is a user of their own with one role (package
// access, Person); `deadletter people ls|add|disable|enable|rotate --kit
// DIR` changes one person in the kit's secrets and regenerates its files
// with the options of its manifest (every other user's lines stay as they
// were; a disabled person's password and context files are deleted), after
// which each node reloads its file (docs/operations/people.md).
//
// Credentials: services authenticate with nkeys (the server holds only
// their public keys, no shared secret is ever sent; the seed file stays on
// the service's host); people, the admin and the monitoring user with
// passwords (what natscli and a console user type; the server holds only
// bcrypt hashes). Routes authenticate with a route user and password,
// which every node's file holds in clear (route URLs need it): the node
// files are mode 0600 like the secrets.
package kit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/conf"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/embedded"
)

// Files and directories of a generated kit, relative to its directory.
const (
	// SecretsFile holds every secret (access.Secrets, mode 0600): keep it
	// offline; regenerating from it yields the same files.
	SecretsFile = "secrets.json"
	// ManifestFile describes the cluster (Manifest), no secret in it.
	ManifestFile = "kit.json"
	// NodesDir holds <node>/nats-server.conf.
	NodesDir = "nodes"
	// ServicesDir holds each service's nkey seed file <service>.nk and the
	// redriver's replay secret.
	ServicesDir = "services"
	// PasswordsDir holds the password file of the admin, the monitoring
	// user and each person.
	PasswordsDir = "passwords"
	// ContextsDir holds the natscli context <user>.json of the admin, the
	// monitoring user and each person.
	ContextsDir = "contexts"
	// ServerConfFile is a node's configuration file name.
	ServerConfFile = "nats-server.conf"
	// ReplaySecretFile is the redriver's replay secret (every redriver
	// instance shares it: DEADLETTER_REPLAY_SECRET_FILE).
	ReplaySecretFile = "replay.secret"
	// PublishersFile is the validator's publisher table: the parties each
	// publisher may publish for (DEADLETTER_PUBLISHERS_FILE).
	PublishersFile = "publishers.json"
)

// legacyServiceFiles are files an earlier version's kit wrote into
// ServicesDir that no service reads any more: the redriver's shared
// approval seed and its public key (issue #28), replaced by people's own
// decision keys (issue #38, ADR 0022). Generate deletes them, so that no
// file of a regenerated kit holds a key that once signed decisions.
var legacyServiceFiles = []string{"approval.seed", "approval.pub"}

// Node is one server of the cluster.
type Node struct {
	// Name is the server name, unique in the cluster.
	Name string `json:"name"`
	// Host is the name or address the other nodes and the clients dial.
	Host string `json:"host"`
	// ClientPort, ClusterPort and HTTPPort are its ports.
	ClientPort  int `json:"client_port"`
	ClusterPort int `json:"cluster_port"`
	HTTPPort    int `json:"http_port"`
	// StoreDir overrides Options.StoreDir for this node.
	StoreDir string `json:"store_dir,omitempty"`
	// LeafPort, when set, overrides Replica.LeafPort on this node (several
	// nodes on one host need ports of their own).
	LeafPort int `json:"leaf_port,omitempty"`
	// Zone is the node's failure domain (a rack, an availability zone).
	// When the nodes have zones, every node needs one, and the server
	// places each stream's replicas in distinct zones (server_tags
	// "zone:<zone>", unique_tag "zone:"): there must be at least Replicas
	// zones.
	Zone string `json:"zone,omitempty"`
}

// ZoneTag is the tag prefix of a node's zone (server_tags, unique_tag).
const ZoneTag = "zone:"

// Options describe the cluster to generate.
type Options struct {
	// Cluster is the cluster name. Default "deadletter".
	Cluster string `json:"cluster"`
	// Nodes are the servers (3 or 5 in production).
	Nodes []Node `json:"nodes"`
	// ListenHost is the address each server binds its client and cluster
	// ports to. Default "0.0.0.0".
	ListenHost string `json:"listen_host"`
	// HTTPHost is the address of the monitoring port (no authentication:
	// keep it loopback or private). Default "127.0.0.1".
	HTTPHost string `json:"http_host"`
	// StoreDir is the JetStream store of every node. Default
	// "/var/lib/nats".
	StoreDir string `json:"store_dir"`
	// MaxPayload is the largest message. Default embedded.DefaultMaxPayload.
	MaxPayload int32 `json:"max_payload"`
	// TLSCert, TLSKey and TLSCA are TLS file paths on the nodes (clients
	// and routes); empty for none, which only a loopback deployment may
	// use.
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	TLSCA   string `json:"tls_ca,omitempty"`
	// Replicas of every stream (3 for a 3-node cluster).
	Replicas int `json:"replicas"`
	// Replica, when set, is the second copy's server (Replica).
	Replica *Replica `json:"replica,omitempty"`
}

// Defaults of Options.
const (
	DefaultCluster     = "deadletter"
	DefaultListenHost  = "0.0.0.0"
	DefaultHTTPHost    = "127.0.0.1"
	DefaultStoreDir    = "/var/lib/nats"
	DefaultClientPort  = 4222
	DefaultClusterPort = 6222
	DefaultHTTPPort    = 8222
)

// ErrOptions is returned for invalid Options.
var ErrOptions = errors.New("kit: invalid options")

// Cluster returns the Options of an n-node cluster named n1..nN on hosts
// n1..nN with the default ports and R min(n, 3) streams.
func Cluster(n int) Options {
	o := Options{Replicas: min(n, 3)}
	for i := 1; i <= n; i++ {
		name := "n" + strconv.Itoa(i)
		o.Nodes = append(o.Nodes, Node{Name: name, Host: name, ClientPort: DefaultClientPort, ClusterPort: DefaultClusterPort, HTTPPort: DefaultHTTPPort})
	}
	return o.withDefaults()
}

func (o Options) withDefaults() Options {
	if o.Cluster == "" {
		o.Cluster = DefaultCluster
	}
	if o.ListenHost == "" {
		o.ListenHost = DefaultListenHost
	}
	if o.HTTPHost == "" {
		o.HTTPHost = DefaultHTTPHost
	}
	if o.StoreDir == "" {
		o.StoreDir = DefaultStoreDir
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = embedded.DefaultMaxPayload
	}
	if o.Replicas == 0 {
		o.Replicas = min(len(o.Nodes), 3)
	}
	return o
}

func (o Options) validate() error {
	if len(o.Nodes) == 0 {
		return fmt.Errorf("%w: no node", ErrOptions)
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("%w: TLS needs both a certificate and a key", ErrOptions)
	}
	if o.Replicas < 1 || o.Replicas > len(o.Nodes) {
		return fmt.Errorf("%w: %d replicas on %d nodes", ErrOptions, o.Replicas, len(o.Nodes))
	}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if n.Name == "" || n.Host == "" || seen[n.Name] {
			return fmt.Errorf("%w: every node needs a unique name and a host", ErrOptions)
		}
		seen[n.Name] = true
		if n.ClientPort <= 0 || n.ClusterPort <= 0 || n.HTTPPort <= 0 {
			return fmt.Errorf("%w: node %s needs client, cluster and HTTP ports", ErrOptions, n.Name)
		}
	}
	zones := map[string]bool{}
	for _, n := range o.Nodes {
		if n.Zone != "" {
			zones[n.Zone] = true
		}
	}
	if len(zones) > 0 {
		for _, n := range o.Nodes {
			if n.Zone == "" {
				return fmt.Errorf("%w: node %s has no zone while others have one", ErrOptions, n.Name)
			}
		}
		if len(zones) < o.Replicas {
			return fmt.Errorf("%w: %d zones for R%d streams: each replica needs a zone of its own", ErrOptions, len(zones), o.Replicas)
		}
	}
	if o.Replica != nil {
		if err := o.Replica.withDefaults().validate(o); err != nil {
			return err
		}
	}
	if o.TLSCert == "" && !embedded.Loopback(o.ListenHost) {
		for _, n := range o.Nodes {
			if !embedded.Loopback(n.Host) {
				return fmt.Errorf("%w: node %s is reachable from the network without TLS (--tls-cert, --tls-key)", ErrOptions, n.Name)
			}
		}
	}
	return nil
}

// ClientURLs returns the client URLs of every node, comma separated (the
// NATS_URL of services and the url of contexts).
func (o Options) ClientURLs() string {
	urls := make([]string, len(o.Nodes))
	for i, n := range o.Nodes {
		urls[i] = "nats://" + n.Host + ":" + strconv.Itoa(n.ClientPort)
	}
	return strings.Join(urls, ",")
}

// monitorPermissions is what the monitoring user may do: ask every server
// for its /varz and /healthz by request, and read its own inbox. Nothing
// else of $SYS (no reload, no kick, no account details).
func monitorPermissions() (pub, sub []string) {
	return []string{"$SYS.REQ.SERVER.PING.VARZ", "$SYS.REQ.SERVER.PING.HEALTHZ", "$SYS.REQ.SERVER.PING"},
		[]string{access.InboxPrefix(access.Monitor) + ".>"}
}

// NodeFile returns the configuration of node i of o: the accounts of
// access.ServerConfig, the system account with the monitoring user, the
// cluster routes (authenticated), JetStream with sync_interval: always,
// and with zones the node's zone tag and the rule that a stream's replicas
// are in distinct zones.
// There is no no_auth_user. A kit of one node is a server on its own: no
// cluster block (a cluster without routes is no cluster, and nats-server
// refuses the "routes": null it would render).
func NodeFile(sec *access.Secrets, o Options, i int) (embedded.File, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return embedded.File{}, err
	}
	if i < 0 || i >= len(o.Nodes) {
		return embedded.File{}, fmt.Errorf("%w: no node %d", ErrOptions, i)
	}
	accounts, err := access.ServerConfig(sec)
	if err != nil {
		return embedded.File{}, err
	}
	mon, route := sec.Users[access.Monitor], sec.Users[access.RouteUser]
	if mon.Bcrypt == "" || route.Password == "" {
		return embedded.File{}, fmt.Errorf("kit: no monitor or route secret (access.Secrets.EnsureClusterUsers)")
	}
	n := o.Nodes[i]
	var routes []string
	for j, m := range o.Nodes {
		if j == i {
			continue
		}
		routes = append(routes, fmt.Sprintf("nats-route://%s:%s@%s:%d", access.RouteUser, route.Password, m.Host, m.ClusterPort))
	}
	store := o.StoreDir
	if n.StoreDir != "" {
		store = n.StoreDir
	}
	pub, sub := monitorPermissions()
	f := embedded.File{
		ServerName: n.Name, Host: o.ListenHost, Port: n.ClientPort,
		StoreDir: store, SyncAlways: true, MaxPayload: o.MaxPayload,
		HTTP:     fmt.Sprintf("%s:%d", o.HTTPHost, n.HTTPPort),
		Accounts: accounts,
		System: &embedded.SystemAccount{Name: access.SystemAccount, Users: []embedded.User{
			{User: access.Monitor, Password: mon.Bcrypt, Publish: pub, Subscribe: sub},
		}},
	}
	if len(o.Nodes) > 1 {
		f.Cluster = &embedded.Cluster{
			Name: o.Cluster, Listen: fmt.Sprintf("%s:%d", o.ListenHost, n.ClusterPort), Routes: routes,
			User: access.RouteUser, Password: route.Password,
		}
	}
	if o.TLSCert != "" {
		f.TLS = &embedded.TLSFiles{Cert: o.TLSCert, Key: o.TLSKey, CA: o.TLSCA}
	}
	if n.Zone != "" {
		f.Tags, f.UniqueTag = []string{ZoneTag + n.Zone}, ZoneTag
	}
	return f, nil
}

// Manifest describes a generated kit (ManifestFile).
type Manifest struct {
	// Options are the options it was generated with.
	Options Options `json:"options"`
	// Digests maps each node to the config_digest its server reports in
	// /varz when it runs the generated file.
	Digests map[string]string `json:"digests"`
}

// LoadSecrets reads the kit's secrets file in dir, or creates it, and
// gives it the cluster users' secrets.
func LoadSecrets(dir string, opts ...access.Option) (*access.Secrets, error) {
	path := filepath.Join(dir, SecretsFile)
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), opts...)
	if err != nil {
		return nil, err
	}
	changed, err := sec.EnsureClusterUsers(opts...)
	if err != nil {
		return nil, err
	}
	if leaf, err := EnsureReplicaUser(sec, opts...); err != nil {
		return nil, err
	} else if leaf {
		changed = true
	}
	if changed {
		if err := sec.Save(path); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// Generate writes the kit of o into dir with the secrets sec (see the
// package comment for the files). Running it again with the same secrets
// writes the same files.
func Generate(dir string, sec *access.Secrets, o Options) (*Manifest, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	man := &Manifest{Options: o, Digests: map[string]string{}}
	for i, n := range o.Nodes {
		f, err := NodeFile(sec, o, i)
		if err != nil {
			return nil, err
		}
		text, err := f.Render()
		if err == nil && o.Replica != nil {
			text, err = withPrimaryLeaf(text, sec, o, n)
		}
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, NodesDir, n.Name, ServerConfFile)
		if err := access.WriteFile(path, []byte(header+text)); err != nil {
			return nil, err
		}
		if man.Digests[n.Name], err = Digest(path); err != nil {
			return nil, err
		}
	}
	if o.Replica != nil {
		if err := writeReplica(dir, sec, o, man); err != nil {
			return nil, err
		}
	}
	for _, name := range access.ServiceNames() {
		if name == access.Admin {
			continue
		}
		if err := access.WriteFile(filepath.Join(dir, ServicesDir, name+".nk"), []byte(sec.Users[name].Seed+"\n")); err != nil {
			return nil, err
		}
	}
	// The backup job's nkey (the backup account's backup user).
	if err := access.WriteFile(filepath.Join(dir, ServicesDir, access.BackupUser+".nk"), []byte(sec.Users[access.BackupUser].Seed+"\n")); err != nil {
		return nil, err
	}
	if err := access.WriteFile(filepath.Join(dir, ServicesDir, ReplaySecretFile), []byte(sec.ReplaySecret+"\n")); err != nil {
		return nil, err
	}
	if err := access.WritePublishers(filepath.Join(dir, ServicesDir, PublishersFile), sec.People); err != nil {
		return nil, err
	}
	for _, f := range legacyServiceFiles {
		if err := os.Remove(filepath.Join(dir, ServicesDir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("kit: %w", err)
		}
	}
	url, ca := o.ClientURLs(), o.TLSCA
	if ca == "" && o.TLSCert != "" {
		ca = o.TLSCert // a self-signed certificate is its own CA
	}
	users := []struct{ name, desc string }{
		{access.Admin, "deadletter break-glass admin (keep offline)"},
		{access.Monitor, "deadletter monitoring (system account: server pings and /varz only)"},
		{access.BackupAdmin, "deadletter backup account's break-glass admin: creates the mirrors the backup user snapshots (keep offline)"},
	}
	for _, p := range sec.People {
		if p.Disabled {
			// A disabled person cannot connect: no password file or
			// context is left for it.
			for _, f := range []string{filepath.Join(dir, PasswordsDir, p.Name), filepath.Join(dir, ContextsDir, p.Name+".json")} {
				if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("kit: %w", err)
				}
			}
			continue
		}
		users = append(users, struct{ name, desc string }{p.Name, access.ContextDescription(p)})
	}
	for _, u := range users {
		if err := access.WriteFile(filepath.Join(dir, PasswordsDir, u.name), []byte(sec.Users[u.name].Password+"\n")); err != nil {
			return nil, err
		}
		c, err := sec.Context(u.name, u.desc, url, ca)
		if err != nil {
			return nil, err
		}
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("kit: context %s: %w", u.name, err)
		}
		if err := access.WriteFile(filepath.Join(dir, ContextsDir, u.name+".json"), append(b, '\n')); err != nil {
			return nil, err
		}
	}
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("kit: manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("kit: manifest: %w", err)
	}
	return man, nil
}

const header = "# Generated by `deadletter kit` from shared/access: do not edit, regenerate.\n"

// Digest returns the config_digest a server reports for the configuration
// file at path (the server's own digest function).
func Digest(path string) (string, error) {
	_, d, err := conf.ParseFileWithChecksDigest(path)
	if err != nil {
		return "", fmt.Errorf("kit: digest of %s: %w", path, err)
	}
	return d, nil
}

// LoadManifest reads the manifest of the kit in dir.
func LoadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("kit: %w", err)
	}
	m := &Manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("kit: manifest: %w", err)
	}
	return m, nil
}

// Service is a service process of a deployment.
type Service struct {
	// Name is the service (and its NATS user's) name.
	Name string
	// MetricsPort is its /metrics port: distinct per service, so that every
	// service of a host can serve it (DEADLETTER_METRICS_ADDR).
	MetricsPort int
}

// Services returns the service processes the deployment files run, with
// their metrics ports: config.MetricsPorts, the table the services' own
// defaults come from.
func Services() []Service {
	var out []Service
	for _, p := range config.MetricsPorts() {
		out = append(out, Service{Name: p.Name, MetricsPort: p.Port})
	}
	return out
}
