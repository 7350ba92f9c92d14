package kittest

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
)

// replicaMetricsPort is where every deployment file's replica lag
// exporter (dlqctl replica metrics) serves /metrics.
const replicaMetricsPort = 9468

// replicaURL is the replica's client URL in a kit's manifest.
func replicaURL(tb testing.TB, man *kit.Manifest) string {
	tb.Helper()
	r := man.Options.Replica
	if r == nil {
		tb.Fatal("the documented kit has no replica (--replica)")
		return ""
	}
	return "nats://" + r.Host + ":" + strconv.Itoa(r.ClientPort)
}

// checkExporterPort: the exporter's port is none of the services'.
func checkExporterPort(tb testing.TB, port int) {
	tb.Helper()
	if port != replicaMetricsPort {
		tb.Errorf("the exporter serves :%d, want :%d", port, replicaMetricsPort)
	}
	for _, s := range kit.Services() {
		if s.MetricsPort == port {
			tb.Errorf("the exporter's port %d is %s's", port, s.Name)
		}
	}
}

// TestBackupAndReplicaSystemd: the backup timer runs the backup service,
// which runs `dlqctl backup` as the backup user (the kit's backup.nk, its
// inbox, a Unix user of its own) against the kit's cluster, signed with
// the audit key, into a new directory each run; the replica's lag
// exporter reads the replica of the kit its header generates with the
// auditor's nkey, on a port no service uses.
func TestBackupAndReplicaSystemd(t *testing.T) {
	timer := readUnit(t, "deadletter-backup.timer")
	if timer["Timer"]["Unit"] != "deadletter-backup.service" || timer["Timer"]["OnCalendar"] == "" || timer["Timer"]["Persistent"] != "true" ||
		timer["Install"]["WantedBy"] != "timers.target" {
		t.Errorf("timer %v", timer)
	}
	dir, man := generated(t, filepath.Join(repo, "deploy", "compose", "compose.yaml"))
	svc := readUnit(t, "deadletter-backup.service")["Service"]
	creds := strings.Split(svc["LoadCredential"], "\n")
	if !slices.Contains(creds, "nkey:/etc/deadletter/credentials/"+access.BackupUser+".nk") || svc["Environment"] != "NATS_NKEY=%d/nkey" {
		t.Errorf("credentials %q, environment %q: want the backup user's nkey", creds, svc["Environment"])
	}
	mustExist(t, dir, filepath.Join(kit.ServicesDir, access.BackupUser+".nk"))
	if svc["User"] == "deadletter" || svc["User"] == "root" || svc["StateDirectory"] == "" {
		t.Errorf("runs as %q (want a user of its own, not the services'), state directory %q", svc["User"], svc["StateDirectory"])
	}
	exec := svc["ExecStart"]
	for _, want := range []string{"/usr/local/bin/dlqctl backup ", "$${STATE_DIRECTORY}/$$(date -u ", "--signing-key \"$${CREDENTIALS_DIRECTORY}/signing\""} {
		if !strings.Contains(exec, want) {
			t.Errorf("ExecStart %q lacks %q", exec, want)
		}
	}
	if strings.Contains(exec, "--services-account") || strings.Contains(exec, "--credentials") {
		t.Errorf("ExecStart %q: the backup job holds the backup user's nkey only", exec)
	}
	env := readEnv(t, "backup.env")
	if env["NATS_URL"] != man.Options.ClientURLs() || env["NATS_INBOX_PREFIX"] != access.InboxPrefix(access.BackupUser) {
		t.Errorf("backup.env %v: want the kit's %s and the backup user's inbox", env, man.Options.ClientURLs())
	}

	rdir, rman := generated(t, filepath.Join(repo, "deploy", "systemd", "deadletter-replica-metrics.service"))
	mustExist(t, rdir, filepath.Join(kit.NodesDir, rman.Options.Replica.Name, kit.ServerConfFile))
	rsvc := readUnit(t, "deadletter-replica-metrics.service")["Service"]
	if rsvc["LoadCredential"] != "nkey:/etc/deadletter/credentials/"+access.Auditor+".nk" {
		t.Errorf("credential %q: want the auditor's nkey (a reader)", rsvc["LoadCredential"])
	}
	if !strings.HasPrefix(rsvc["ExecStart"], "/usr/local/bin/dlqctl replica metrics --listen :") {
		t.Fatalf("ExecStart %q", rsvc["ExecStart"])
	}
	port, err := strconv.Atoi(strings.TrimPrefix(rsvc["ExecStart"], "/usr/local/bin/dlqctl replica metrics --listen :"))
	if err != nil {
		t.Fatal(err)
	}
	checkExporterPort(t, port)
	renv := readEnv(t, "replica-metrics.env")
	if renv["NATS_URL"] != replicaURL(t, rman) || renv["NATS_INBOX_PREFIX"] != access.InboxPrefix(access.Auditor) {
		t.Errorf("replica-metrics.env %v: want the kit's replica %s and the auditor's inbox", renv, replicaURL(t, rman))
	}
}

// TestBackupAndReplicaCompose: the backup one-shot (profile backup) runs
// `dlqctl backup` as the backup user into the backups volume, the lag
// exporter (profile replica) reads the replica with the auditor's nkey.
func TestBackupAndReplicaCompose(t *testing.T) {
	file := filepath.Join(repo, "deploy", "compose", "compose.yaml")
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: types.Mapping{"DEADLETTER_DOWNSTREAM_URL": "https://epcis.example/capture", "BACKUP_NAME": "2026-12-06T031500Z"},
	}, func(o *loader.Options) {
		o.SetProjectName("deadletter", true)
		o.Profiles = []string{"backup", "replica"}
	})
	if err != nil {
		t.Fatal(err)
	}
	dir, man := generated(t, file)
	env := func(s types.ServiceConfig, k string) string {
		if v := s.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	secretFrom := func(s types.ServiceConfig, name string) string {
		var mounted bool
		for _, sc := range s.Secrets {
			mounted = mounted || sc.Source == name
		}
		sc, ok := p.Secrets[name]
		if !mounted || !ok {
			t.Errorf("%s: secret %s mounted %v, declared %v", s.Name, name, mounted, ok)
			return ""
		}
		r, err := filepath.Rel(filepath.Join(filepath.Dir(filepath.Dir(abs)), "generated"), sc.File)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	b, ok := p.Services["backup"]
	if !ok {
		t.Fatal("no backup service")
	}
	if !slices.Contains(b.Profiles, "backup") || b.Restart != "no" || b.Entrypoint[0] != "/usr/local/bin/dlqctl" ||
		strings.Join(b.Command[:2], " ") != "backup /backups/2026-12-06T031500Z" || !slices.Contains(b.Command, "--signing-key") {
		t.Errorf("backup: profiles %v restart %s entrypoint %v command %v", b.Profiles, b.Restart, b.Entrypoint, b.Command)
	}
	if env(b, "NATS_URL") != man.Options.ClientURLs() || env(b, "NATS_NKEY") != "/run/secrets/backup.nk" || env(b, "NATS_INBOX_PREFIX") != access.InboxPrefix(access.BackupUser) {
		t.Errorf("backup environment %v", b.Environment)
	}
	if r := secretFrom(b, "backup.nk"); r != filepath.Join(kit.ServicesDir, access.BackupUser+".nk") {
		t.Errorf("backup.nk from %s", r)
	}
	mustExist(t, dir, filepath.Join(kit.ServicesDir, access.BackupUser+".nk"))
	secretFrom(b, "audit-signing.nk")
	var vol bool
	for _, v := range b.Volumes {
		vol = vol || (v.Type == types.VolumeTypeVolume && v.Target == "/backups")
	}
	if !vol {
		t.Errorf("backup volumes %v: want a volume at /backups", b.Volumes)
	}
	for _, s := range p.Services {
		for _, sc := range s.Secrets {
			if s.Name != "backup" && sc.Source == "backup.nk" {
				t.Errorf("%s mounts the backup user's nkey", s.Name)
			}
		}
	}

	r, ok := p.Services["replica-metrics"]
	if !ok {
		t.Fatal("no replica-metrics service")
	}
	if !slices.Contains(r.Profiles, "replica") || r.Restart != "always" || strings.Join(r.Command, " ") != "replica metrics --listen :"+strconv.Itoa(replicaMetricsPort)+" --tlsca /etc/nats/tls/ca.crt" {
		t.Errorf("replica-metrics: profiles %v restart %s command %v", r.Profiles, r.Restart, r.Command)
	}
	checkExporterPort(t, replicaMetricsPort)
	if env(r, "NATS_NKEY") != "/run/secrets/auditor.nk" || env(r, "NATS_INBOX_PREFIX") != access.InboxPrefix(access.Auditor) || env(r, "NATS_URL") != "nats://dr1:4222" {
		t.Errorf("replica-metrics environment %v", r.Environment)
	}
	secretFrom(r, "auditor.nk")
}

// TestBackupAndReplicaKubernetes: the backup CronJob (never two at once)
// runs `dlqctl backup` as the backup user against the kit's cluster into a
// new directory per Job on its volume; the lag exporter's Deployment reads
// the replica of the kit its header generates, with probes on its port.
func TestBackupAndReplicaKubernetes(t *testing.T) {
	o := load(t, "backup.yaml", "replica-metrics.yaml")
	_, man := generated(t, filepath.Join(repo, "deploy", "k8s", "nats.yaml"))
	cj, ok := o.cronJobs["deadletter-backup"]
	if !ok {
		t.Fatal("no CronJob deadletter-backup")
	}
	if cj.Spec.ConcurrencyPolicy != "Forbid" || cj.Spec.Schedule == "" {
		t.Errorf("schedule %q concurrency %q", cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	c := pod.Containers[0]
	hardened(t, "backup", c)
	cmd := strings.Join(c.Command, " ")
	if !strings.HasPrefix(cmd, "/usr/local/bin/dlqctl backup /backups/$(POD_NAME) --signing-key ") {
		t.Errorf("command %s", cmd)
	}
	var podName bool
	for _, e := range c.Env {
		podName = podName || (e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name")
	}
	env := envOf(c)
	if !podName || env["NATS_URL"] != man.Options.ClientURLs() || env["NATS_NKEY"] != "/etc/deadletter/credentials/backup.nk" || env["NATS_INBOX_PREFIX"] != access.InboxPrefix(access.BackupUser) {
		t.Errorf("env %v (POD_NAME from the pod's name: %v)", c.Env, podName)
	}
	var seed, backups bool
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Name == "credentials" {
			for _, it := range v.Secret.Items {
				seed = seed || it.Key == access.BackupUser+".nk"
				if it.Key != access.BackupUser+".nk" {
					t.Errorf("the backup job mounts %s", it.Key)
				}
			}
		}
		if v.PersistentVolumeClaim != nil {
			_, backups = o.pvcs[v.PersistentVolumeClaim.ClaimName]
		}
	}
	if !seed || !backups {
		t.Errorf("backup.nk mounted %v, backups volume claimed %v", seed, backups)
	}

	_, rman := generated(t, filepath.Join(repo, "deploy", "k8s", "replica-metrics.yaml"))
	d, ok := o.deployments["deadletter-replica-metrics"]
	if !ok {
		t.Fatal("no Deployment deadletter-replica-metrics")
	}
	rc := d.Spec.Template.Spec.Containers[0]
	hardened(t, "replica-metrics", rc)
	renv := envOf(rc)
	if renv["NATS_URL"] != replicaURL(t, rman) || renv["NATS_NKEY"] != "/etc/deadletter/credentials/auditor.nk" || renv["NATS_INBOX_PREFIX"] != access.InboxPrefix(access.Auditor) {
		t.Errorf("env %v, want the kit's replica %s", renv, replicaURL(t, rman))
	}
	if len(rc.Ports) != 1 {
		t.Fatalf("ports %v", rc.Ports)
	}
	checkExporterPort(t, int(rc.Ports[0].ContainerPort))
	if strings.Join(rc.Command, " ") != "/usr/local/bin/dlqctl replica metrics --listen :"+strconv.Itoa(int(rc.Ports[0].ContainerPort))+" --tlsca /etc/nats/tls/ca.crt" {
		t.Errorf("command %v", rc.Command)
	}
	if rc.LivenessProbe == nil || rc.LivenessProbe.HTTPGet == nil || rc.LivenessProbe.HTTPGet.Port.StrVal != rc.Ports[0].Name || rc.ReadinessProbe == nil {
		t.Error("the exporter needs HTTP probes on its port")
	}
}
