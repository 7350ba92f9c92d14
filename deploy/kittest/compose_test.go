package kittest

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/deadletter/deadletter/shared/access/kit"
)

// TestCompose loads the Compose file with compose-go (schema-validated:
// an unknown key fails) and checks it runs the pinned nats image on the
// kit's node files, provision as a one-shot before the services, and each
// service from the one Dockerfile with its own nkey seed and metrics port.
func TestCompose(t *testing.T) {
	file := filepath.Join(repo, "deploy", "compose", "compose.yaml")
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: types.Mapping{"DEADLETTER_DOWNSTREAM_URL": "https://epcis.example/capture"},
	}, func(o *loader.Options) { o.SetProjectName("deadletter", true) })
	if err != nil {
		t.Fatal(err)
	}
	dir, man := generated(t, file)
	deploy := filepath.Dir(filepath.Dir(abs))
	generatedDir := filepath.Join(deploy, "generated")
	// rel is a host path of the Compose file, relative to deploy/generated.
	rel := func(src string) (string, bool) {
		r, err := filepath.Rel(generatedDir, src)
		return r, err == nil && !strings.HasPrefix(r, "..")
	}
	image := "nats:" + natsVersion(t)
	for _, n := range man.Options.Nodes {
		t.Run("node "+n.Name, func(t *testing.T) {
			s, ok := p.Services[n.Name]
			if !ok {
				t.Fatalf("no service %s", n.Name)
			}
			if s.Image != image || s.Restart != "always" {
				t.Errorf("image %s restart %s, want %s always", s.Image, s.Restart, image)
			}
			var conf, data, tls bool
			for _, v := range s.Volumes {
				switch v.Target {
				case "/etc/nats/nats-server.conf":
					r, ok := rel(v.Source)
					conf = ok && r == filepath.Join(kit.NodesDir, n.Name, kit.ServerConfFile) && v.ReadOnly
					mustExist(t, dir, r)
				case man.Options.StoreDir:
					data = v.Type == types.VolumeTypeVolume
				case filepath.Dir(man.Options.TLSCert):
					tls = v.ReadOnly
				}
			}
			if !conf || !data || !tls {
				t.Errorf("mounts: node file %v, store volume at %s %v, TLS %v", conf, man.Options.StoreDir, data, tls)
			}
			if strings.Join(s.Command, " ") != "-c /etc/nats/nats-server.conf" {
				t.Errorf("command %v", s.Command)
			}
		})
	}
	prov, ok := p.Services["provision"]
	if !ok {
		t.Fatal("no provision service")
	}
	if prov.Restart != "no" || prov.Environment["DEADLETTER_REPLICAS"] == nil || *prov.Environment["DEADLETTER_REPLICAS"] != "3" {
		t.Errorf("provision restart %q replicas %v", prov.Restart, prov.Environment["DEADLETTER_REPLICAS"])
	}
	secretFile := func(name string) string {
		sc, ok := p.Secrets[name]
		if !ok {
			t.Errorf("no secret %s", name)
			return ""
		}
		r, ok := rel(sc.File)
		if !ok {
			return ""
		}
		return r
	}
	if r := secretFile("admin"); r != filepath.Join(kit.PasswordsDir, "admin") {
		t.Errorf("admin secret from %s", r)
	}
	urls := man.Options.ClientURLs()
	for _, svc := range kit.Services() {
		t.Run(svc.Name, func(t *testing.T) {
			s, ok := p.Services[svc.Name]
			if !ok {
				t.Fatalf("no service %s", svc.Name)
			}
			if s.Build == nil || s.Build.Dockerfile != "deploy/Dockerfile" || s.Image != prov.Image || s.Restart != "always" {
				t.Errorf("build %+v image %s (provision's %s) restart %s", s.Build, s.Image, prov.Image, s.Restart)
			}
			if d, ok := s.DependsOn["provision"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("depends on provision: %+v", d)
			}
			env := func(k string) string {
				if v := s.Environment[k]; v != nil {
					return *v
				}
				return ""
			}
			if env("NATS_URL") != urls {
				t.Errorf("NATS_URL %s, want %s", env("NATS_URL"), urls)
			}
			if env("DEADLETTER_METRICS_ADDR") != ":"+strconv.Itoa(svc.MetricsPort) {
				t.Errorf("metrics %s, want :%d", env("DEADLETTER_METRICS_ADDR"), svc.MetricsPort)
			}
			nk := svc.Name + ".nk"
			if env("NATS_NKEY") != "/run/secrets/"+nk {
				t.Errorf("NATS_NKEY %s", env("NATS_NKEY"))
			}
			var has bool
			for _, sc := range s.Secrets {
				has = has || sc.Source == nk
			}
			if r := secretFile(nk); !has || r != filepath.Join(kit.ServicesDir, nk) {
				t.Errorf("seed secret %s from %s (mounted %v)", nk, r, has)
			}
			mustExist(t, dir, filepath.Join(kit.ServicesDir, nk))
		})
	}
}
