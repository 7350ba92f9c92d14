package kittest

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/deadletter/deadletter/shared/access/kit"
)

// hardening are the options every unit sets.
var hardening = map[string]string{
	"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
	"PrivateDevices": "yes", "CapabilityBoundingSet": "",
}

// known are the directives the units may use, by section: a typo is a
// directive systemd ignores with a warning, so it fails here.
var known = map[string][]string{
	"Unit":    {"Description", "Documentation", "After", "Wants"},
	"Install": {"WantedBy"},
	"Timer":   {"OnCalendar", "Persistent", "RandomizedDelaySec", "Unit"},
	"Service": {"Type", "User", "Group", "ExecStart", "ExecReload", "KillSignal", "TimeoutStopSec", "Restart", "RestartSec",
		"LimitNOFILE", "StateDirectory", "ReadWritePaths", "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp",
		"PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "RestrictSUIDSGID",
		"LockPersonality", "MemoryDenyWriteExecute", "CapabilityBoundingSet", "AmbientCapabilities", "RestrictAddressFamilies",
		"SystemCallArchitectures", "EnvironmentFile", "LoadCredential", "Environment", "TimeoutStartSec", "StateDirectoryMode"},
}

func readUnit(tb testing.TB, name string) map[string]map[string]string {
	tb.Helper()
	f, err := os.Open(filepath.Join(repo, "deploy", "systemd", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	out := map[string]map[string]string{}
	for _, o := range opts {
		if !contains(known[o.Section], o.Name) {
			tb.Errorf("%s: unknown directive [%s] %s", name, o.Section, o.Name)
		}
		if out[o.Section] == nil {
			out[o.Section] = map[string]string{}
		}
		if v, ok := out[o.Section][o.Name]; ok {
			// A repeated directive (LoadCredential): every value, one a line.
			out[o.Section][o.Name] = v + "\n" + o.Value
			continue
		}
		out[o.Section][o.Name] = o.Value
	}
	return out
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func readEnv(tb testing.TB, name string) map[string]string {
	tb.Helper()
	f, err := os.Open(filepath.Join(repo, "deploy", "systemd", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			tb.Fatalf("%s: %q is not NAME=value", name, line)
		}
		env[k] = v
	}
	return env
}

// TestSystemdUnits decodes every unit and checks restarts, hardening, and
// that each service's environment file points at the kit's cluster and at
// a metrics port of its own.
func TestSystemdUnits(t *testing.T) {
	tests := []struct {
		unit    string
		restart string
		typ     string
	}{
		{"nats-server.service", "always", "simple"},
		{"deadletter@.service", "always", "simple"},
		{"deadletter-provision.service", "", "oneshot"},
		{"deadletter-backup.service", "", "oneshot"},
		{"deadletter-replica-metrics.service", "always", "simple"},
	}
	for _, tc := range tests {
		t.Run(tc.unit, func(t *testing.T) {
			u := readUnit(t, tc.unit)
			svc := u["Service"]
			if svc["Restart"] != tc.restart || svc["Type"] != tc.typ {
				t.Errorf("Restart=%q Type=%q, want %q %q", svc["Restart"], svc["Type"], tc.restart, tc.typ)
			}
			for k, v := range hardening {
				if got, ok := svc[k]; !ok || got != v {
					t.Errorf("%s=%q, want %q", k, got, v)
				}
			}
			if svc["User"] == "" || svc["User"] == "root" {
				t.Errorf("runs as %q", svc["User"])
			}
		})
	}
	urls := kit.Cluster(3).ClientURLs()
	seen := map[int]string{}
	for _, s := range kit.Services() {
		t.Run(s.Name+".env", func(t *testing.T) {
			env := readEnv(t, s.Name+".env")
			if env["NATS_URL"] != urls {
				t.Errorf("NATS_URL=%s, want the kit's %s", env["NATS_URL"], urls)
			}
			if env["DEADLETTER_METRICS_ADDR"] != ":"+strconv.Itoa(s.MetricsPort) {
				t.Errorf("DEADLETTER_METRICS_ADDR=%s, want :%d", env["DEADLETTER_METRICS_ADDR"], s.MetricsPort)
			}
			if other, dup := seen[s.MetricsPort]; dup {
				t.Errorf("metrics port %d also %s's", s.MetricsPort, other)
			}
			seen[s.MetricsPort] = s.Name
			if s.Name != "auditor" && env["DEADLETTER_REPLICAS"] != "3" {
				t.Errorf("DEADLETTER_REPLICAS=%q, want 3", env["DEADLETTER_REPLICAS"])
			}
		})
	}
	// The instance unit loads the nkey seed the kit writes per service.
	u := readUnit(t, "deadletter@.service")
	if u["Service"]["LoadCredential"] != "nkey:/etc/deadletter/credentials/%i.nk" || u["Service"]["Environment"] != "NATS_NKEY=%d/nkey" {
		t.Errorf("credential %q %q", u["Service"]["LoadCredential"], u["Service"]["Environment"])
	}
	dir, _ := generated(t, filepath.Join(repo, "deploy", "compose", "compose.yaml"))
	for _, s := range kit.Services() {
		mustExist(t, dir, filepath.Join(kit.ServicesDir, s.Name+".nk"))
	}
}
