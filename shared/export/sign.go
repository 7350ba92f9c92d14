package export

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/merkle"
)

// Errors of signing and of signature checks.
var (
	// ErrSigningKey: the signing key file is unusable (unreadable, readable
	// by group or others, or not an nkeys account or user seed).
	ErrSigningKey = errors.New("auditor: signing key")
	// ErrSignature: a signed checkpoint, page or anchor is unsigned, or its
	// signature does not verify with the caller's public key (the
	// auditor's anchors refuse with it too: the text is theirs).
	ErrSignature = errors.New("auditor: anchor refused")
)

// NewSigningKey creates a checkpoint signing key: a new nkeys account
// seed written to path (created with mode 0600; it must not exist), and
// returns its public key, the key verifiers pass to audit.verify. Keep
// the file outside the NATS store directory (an insider with the store
// must not have the key) and set Config.SigningKeyFile to it. The
// all-in-one stack calls it once, at its first start.
func NewSigningKey(path string) (publicKey string, err error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	_, werr := f.Write(append(seed, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("%w: %w", ErrSigningKey, werr)
	}
	return pub, nil
}

// SigningPublicKey returns the public key of the signing key file at path
// (checked as Config.SigningKeyFile is).
func SigningPublicKey(path string) (string, error) {
	kp, err := loadSigningKey(path)
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// LoadSigningKey reads the signing key file at path (checked as
// Config.SigningKeyFile is): the key a backup's manifest is signed with.
func LoadSigningKey(path string) (nkeys.KeyPair, error) { return loadSigningKey(path) }

// loadSigningKey reads an nkeys account or user seed from path, refusing
// a file that group or others may read or write.
func loadSigningKey(path string) (nkeys.KeyPair, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrSigningKey, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; it must be readable by its owner only (0600)", ErrSigningKey, path, perm)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	defer clear(b)
	kp, err := nkeys.FromSeed(bytes.TrimSpace(b))
	if err != nil {
		return nil, fmt.Errorf("%w: %s holds no nkeys seed: %w", ErrSigningKey, path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !SignerKey(pub) {
		kp.Wipe()
		return nil, fmt.Errorf("%w: %s is not an account or user seed", ErrSigningKey, path)
	}
	return kp, nil
}

// SignerKey reports whether pub is an nkeys account or user public key.
func SignerKey(pub string) bool {
	return nkeys.IsValidPublicAccountKey(pub) || nkeys.IsValidPublicUserKey(pub)
}

// SignCheckpoint sets cp's Key and Signature with kp.
func SignCheckpoint(cp *api.Checkpoint, kp nkeys.KeyPair) error {
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	cp.Key = pub
	sig, err := kp.Sign(cp.SignedBytes())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	cp.Signature = base64.StdEncoding.EncodeToString(sig)
	return nil
}

// SignPage sets p's Key and Signature with kp, the checkpoints' key.
func SignPage(p *api.ExportPage, kp nkeys.KeyPair) error {
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	p.Key = pub
	sig, err := kp.Sign(p.SignedBytes())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSigningKey, err)
	}
	p.Signature = base64.StdEncoding.EncodeToString(sig)
	return nil
}

// VerifySigned checks that sig (base64) is key's signature of msg, and
// that key is pubKey, the key the verifier trusts.
func VerifySigned(msg []byte, key, sig, pubKey string) error {
	if !SignerKey(pubKey) {
		return fmt.Errorf("%w: the public key is not an nkeys account or user public key", ErrSignature)
	}
	if sig == "" {
		return fmt.Errorf("%w: not signed", ErrSignature)
	}
	if key != pubKey {
		return fmt.Errorf("%w: signed by key %.60q, not by the given public key", ErrSignature, key)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: the signature is not base64", ErrSignature)
	}
	kp, err := nkeys.FromPublicKey(pubKey)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if err := kp.Verify(msg, raw); err != nil {
		return fmt.Errorf("%w: the signature does not verify with the given public key", ErrSignature)
	}
	return nil
}

// VerifyCheckpoint checks that cp is signed, by the holder of pubKey (an
// nkeys account or user public key supplied by the verifier, never read
// from the store). It returns an error wrapping ErrSignature otherwise.
func VerifyCheckpoint(cp api.Checkpoint, pubKey string) error {
	if err := VerifySigned(cp.SignedBytes(), cp.Key, cp.Signature, pubKey); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// LeafOf returns the Merkle leaf hash of the record at seq with auditHash
// (api.MerkleAlgorithm).
func LeafOf(seq uint64, auditHash string) merkle.Hash {
	var b [8 + merkle.Size]byte
	binary.BigEndian.PutUint64(b[:8], seq)
	n := 8
	if len(auditHash) == 2*merkle.Size {
		if _, err := hex.Decode(b[8:], []byte(auditHash)); err == nil {
			n = len(b)
		}
	}
	return merkle.LeafHash(b[:n])
}
