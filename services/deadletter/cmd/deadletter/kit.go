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
// cluster (package kit) into --out.
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
	if err := fs.Parse(args); err != nil {
		return err
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
	sec, err := kit.LoadSecrets(*dir)
	if err != nil {
		return err
	}
	m, err := kit.Generate(*dir, sec, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "generated a %d-node kit in %s (R%d):\n", len(m.Options.Nodes), *dir, m.Options.Replicas)
	for _, nd := range m.Options.Nodes {
		fmt.Fprintf(out, "  %s  %s  digest %s\n", nd.Name, filepath.Join(*dir, kit.NodesDir, nd.Name, kit.ServerConfFile), m.Digests[nd.Name])
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
