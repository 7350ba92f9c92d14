package kittest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/deadletter/deadletter/shared/access/kit"
)

// objects decodes every document of a manifest file strictly (an unknown
// field fails) into its k8s.io/api type.
type objects struct {
	statefulSets map[string]*appsv1.StatefulSet
	deployments  map[string]*appsv1.Deployment
	jobs         map[string]*batchv1.Job
	cronJobs     map[string]*batchv1.CronJob
	services     map[string]*corev1.Service
	pvcs         map[string]*corev1.PersistentVolumeClaim
}

func load(tb testing.TB, files ...string) objects {
	tb.Helper()
	o := objects{map[string]*appsv1.StatefulSet{}, map[string]*appsv1.Deployment{}, map[string]*batchv1.Job{}, map[string]*batchv1.CronJob{}, map[string]*corev1.Service{}, map[string]*corev1.PersistentVolumeClaim{}}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repo, "deploy", "k8s", f))
		if err != nil {
			tb.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			var meta struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				tb.Fatalf("%s #%d: %v", f, i, err)
			}
			var obj any
			var name func() string
			switch meta.Kind {
			case "StatefulSet":
				v := &appsv1.StatefulSet{}
				obj, name = v, func() string { o.statefulSets[v.Name] = v; return v.Name }
			case "Deployment":
				v := &appsv1.Deployment{}
				obj, name = v, func() string { o.deployments[v.Name] = v; return v.Name }
			case "Job":
				v := &batchv1.Job{}
				obj, name = v, func() string { o.jobs[v.Name] = v; return v.Name }
			case "CronJob":
				v := &batchv1.CronJob{}
				obj, name = v, func() string { o.cronJobs[v.Name] = v; return v.Name }
			case "Service":
				v := &corev1.Service{}
				obj, name = v, func() string { o.services[v.Name] = v; return v.Name }
			case "PersistentVolumeClaim":
				v := &corev1.PersistentVolumeClaim{}
				obj, name = v, func() string { o.pvcs[v.Name] = v; return v.Name }
			default:
				tb.Fatalf("%s #%d: unexpected kind %q", f, i, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				tb.Fatalf("%s #%d (%s): %v", f, i, meta.Kind, err)
			}
			if name() == "" {
				tb.Fatalf("%s #%d: no name", f, i)
			}
		}
	}
	return o
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func hardened(tb testing.TB, what string, c corev1.Container) {
	tb.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
		!*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		tb.Errorf("%s: container not hardened: %+v", what, sc)
	}
}

// TestKubernetes decodes the manifests into their k8s.io/api types and
// checks the StatefulSet runs the pinned image on the kit's node files
// (the Secret's keys are the kit's node names), every service has a
// Deployment with probes on its own metrics port and its own nkey seed,
// and provision is a Job.
func TestKubernetes(t *testing.T) {
	o := load(t, "nats.yaml", "services.yaml", "provision-job.yaml")
	dir, man := generated(t, filepath.Join(repo, "deploy", "k8s", "nats.yaml"))
	ss, ok := o.statefulSets["nats"]
	if !ok {
		t.Fatal("no StatefulSet nats")
	}
	if *ss.Spec.Replicas != int32(len(man.Options.Nodes)) {
		t.Errorf("%d replicas, %d nodes", *ss.Spec.Replicas, len(man.Options.Nodes))
	}
	// Pod names are <statefulset>-<ordinal>: the kit's node names must be
	// those, and their hosts the headless service's names.
	for i, n := range man.Options.Nodes {
		if want := ss.Name + "-" + strconv.Itoa(i); n.Name != want || n.Host != want+"."+ss.Spec.ServiceName {
			t.Errorf("node %d is %s on %s, want the pod %s", i, n.Name, n.Host, want)
		}
		mustExist(t, dir, filepath.Join(kit.NodesDir, n.Name, kit.ServerConfFile))
	}
	c := ss.Spec.Template.Spec.Containers[0]
	hardened(t, "nats", c)
	if c.Image != "nats:"+natsVersion(t) {
		t.Errorf("image %s", c.Image)
	}
	if strings.Join(c.Args, " ") != "-c /etc/nats/config/$(POD_NAME).conf" {
		t.Errorf("args %v", c.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	n0 := man.Options.Nodes[0]
	if ports["client"] != int32(n0.ClientPort) || ports["cluster"] != int32(n0.ClusterPort) || ports["monitor"] != int32(n0.HTTPPort) {
		t.Errorf("ports %v, kit %d %d %d", ports, n0.ClientPort, n0.ClusterPort, n0.HTTPPort)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Port.StrVal != "monitor" {
		t.Error("the nats container needs HTTP probes on the monitoring port")
	}
	if man.Options.HTTPHost != "0.0.0.0" {
		t.Errorf("the kit's monitoring binds %s: the kubelet's probes cannot reach it", man.Options.HTTPHost)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["data"] != man.Options.StoreDir || mounts["tls"] != filepath.Dir(man.Options.TLSCert) {
		t.Errorf("mounts %v, kit store %s TLS %s", mounts, man.Options.StoreDir, man.Options.TLSCert)
	}
	var configSecret string
	for _, v := range ss.Spec.Template.Spec.Volumes {
		if v.Name == "config" && v.Secret != nil {
			configSecret = v.Secret.SecretName
		}
	}
	if configSecret != "nats-config" {
		t.Errorf("config volume from secret %q", configSecret)
	}

	urls := man.Options.ClientURLs()
	for _, svc := range kit.Services() {
		t.Run(svc.Name, func(t *testing.T) {
			d, ok := o.deployments["deadletter-"+svc.Name]
			if !ok {
				t.Fatalf("no Deployment deadletter-%s", svc.Name)
			}
			c := d.Spec.Template.Spec.Containers[0]
			hardened(t, svc.Name, c)
			env := envOf(c)
			if env["NATS_URL"] != urls || env["DEADLETTER_METRICS_ADDR"] != ":"+strconv.Itoa(svc.MetricsPort) {
				t.Errorf("NATS_URL %s (want %s), metrics %s", env["NATS_URL"], urls, env["DEADLETTER_METRICS_ADDR"])
			}
			if len(c.Ports) != 1 || c.Ports[0].ContainerPort != int32(svc.MetricsPort) {
				t.Errorf("ports %v, want %d", c.Ports, svc.MetricsPort)
			}
			for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.StrVal != c.Ports[0].Name {
					t.Errorf("%s probe %+v", name, p)
				}
			}
			nk := svc.Name + ".nk"
			var seed bool
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret == nil || v.Name != "credentials" {
					continue
				}
				for _, it := range v.Secret.Items {
					seed = seed || it.Key == nk
				}
			}
			if !seed || !strings.HasSuffix(env["NATS_NKEY"], "/"+nk) {
				t.Errorf("seed %s mounted %v, NATS_NKEY %s", nk, seed, env["NATS_NKEY"])
			}
			mustExist(t, dir, filepath.Join(kit.ServicesDir, nk))
		})
	}
	j, ok := o.jobs["deadletter-provision"]
	if !ok {
		t.Fatal("no provision Job")
	}
	jc := j.Spec.Template.Spec.Containers[0]
	if envOf(jc)["NATS_URL"] != urls || !strings.Contains(strings.Join(jc.Command, " "), "--replicas 3") {
		t.Errorf("provision job %v %v", jc.Command, jc.Env)
	}
	mustExist(t, dir, filepath.Join(kit.PasswordsDir, "admin"))
}
