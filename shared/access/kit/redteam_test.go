package kit_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
)

// token is a run of the characters seeds, hex and base64 are written in.
var token = regexp.MustCompile(`[A-Za-z0-9+/=_-]{32,}`)

// candidateKeys reads every token of text that could be an ed25519
// private key: an nkey seed of any type, 32 or 64 bytes of hex, standard
// or URL-safe base64. nkeys counts the nkey seeds among them.
func candidateKeys(text string) (keys []ed25519.PrivateKey, nkeySeeds int) {
	add := func(b []byte) {
		switch len(b) {
		case ed25519.SeedSize:
			keys = append(keys, ed25519.NewKeyFromSeed(b))
		case ed25519.PrivateKeySize:
			keys = append(keys, ed25519.PrivateKey(b))
		}
	}
	for _, t := range token.FindAllString(text, -1) {
		if _, raw, err := nkeys.DecodeSeed([]byte(t)); err == nil {
			add(raw)
			nkeySeeds++
			continue
		}
		if b, err := hex.DecodeString(t); err == nil {
			add(b)
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(t); err == nil {
				add(b)
			}
		}
	}
	return keys, nkeySeeds
}

// TestRedTeamNoServiceFileSignsADecision (issue #38, E5): no file the kit
// writes for a service holds a key that can sign a person's decision.
// Every token of every file under services/ that could be an ed25519
// private key (the services' nkey seeds, the replay secret, anything in
// hex or base64) signs an approval as chen.wei and a hold lift as Lúcia,
// claiming each person's registered key: every registered key refuses it.
// A kit regenerated over an earlier version's keeps none of the shared
// approval key's files (approval.seed, approval.pub).
func TestRedTeamNoServiceFileSignsADecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before writes what an earlier kit left in the directory.
		before func(t *testing.T, dir string)
	}{
		{name: "a new kit", before: func(*testing.T, string) {}},
		{name: "a kit regenerated over one with the shared approval key", before: func(t *testing.T, dir string) {
			kp, err := nkeys.CreateServer()
			if err != nil {
				t.Fatal(err)
			}
			seed, _ := kp.Seed()
			pub, _ := kp.PublicKey()
			for name, text := range map[string]string{"approval.seed": string(seed), "approval.pub": pub} {
				if err := access.WriteFile(filepath.Join(dir, kit.ServicesDir, name), []byte(text+"\n")); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.before(t, dir)
			sec, err := kit.LoadSecrets(dir, access.WithBcryptCost(bcrypt.MinCost))
			if err != nil {
				t.Fatal(err)
			}
			// The approvers register their own keys, as `deadletter people
			// key add` does; the private halves stay with them.
			registered := map[string]api.DecisionKey{}
			for _, person := range access.DefaultPersonsOf(access.RoleApprover) {
				pub, _, err := ed25519.GenerateKey(rand.Reader)
				if err != nil {
					t.Fatal(err)
				}
				k, err := decision.Ed25519Key(decision.KeyID(pub), "laptop of "+person)
				if err != nil {
					t.Fatal(err)
				}
				if err := sec.AddKey(person, k, "admin"); err != nil {
					t.Fatal(err)
				}
				registered[person] = k
			}
			if _, err := kit.Generate(dir, sec, loopback(3)); err != nil {
				t.Fatal(err)
			}
			for _, legacy := range []string{"approval.seed", "approval.pub"} {
				if _, err := os.Stat(filepath.Join(dir, kit.ServicesDir, legacy)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("services/%s is still in the kit (%v)", legacy, err)
				}
			}
			entries, err := os.ReadDir(filepath.Join(dir, kit.ServicesDir))
			if err != nil {
				t.Fatal(err)
			}
			a := api.Approval{ID: "appr-20261207T203000-4f1c", Action: "correct", DLQID: "dscsa_SSCC-0614141.1234567890", Domain: "dscsa",
				Requester: "amara.okafor", RequesterRole: "operator", ChainHead: "9f2c",
				Payload: []byte(`{"bizLocation":"urn:epc:id:sgln:0614141.00001.0","note":"Müller & Söhne <Lager 3>, \"dringend\" — 陈伟"}`)}
			lift := api.HoldLiftRequest{ID: "hold-20261207-0001", Reason: "DEA inquiry closed: Müller & Söhne <Großhandel>"}
			at := time.Date(2026, 12, 7, 20, 30, 0, 0, time.UTC)
			var tried, seeds int
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, kit.ServicesDir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				keys, n := candidateKeys(string(b))
				seeds += n
				for _, priv := range keys {
					tried++
					for person, k := range registered {
						if string(priv.Public().(ed25519.PublicKey)) == string(k.Public) {
							t.Fatalf("services/%s holds %s's registered decision key", e.Name(), person)
						}
						for _, d := range []api.Decision{
							decision.ForApproval(a, api.DecisionApprove, "geprüft", person, "approver", at),
							decision.ForHold(lift, person, "approver", at),
						} {
							sd := decision.SignEd25519(priv, d)
							sd.Signature.KeyID = k.ID // claims the person's key
							if err := decision.Verify(k, sd); !errors.Is(err, decision.ErrBadSignature) {
								t.Errorf("services/%s: a %s decision signed with a key it holds, claimed as %s's: %v, want ErrBadSignature", e.Name(), d.Action, person, err)
							}
						}
					}
				}
			}
			// Not vacuous: every service's and the backup user's nkey seed
			// was read, and the replay secret (32 bytes of hex).
			if want := len(kit.Services()) + 1; seeds < want || tried < seeds+1 {
				t.Errorf("%d nkey seeds and %d keys tried, want at least %d seeds and the replay secret", seeds, tried, want)
			}
			t.Logf("%d files, %d candidate keys (%d nkey seeds) tried against %d registered keys", len(entries), tried, seeds, len(registered))
		})
	}
}
