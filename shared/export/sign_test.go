package export_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
)

// TestSignedCheckpoint: a checkpoint signed with the key file verifies
// with its public key and with no other; an unsigned or altered one is
// refused. A new forgery is one row.
func TestSignedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	pub, err := export.NewSigningKey(filepath.Join(dir, "signing.nk"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := export.NewSigningKey(filepath.Join(dir, "other.nk"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := export.SigningPublicKey(filepath.Join(dir, "signing.nk")); err != nil || got != pub {
		t.Fatalf("SigningPublicKey = %q, %v; want %q", got, err, pub)
	}
	kp, err := export.LoadSigningKey(filepath.Join(dir, "signing.nk"))
	if err != nil {
		t.Fatal(err)
	}
	signed := api.Checkpoint{Version: api.CheckpointVersionMerkle, Algorithm: api.CheckpointAlgorithm, LastSeq: 42, Count: 7,
		At: time.Date(2026, 12, 5, 14, 30, 0, 0, time.UTC), Instance: "Pharmacie Saint-Étienne <auditor-1>"}
	if err := export.SignCheckpoint(&signed, kp); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cp     func() api.Checkpoint
		pubKey string
		ok     bool
	}{
		{"signed", func() api.Checkpoint { return signed }, pub, true},
		{"another key", func() api.Checkpoint { return signed }, other, false},
		{"not a public key", func() api.Checkpoint { return signed }, "Müller & Söhne <Großhandel>", false},
		{"unsigned", func() api.Checkpoint { c := signed; c.Signature = ""; return c }, pub, false},
		{"count altered", func() api.Checkpoint { c := signed; c.Count++; return c }, pub, false},
		{"signature not base64", func() api.Checkpoint { c := signed; c.Signature = "<&>"; return c }, pub, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := export.VerifyCheckpoint(tc.cp(), tc.pubKey)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, export.ErrSignature)) {
				t.Errorf("VerifyCheckpoint = %v, want ok %v (else ErrSignature)", err, tc.ok)
			}
		})
	}
}
