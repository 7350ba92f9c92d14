package auditor

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/merkle"
)

// Errors of checkpoint signing and anchors.
var (
	// ErrSigningKey: the signing key file is unusable (unreadable, readable
	// by group or others, or not an nkeys account or user seed).
	ErrSigningKey = errors.New("auditor: signing key")
	// ErrAnchor: an anchor is malformed, or its signature does not verify
	// with the caller's public key.
	ErrAnchor = errors.New("auditor: anchor refused")
	// ErrExport: a checkpoint could not be written to the export sink.
	ErrExport = errors.New("auditor: checkpoint export")
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
	if err != nil || !signerKey(pub) {
		kp.Wipe()
		return nil, fmt.Errorf("%w: %s is not an account or user seed", ErrSigningKey, path)
	}
	return kp, nil
}

// signerKey reports whether pub is an nkeys account or user public key.
func signerKey(pub string) bool {
	return nkeys.IsValidPublicAccountKey(pub) || nkeys.IsValidPublicUserKey(pub)
}

// signCheckpoint sets cp's Key and Signature with kp.
func signCheckpoint(cp *api.Checkpoint, kp nkeys.KeyPair) error {
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

// signPage sets p's Key and Signature with kp, the checkpoints' key.
func signPage(p *api.ExportPage, kp nkeys.KeyPair) error {
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

// verifySigned checks that sig (base64) is key's signature of msg, and
// that key is pubKey, the key the verifier trusts.
func verifySigned(msg []byte, key, sig, pubKey string) error {
	if !signerKey(pubKey) {
		return fmt.Errorf("%w: the public key is not an nkeys account or user public key", ErrAnchor)
	}
	if sig == "" {
		return fmt.Errorf("%w: not signed", ErrAnchor)
	}
	if key != pubKey {
		return fmt.Errorf("%w: signed by key %.60q, not by the given public key", ErrAnchor, key)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: the signature is not base64", ErrAnchor)
	}
	kp, err := nkeys.FromPublicKey(pubKey)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAnchor, err)
	}
	if err := kp.Verify(msg, raw); err != nil {
		return fmt.Errorf("%w: the signature does not verify with the given public key", ErrAnchor)
	}
	return nil
}

// VerifyCheckpoint checks that cp is signed, by the holder of pubKey (an
// nkeys account or user public key supplied by the verifier, never read
// from the store). It returns an error wrapping ErrAnchor otherwise.
func VerifyCheckpoint(cp api.Checkpoint, pubKey string) error {
	if err := verifySigned(cp.SignedBytes(), cp.Key, cp.Signature, pubKey); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// anchor is a parsed, verified anchor.
type anchor struct {
	cp     api.ExportedCheckpoint
	root   merkle.Hash
	blocks []merkle.Hash // nil: the anchor has none
}

// parseAnchor reads an anchor (the last non-empty line of text), checks
// its signature with pubKey and that its blocks recombine into its root.
func parseAnchor(text, pubKey string) (*anchor, error) {
	line := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			line = l
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAnchor, err)
	}
	return parseAnchorLine([]byte(line), pubKey, true)
}

// parseAnchorLine parses one exported checkpoint; with signed, its
// signature must verify with pubKey (the auditor's own export file, read
// by an auditor that signs nothing, is parsed unsigned).
func parseAnchorLine(line []byte, pubKey string, signed bool) (*anchor, error) {
	var a anchor
	if err := json.Unmarshal(line, &a.cp); err != nil {
		return nil, fmt.Errorf("%w: not an exported checkpoint (JSON): %w", ErrAnchor, err)
	}
	if a.cp.Version < api.CheckpointVersionMerkle || a.cp.MerkleRoot == "" {
		return nil, fmt.Errorf("%w: the checkpoint has no Merkle root (version %d)", ErrAnchor, a.cp.Version)
	}
	if signed {
		if err := VerifyCheckpoint(a.cp.Checkpoint, pubKey); err != nil {
			return nil, err
		}
	}
	var err error
	if a.root, err = merkle.ParseHash(a.cp.MerkleRoot); err != nil {
		return nil, fmt.Errorf("%w: merkle_root: %w", ErrAnchor, err)
	}
	if a.cp.TreeSize != a.cp.Count {
		return nil, fmt.Errorf("%w: tree_size %d differs from count %d", ErrAnchor, a.cp.TreeSize, a.cp.Count)
	}
	if len(a.cp.Blocks) > 0 {
		a.blocks = make([]merkle.Hash, len(a.cp.Blocks))
		for i, s := range a.cp.Blocks {
			if a.blocks[i], err = merkle.ParseHash(s); err != nil {
				return nil, fmt.Errorf("%w: block %d: %w", ErrAnchor, i, err)
			}
		}
		root, err := merkle.RootFromBlocks(a.blocks, a.cp.BlockHeight, a.cp.TreeSize)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrAnchor, err)
		}
		if root != a.root {
			return nil, fmt.Errorf("%w: the blocks do not recombine into the signed merkle_root", ErrAnchor)
		}
	}
	return &a, nil
}

// leafOf returns the Merkle leaf hash of the record at seq with auditHash
// (api.MerkleAlgorithm).
func leafOf(seq uint64, auditHash string) merkle.Hash {
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

// exportLine appends one checkpoint line to the export sink: a file
// opened for appending, written and fsynced, or stdout for "-".
func exportLine(sink string, line []byte) error {
	line = append(line, '\n')
	if sink == "-" {
		if _, err := os.Stdout.Write(line); err != nil {
			return fmt.Errorf("%w: stdout: %w", ErrExport, err)
		}
		return nil
	}
	f, err := os.OpenFile(sink, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExport, err)
	}
	_, err = f.Write(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExport, err)
	}
	return nil
}
