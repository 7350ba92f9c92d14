package kittest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
)

// repo is the repository root, from this module's directory.
const repo = "../.."

// natsVersion is the nats-server version the repository pins (shared's
// go.mod): the image every deployment file runs.
func natsVersion(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "shared", "go.mod"))
	if err != nil {
		tb.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", b, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "github.com/nats-io/nats-server/v2" {
			return strings.TrimPrefix(r.Mod.Version, "v")
		}
	}
	tb.Fatal("nats-server is not required by shared")
	return ""
}

// generated writes a kit with the flags a deployment file documents in its
// header (the `deadletter kit` command line) and returns its directory
// and manifest, so that a file is checked against what its own
// instructions generate.
func generated(tb testing.TB, file string) (string, *kit.Manifest) {
	tb.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	// The documented command: from "kit" to the end of its continued lines.
	m := regexp.MustCompile(`(?s)deadletter kit (.*?)\n#\s*(?:then|and) `).FindSubmatch(b)
	if m == nil {
		tb.Fatalf("%s documents no `deadletter kit` command", file)
	}
	args := strings.Fields(strings.NewReplacer("\\\n#", " ", "\n#", " ").Replace(string(m[1])))
	o := kit.Cluster(3)
	flags := map[string]string{}
	for i := 0; i+1 < len(args); i += 2 {
		flags[strings.TrimPrefix(args[i], "--")] = args[i+1]
	}
	for k, v := range flags {
		switch k {
		case "nodes":
			if v != "3" {
				tb.Fatalf("%s: %s nodes", file, v)
			}
		case "out":
		case "names", "hosts":
			parts := strings.Split(v, ",")
			for i := range o.Nodes {
				if k == "names" {
					o.Nodes[i].Name = parts[i]
				} else {
					o.Nodes[i].Host = parts[i]
				}
			}
		case "http-host":
			o.HTTPHost = v
		case "tls-cert":
			o.TLSCert = v
		case "tls-key":
			o.TLSKey = v
		case "tls-ca":
			o.TLSCA = v
		case "replica":
			if o.Replica == nil {
				o.Replica = &kit.Replica{Node: kit.Node{Host: v, ClientPort: kit.DefaultClientPort, HTTPPort: kit.DefaultHTTPPort}}
			}
			o.Replica.Name = v
		case "replica-host":
			if o.Replica == nil {
				o.Replica = &kit.Replica{Node: kit.Node{ClientPort: kit.DefaultClientPort, HTTPPort: kit.DefaultHTTPPort}}
			}
			o.Replica.Host = v
		default:
			tb.Fatalf("%s: flag --%s not understood by this test", file, k)
		}
	}
	if flags["hosts"] == "" {
		for i := range o.Nodes {
			o.Nodes[i].Host = o.Nodes[i].Name
		}
	}
	dir := tb.TempDir()
	sec, err := access.NewSecrets(access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := sec.EnsureClusterUsers(access.WithBcryptCost(access.MinBcryptCost)); err != nil {
		tb.Fatal(err)
	}
	if _, err := kit.EnsureReplicaUser(sec, access.WithBcryptCost(access.MinBcryptCost)); err != nil {
		tb.Fatal(err)
	}
	man, err := kit.Generate(dir, sec, o)
	if err != nil {
		tb.Fatalf("%s: the documented kit does not generate: %v", file, err)
	}
	return dir, man
}

// mustExist fails unless rel exists in the generated kit dir.
func mustExist(tb testing.TB, dir, rel string) {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
		tb.Errorf("the kit has no %s", rel)
	}
}

// TestDockerfileBuildsEveryService checks the one image builds every
// service's command, each a package that exists.
func TestDockerfileBuildsEveryService(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\nFROM ")) + 1; n < 2 {
		t.Errorf("%d stages, want a multi-stage build", n)
	}
	for _, s := range append(kit.Services(), kit.Service{Name: "provision"}) {
		pkg := fmt.Sprintf("./services/%s/cmd/%s", s.Name, s.Name)
		if s.Name == "provision" {
			pkg = "./services/deadletter/cmd/provision"
		}
		if !bytes.Contains(b, []byte(pkg)) {
			t.Errorf("the Dockerfile does not build %s", pkg)
		}
		if _, err := os.Stat(filepath.Join(repo, pkg, "main.go")); err != nil {
			t.Errorf("%s: %v", pkg, err)
		}
	}
}

// retired are what the deployment files named for the redriver's shared
// approval key (issue #28), which no service reads since decisions are
// signed by their people's own keys (issue #38, ADR 0022): the kit no
// longer writes the files, and no deployment may mount or name them.
var retired = []string{"DEADLETTER_APPROVAL_SEED_FILE", "DEADLETTER_APPROVAL_KEY_FILE", "approval.seed", "approval.pub"}

// TestNoApprovalKeyDeployed: no deployment file (systemd, Compose,
// Kubernetes, the Dockerfile) names the retired approval key's files or
// variables, and the kit its instructions generate holds neither file.
func TestNoApprovalKeyDeployed(t *testing.T) {
	var files []string
	for _, d := range []string{"systemd", "compose", "k8s"} {
		es, err := os.ReadDir(filepath.Join(repo, "deploy", d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			files = append(files, filepath.Join(repo, "deploy", d, e.Name()))
		}
	}
	files = append(files, filepath.Join(repo, "deploy", "Dockerfile"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range retired {
			if bytes.Contains(b, []byte(r)) {
				t.Errorf("%s names %s", f, r)
			}
		}
	}
	dir, _ := generated(t, filepath.Join(repo, "deploy", "compose", "compose.yaml"))
	for _, f := range []string{"approval.seed", "approval.pub"} {
		if _, err := os.Stat(filepath.Join(dir, kit.ServicesDir, f)); err == nil {
			t.Errorf("the kit writes %s", f)
		}
	}
}
