package auditor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
)

// Errors of checkpoint signing and anchors.
var (
	// ErrSigningKey: the signing key file is unusable (export.ErrSigningKey).
	ErrSigningKey = export.ErrSigningKey
	// ErrAnchor: an anchor is malformed, or its signature does not verify
	// with the caller's public key (export.ErrSignature).
	ErrAnchor = export.ErrSignature
	// ErrExport: a checkpoint could not be written to the export sink.
	ErrExport = errors.New("auditor: checkpoint export")
)

// NewSigningKey creates a checkpoint signing key file at path and returns
// its public key (export.NewSigningKey, which owns the signing keys).
func NewSigningKey(path string) (publicKey string, err error) { return export.NewSigningKey(path) }

// SigningPublicKey returns the public key of the signing key file at path
// (export.SigningPublicKey).
func SigningPublicKey(path string) (string, error) { return export.SigningPublicKey(path) }

// LoadSigningKey reads the signing key file at path
// (export.LoadSigningKey).
func LoadSigningKey(path string) (nkeys.KeyPair, error) { return export.LoadSigningKey(path) }

// VerifyExport checks an inspection export offline (export.Verify).
func VerifyExport(r io.Reader, pubKey string) (export.Report, error) { return export.Verify(r, pubKey) }

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
		if err := export.VerifyCheckpoint(a.cp.Checkpoint, pubKey); err != nil {
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

// leafOf is export.LeafOf, for the live view's tree (index.go).
func leafOf(seq uint64, auditHash string) merkle.Hash { return export.LeafOf(seq, auditHash) }
