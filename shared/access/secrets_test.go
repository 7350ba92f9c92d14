package access_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/access"
)

// TestLegacyApprovalSeedIgnored: a credentials file written while the
// redriver signed approvals with a shared key (approval_seed, issue #28)
// still loads, every user's secret and every person kept, and is
// rewritten without the seed (issue #38: decisions are signed by their
// people's own keys). A file without it is left as it was.
func TestLegacyApprovalSeedIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		// seed is the approval_seed the file holds ("" for none, absent
		// for a file written after issue #38).
		seed    string
		present bool
	}{
		{name: "an nkey seed", seed: newServerSeed(t), present: true},
		{name: "an empty seed", seed: "", present: true},
		{name: "a seed that is no key: Müller & Söhne <陈伟>", seed: `Müller & Söhne <陈伟> "approval"`, present: true},
		{name: "no seed", present: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "credentials.json")
			sec, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if _, ok := doc["approval_seed"]; ok {
				t.Fatal("a new file holds approval_seed")
			}
			if tc.present {
				doc["approval_seed"] = tc.seed
			}
			if b, err = json.MarshalIndent(doc, "", "  "); err != nil {
				t.Fatal(err)
			}
			if err := access.WriteFile(path, b); err != nil {
				t.Fatal(err)
			}
			got, err := access.LoadOrCreate(path, access.DefaultPeople(), cheap)
			if err != nil {
				t.Fatalf("the earlier file does not load: %v", err)
			}
			if len(got.Users) != len(sec.Users) || len(got.People) != len(sec.People) || got.ReplaySecret != sec.ReplaySecret {
				t.Fatalf("loaded %d users, %d people; want %d, %d and the same replay secret", len(got.Users), len(got.People), len(sec.Users), len(sec.People))
			}
			for name, s := range sec.Users {
				if got.Users[name] != s {
					t.Errorf("the secret of %s changed", name)
				}
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(after, []byte("approval_seed")) {
				t.Error("the file still holds approval_seed after loading")
			}
			if !tc.present && !bytes.Equal(after, b) {
				t.Error("a file without approval_seed was rewritten")
			}
		})
	}
}

func newServerSeed(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateServer()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return string(seed)
}
