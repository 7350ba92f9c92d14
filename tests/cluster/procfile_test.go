// Package cluster checks `make cluster`'s generated files: the Procfiles
// and node configurations come from the same code the command runs
// (services/deadletter/cluster), and name every node and service process
// with its own identity, metrics port and credentials. goreman itself is
// not run here; `make cluster` is.
package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/services/deadletter/cluster"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/config"
)

func TestProcfiles(t *testing.T) {
	o := cluster.DefaultOptions()
	o.Dir, o.Bin, o.NATSServer = t.TempDir(), "/opt/deadletter/bin", "/opt/nats-server"
	o.SecretOptions = []access.Option{access.WithBcryptCost(bcrypt.MinCost)} // cheap under -race
	p, err := cluster.Prepare(o)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(o.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	nodes, services := read(cluster.NodesProcfile), read(cluster.ServicesProcfile)

	t.Run("nodes", func(t *testing.T) {
		if len(p.Nodes) != 3 || p.Kit.Options.Replicas != 3 {
			t.Fatalf("%d nodes, R%d", len(p.Nodes), p.Kit.Options.Replicas)
		}
		for _, n := range p.Kit.Options.Nodes {
			conf := filepath.Join(o.Dir, kit.NodesDir, n.Name, kit.ServerConfFile)
			want := n.Name + ": exec env /opt/nats-server -c " + conf
			if !slices.Contains(strings.Split(nodes, "\n"), want) {
				t.Errorf("Procfile.nodes lacks %q:\n%s", want, nodes)
			}
			text, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{`"sync_interval": "always"`, filepath.Join(o.Dir, "data", n.Name)} {
				if !strings.Contains(string(text), s) {
					t.Errorf("%s lacks %q", conf, s)
				}
			}
		}
	})

	t.Run("services", func(t *testing.T) {
		want := map[string]int{access.Validator: 2, access.Quarantiner: 2, access.Redriver: 1, access.Auditor: 1}
		got := map[string]int{}
		ports := map[string]string{}
		for _, s := range p.Services {
			svc := filepath.Base(s.Command[0])
			got[svc]++
			if !strings.Contains(services, s.Line()+"\n") {
				t.Errorf("Procfile.services lacks %s", s.Name)
			}
			env := strings.Join(s.Env, " ")
			for _, w := range []string{"NATS_URL=" + p.URLs, "NATS_NKEY=" + filepath.Join(o.Dir, kit.ServicesDir, svc+".nk"),
				"DEADLETTER_REPLICAS=3", "DEADLETTER_PROVISION=false", "DEADLETTER_CREATE_CONSUMER=false", "DEADLETTER_INSTANCE_INDEX="} {
				if !strings.Contains(env, w) {
					t.Errorf("%s: env lacks %s", s.Name, w)
				}
			}
			if _, err := os.Stat(filepath.Join(o.Dir, kit.ServicesDir, svc+".nk")); err != nil {
				t.Errorf("%s: %v", s.Name, err)
			}
			url := p.MetricsURLs()[s.Name]
			if other, dup := ports[url]; dup {
				t.Errorf("%s and %s share %s", s.Name, other, url)
			}
			ports[url] = s.Name
		}
		for _, sp := range config.MetricsPorts() {
			if got[sp.Name] != want[sp.Name] {
				t.Errorf("%d %s processes, want %d", got[sp.Name], sp.Name, want[sp.Name])
			}
		}
		if !slices.Contains(p.Provision.Command, "--replicas") || !strings.Contains(strings.Join(p.Provision.Env, " "), "NATS_USER="+access.Admin) {
			t.Errorf("provision %+v", p.Provision)
		}
		if _, err := os.Stat(p.Context(string(access.RolePublisher))); err != nil {
			t.Errorf("publisher context: %v", err)
		}
	})

	t.Run("regenerated identically", func(t *testing.T) {
		if _, err := cluster.Prepare(o); err != nil {
			t.Fatal(err)
		}
		if read(cluster.NodesProcfile) != nodes || read(cluster.ServicesProcfile) != services {
			t.Error("a second Prepare changed the Procfiles")
		}
	})
}

// TestProcLineQuotes: a path with a space or a quote stays one word for
// /bin/sh.
func TestProcLineQuotes(t *testing.T) {
	for _, tc := range []struct{ name, arg, want string }{
		{"plain", "/a/b", "x: exec env /a/b"},
		{"space", "/a b/c", "x: exec env '/a b/c'"},
		{"quote", "it's", `x: exec env 'it'\''s'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (cluster.Proc{Name: "x", Command: []string{tc.arg}}).Line(); got != tc.want {
				t.Errorf("Line() = %s, want %s", got, tc.want)
			}
		})
	}
}
