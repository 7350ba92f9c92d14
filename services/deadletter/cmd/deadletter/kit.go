package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/deadletter/deadletter/shared/access/kit"
)

// runKit is `deadletter kit`: it generates the deployment kit of a
// cluster (package kit) into --out, with --replica the second copy's
// server too (kit.Replica: docs/operations/failover.md).
func runKit(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("kit", flag.ContinueOnError)
	n := fs.Int("nodes", 3, "number of nodes")
	dir := fs.String("out", "deploy/generated", "output directory (its secrets.json is reused: regenerating yields the same files)")
	hosts := fs.String("hosts", "", "comma-separated host of each node (default n1..nN)")
	names := fs.String("names", "", "comma-separated server name of each node (default n1..nN)")
	clientPort := fs.Int("client-port", kit.DefaultClientPort, "client port of node 1 (with --port-step, each next node adds the step)")
	clusterPort := fs.Int("cluster-port", kit.DefaultClusterPort, "cluster port of node 1")
	httpPort := fs.Int("http-port", kit.DefaultHTTPPort, "monitoring port of node 1")
	step := fs.Int("port-step", 0, "port increment per node (for several nodes on one host)")
	cluster := fs.String("cluster", kit.DefaultCluster, "cluster name")
	listen := fs.String("listen-host", kit.DefaultListenHost, "address the client and cluster ports bind to")
	httpHost := fs.String("http-host", kit.DefaultHTTPHost, "address the monitoring port binds to (no authentication: keep it loopback or private)")
	store := fs.String("store-dir", kit.DefaultStoreDir, "JetStream store directory on each node (a {node} in it is replaced by the node's name)")
	tlsCert := fs.String("tls-cert", "", "TLS certificate path on the nodes")
	tlsKey := fs.String("tls-key", "", "TLS key path on the nodes")
	tlsCA := fs.String("tls-ca", "", "TLS CA path on the nodes (verifies routes; clients' contexts use it)")
	replicas := fs.Int("replicas", 0, "stream replicas (default min(nodes, 3))")
	zones := fs.String("zones", "", "comma-separated failure domain of each node (e.g. a,b,c): every stream's replicas are placed in distinct zones, so at least --replicas zones")
	rName := fs.String("replica", "", "server name of the second copy's replica server (kit.Replica; default none): every node gets a JetStream domain and a leaf listener, the replica a file of its own")
	rHost := fs.String("replica-host", "", "host the replica's clients dial (default the --replica name)")
	rClient := fs.Int("replica-client-port", kit.DefaultClientPort, "client port of the replica")
	rHTTP := fs.Int("replica-http-port", kit.DefaultHTTPPort, "monitoring port of the replica")
	rStore := fs.String("replica-store-dir", "", "JetStream store directory of the replica (default --store-dir, a {node} in it replaced by the replica's name)")
	rDomain := fs.String("replica-domain", kit.DefaultReplicaDomain, "JetStream domain of the replica")
	pDomain := fs.String("primary-domain", kit.DefaultPrimaryDomain, "JetStream domain of the primary cluster (the replica's mirrors reach it through $JS.<domain>.API)")
	leafPort := fs.Int("leaf-port", kit.DefaultLeafPort, "port on which node 1 accepts the replica's leaf node connection (with --port-step, each next node adds the step)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kit: unexpected arguments %q", fs.Args())
	}
	o := kit.Cluster(*n)
	o.Cluster, o.ListenHost, o.HTTPHost = *cluster, *listen, *httpHost
	o.TLSCert, o.TLSKey, o.TLSCA = *tlsCert, *tlsKey, *tlsCA
	if *replicas > 0 {
		o.Replicas = *replicas
	}
	hs, ns, zs := split(*hosts), split(*names), split(*zones)
	if (len(hs) > 0 && len(hs) != *n) || (len(ns) > 0 && len(ns) != *n) || (len(zs) > 0 && len(zs) != *n) {
		return fmt.Errorf("kit: --hosts, --names and --zones need %d entries", *n)
	}
	for i := range o.Nodes {
		nd := &o.Nodes[i]
		if len(ns) > 0 {
			nd.Name = ns[i]
		}
		nd.Host = nd.Name
		if len(hs) > 0 {
			nd.Host = hs[i]
		}
		nd.ClientPort, nd.ClusterPort, nd.HTTPPort = *clientPort+i**step, *clusterPort+i**step, *httpPort+i**step
		nd.StoreDir = strings.ReplaceAll(*store, "{node}", nd.Name)
		if len(zs) > 0 {
			nd.Zone = zs[i]
		}
	}
	if *rName != "" {
		r := &kit.Replica{Node: kit.Node{Name: *rName, Host: *rHost, ClientPort: *rClient, HTTPPort: *rHTTP},
			Domain: *rDomain, PrimaryDomain: *pDomain, LeafPort: *leafPort}
		if r.Host == "" {
			r.Host = r.Name
		}
		r.StoreDir = strings.ReplaceAll(*store, "{node}", r.Name)
		if *rStore != "" {
			r.StoreDir = strings.ReplaceAll(*rStore, "{node}", r.Name)
		}
		o.Replica = r
		if *step != 0 {
			for i := range o.Nodes {
				o.Nodes[i].LeafPort = *leafPort + i**step
			}
		}
	} else {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "replica-") || f.Name == "primary-domain" || f.Name == "leaf-port" {
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return fmt.Errorf("kit: %s without --replica", strings.Join(set, ", "))
		}
	}
	sec, err := kit.LoadSecrets(*dir, secretOptions...)
	if err != nil {
		return err
	}
	m, err := kit.Generate(*dir, sec, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "generated a %d-node kit in %s (R%d):\n", len(m.Options.Nodes), *dir, m.Options.Replicas)
	for _, nd := range m.Options.Nodes {
		leaf := ""
		if r := m.Options.Replica; r != nil {
			leaf = fmt.Sprintf("  leaf port %d", r.LeafPort)
			if nd.LeafPort != 0 {
				leaf = fmt.Sprintf("  leaf port %d", nd.LeafPort)
			}
		}
		fmt.Fprintf(out, "  %s  %s  digest %s%s\n", nd.Name, filepath.Join(*dir, kit.NodesDir, nd.Name, kit.ServerConfFile), m.Digests[nd.Name], leaf)
	}
	if r := m.Options.Replica; r != nil {
		fmt.Fprintf(out, "  replica %s  %s  digest %s (domain %s, the primary's %s)\n", r.Name, kit.ReplicaConfPath(*dir, r.Name), m.Digests[r.Name],
			r.Domain, r.PrimaryDomain)
		fmt.Fprintf(out, "  then: the backup account's mirrors on the primary, the replica's mirrors of them (dlqctl --server nats://%s:%d replica mirrors --credentials %s --primary-domain %s --replicas 1): docs/operations/failover.md\n",
			r.Host, r.ClientPort, filepath.Join(*dir, kit.SecretsFile), r.PrimaryDomain)
	}
	fmt.Fprintf(out, "  services' nkey seeds: %s/<service>.nk; passwords: %s/<user>; natscli contexts: %s/<user>.json\n",
		filepath.Join(*dir, kit.ServicesDir), filepath.Join(*dir, kit.PasswordsDir), filepath.Join(*dir, kit.ContextsDir))
	fmt.Fprintf(out, "  NATS_URL=%s\n", o.ClientURLs())
	fmt.Fprintf(out, "  people: deadletter people ls|add|disable|enable|rotate --kit %s (docs/operations/people.md)\n", *dir)
	return nil
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}
