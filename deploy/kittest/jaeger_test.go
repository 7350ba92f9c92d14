package kittest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	corev1 "k8s.io/api/core/v1"

	"github.com/deadletter/deadletter/shared/access/kit"
)

// jaegerOTLP is where the deployed services export their traces.
const jaegerOTLP = "http://jaeger:4318"

// jaegerImage is the official Jaeger v2 image of the Jaeger Go module
// pinned in deploy/tools/go.mod: Jaeger releases v1.N.0 and v2.(N-63).0
// together (v1.74.0 / v2.11.0, v1.75.0 / v2.12.0), so the UI a
// deployment opens is the release the tests ran against.
func jaegerImage(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "tools", "go.mod"))
	if err != nil {
		tb.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path != "github.com/jaegertracing/jaeger" {
			continue
		}
		v := r.Mod.Version
		minor, err := strconv.Atoi(strings.Split(strings.TrimPrefix(semver.MajorMinor(v), "v1."), ".")[0])
		if semver.Major(v) != "v1" || err != nil || minor < 63 {
			tb.Fatalf("jaeger module %s: not a v1 release paired with a v2 one", v)
		}
		return fmt.Sprintf("jaegertracing/jaeger:2.%d.0", minor-63)
	}
	tb.Fatal("deploy/tools does not require the jaeger module")
	return ""
}

// TestJaegerImage: the pairing of module and image versions.
func TestJaegerImage(t *testing.T) {
	if got := jaegerImage(t); got != "jaegertracing/jaeger:2.12.0" {
		t.Errorf("image %s for the pinned module (v1.75.0 pairs with 2.12.0)", got)
	}
}

// TestComposeJaeger: the Compose file runs the official Jaeger v2 image
// (it has the UI) on the host's loopback, and every service exports its
// traces to it.
func TestComposeJaeger(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join(repo, "deploy", "compose", "compose.yaml"))
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
	j, ok := p.Services["jaeger"]
	if !ok {
		t.Fatal("no jaeger service")
	}
	if j.Image != jaegerImage(t) || j.Restart != "always" {
		t.Errorf("jaeger image %s restart %s, want %s always", j.Image, j.Restart, jaegerImage(t))
	}
	var ui bool
	for _, port := range j.Ports {
		ui = ui || (port.Target == 16686 && port.Published == "16686" && port.HostIP == "127.0.0.1")
		if port.HostIP != "127.0.0.1" {
			t.Errorf("port %+v published beyond the host's loopback", port)
		}
	}
	if !ui {
		t.Errorf("the UI is not published on 127.0.0.1:16686: %+v", j.Ports)
	}
	for _, svc := range kit.Services() {
		s := p.Services[svc.Name]
		if v := s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; v == nil || *v != jaegerOTLP {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %v, want %s", svc.Name, v, jaegerOTLP)
		}
	}
}

// TestKubernetesJaeger: the manifests run the official Jaeger v2 image,
// hardened, with health probes, behind a Service whose OTLP/HTTP port is
// what every service's OTEL_EXPORTER_OTLP_ENDPOINT names.
func TestKubernetesJaeger(t *testing.T) {
	o := load(t, "services.yaml", "jaeger.yaml")
	d, ok := o.deployments["jaeger"]
	if !ok {
		t.Fatal("no Deployment jaeger")
	}
	c := d.Spec.Template.Spec.Containers[0]
	hardened(t, "jaeger", c)
	if c.Image != jaegerImage(t) {
		t.Errorf("image %s, want %s", c.Image, jaegerImage(t))
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/status" || p.HTTPGet.Port.StrVal != "health" {
			t.Errorf("%s probe %+v", name, p)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["otlp-http"] != 4318 || ports["query"] != 16686 || ports["health"] != 13133 {
		t.Errorf("container ports %v", ports)
	}
	svc, ok := o.services["jaeger"]
	if !ok {
		t.Fatal("no Service jaeger")
	}
	if svc.Spec.Selector["app.kubernetes.io/name"] != d.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Errorf("service selector %v, pod labels %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	sports := map[int32]string{}
	for _, p := range svc.Spec.Ports {
		sports[p.Port] = p.TargetPort.StrVal
	}
	if sports[4318] != "otlp-http" || sports[16686] != "query" {
		t.Errorf("service ports %v", sports)
	}
	for _, s := range kit.Services() {
		dep, ok := o.deployments["deadletter-"+s.Name]
		if !ok {
			t.Errorf("no Deployment deadletter-%s", s.Name)
			continue
		}
		if got := envOf(dep.Spec.Template.Spec.Containers[0])["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != "http://"+svc.Name+":4318" || got != jaegerOTLP {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %q, want %s", s.Name, got, jaegerOTLP)
		}
	}
}
