package decision_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

// BenchmarkSignWithKeyFile is what dlqctl does to sign an approval once
// it has what the server shows: read the key file, open it (scrypt N 2^15
// and XChaCha20-Poly1305), build and sign the decision.
func BenchmarkSignWithKeyFile(b *testing.B) {
	pass := []byte("Müller & Söhne <Großhandel>")
	kf, _, err := decision.NewKeyFile("chen.wei", pass)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "chen.wei.key")
	if err := decision.WriteKeyFile(path, kf); err != nil {
		b.Fatal(err)
	}
	a := approvalOf()
	b.ResetTimer()
	for b.Loop() {
		k, err := decision.ReadKeyFile(path)
		if err != nil {
			b.Fatal(err)
		}
		priv, err := k.Open(pass)
		if err != nil {
			b.Fatal(err)
		}
		_ = decision.SignEd25519(priv, decision.ForApproval(a, api.DecisionApprove, meaning, "chen.wei", "approver", time.Now()))
	}
}

// BenchmarkCheck is verify's extra cost per decision record once the
// registry is read: the person's record as of a time, the key's
// revocation, the ed25519 verification, role and state.
func BenchmarkCheck(b *testing.B) {
	srv := natstest.Start(b)
	srv.Provision(b, streams.DefaultOptions())
	js := srv.JetStream(b)
	ctx := context.Background()
	priv, key := newKey(b)
	for i, p := range []string{"amara.okafor", "jonas.mueller", "chen.wei", "elif.yilmaz", "lucia.ferreira"} {
		ks := []api.DecisionKey{}
		if p == "chen.wei" {
			ks = append(ks, key)
		}
		if _, err := decision.Publish(ctx, js, api.PersonKeys{Person: p, Roles: []string{"approver"}, Keys: ks, Event: "added", At: time.Now().Add(time.Duration(i))}); err != nil {
			b.Fatal(err)
		}
	}
	reg := decision.NewRegistry(js)
	sd := decision.SignEd25519(priv, decision.ForApproval(approvalOf(), api.DecisionApprove, meaning, "chen.wei", "approver", time.Now()))
	at := time.Now() // a record stored before verify began: no read of AUDIT
	if err := reg.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	if err := reg.Check(ctx, sd, at); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := reg.Check(ctx, sd, at); err != nil {
			b.Fatal(err)
		}
	}
}
