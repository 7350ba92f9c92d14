// Package anchor is the auditor's checkpoint part (Checkpoints): it
// writes the signed checkpoints to AUDIT (audit.checkpoint, and at start,
// periodically and at shutdown), appends each to the export sink, reads
// them back for audit.verify, and checks the store against its own anchor
// (the export file's last line), refusing to write a checkpoint over a
// store behind it. It also parses and checks an anchor a caller gives (an
// exported, signed checkpoint with its Merkle root and blocks). The
// recomputation of the tree an anchor is compared with is verify's.
package anchor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
)

// Errors of anchors and the export sink.
var (
	// ErrAnchor: an anchor is malformed, or its signature does not verify
	// with the caller's public key (export.ErrSignature).
	ErrAnchor = export.ErrSignature
	// ErrExport: a checkpoint could not be written to the export sink.
	ErrExport = errors.New("auditor: checkpoint export")
)

// MaxLine bounds the last line of the export file read as the own anchor
// (a checkpoint line with its blocks is far smaller).
const MaxLine = 16 << 20

// Anchor is a parsed, verified anchor.
type Anchor struct {
	// CP is the exported checkpoint.
	CP api.ExportedCheckpoint
	// Root is its Merkle root.
	Root merkle.Hash
	// Blocks are its block roots; nil: the anchor has none.
	Blocks []merkle.Hash
}

// Parse reads an anchor (the last non-empty line of text), checks its
// signature with pubKey and that its blocks recombine into its root.
func Parse(text, pubKey string) (*Anchor, error) {
	line := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			line = l
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAnchor, err)
	}
	return ParseLine([]byte(line), pubKey, true)
}

// ParseLine parses one exported checkpoint; with signed, its signature
// must verify with pubKey (the auditor's own export file, read by an
// auditor that signs nothing, is parsed unsigned).
func ParseLine(line []byte, pubKey string, signed bool) (*Anchor, error) {
	var a Anchor
	if err := json.Unmarshal(line, &a.CP); err != nil {
		return nil, fmt.Errorf("%w: not an exported checkpoint (JSON): %w", ErrAnchor, err)
	}
	if a.CP.Version < api.CheckpointVersionMerkle || a.CP.MerkleRoot == "" {
		return nil, fmt.Errorf("%w: the checkpoint has no Merkle root (version %d)", ErrAnchor, a.CP.Version)
	}
	if signed {
		if err := export.VerifyCheckpoint(a.CP.Checkpoint, pubKey); err != nil {
			return nil, err
		}
	}
	var err error
	if a.Root, err = merkle.ParseHash(a.CP.MerkleRoot); err != nil {
		return nil, fmt.Errorf("%w: merkle_root: %w", ErrAnchor, err)
	}
	if a.CP.TreeSize != a.CP.Count {
		return nil, fmt.Errorf("%w: tree_size %d differs from count %d", ErrAnchor, a.CP.TreeSize, a.CP.Count)
	}
	if len(a.CP.Blocks) > 0 {
		a.Blocks = make([]merkle.Hash, len(a.CP.Blocks))
		for i, s := range a.CP.Blocks {
			if a.Blocks[i], err = merkle.ParseHash(s); err != nil {
				return nil, fmt.Errorf("%w: block %d: %w", ErrAnchor, i, err)
			}
		}
		root, err := merkle.RootFromBlocks(a.Blocks, a.CP.BlockHeight, a.CP.TreeSize)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrAnchor, err)
		}
		if root != a.Root {
			return nil, fmt.Errorf("%w: the blocks do not recombine into the signed merkle_root", ErrAnchor)
		}
	}
	return &a, nil
}

// AppendLine appends one checkpoint line to the export sink: a file
// opened for appending, written and fsynced, or stdout for "-".
func AppendLine(sink string, line []byte) error {
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

// LastLine returns the last non-empty line of the file at path, reading
// it backwards from its end (the file grows by a line per checkpoint for
// years), at most max bytes.
func LastLine(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	const chunk = 64 << 10
	var tail []byte
	for off := size; off > 0; {
		n := int64(chunk)
		if off < n {
			n = off
		}
		off -= n
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, err
		}
		tail = append(buf, tail...)
		trimmed := bytes.TrimRight(tail, " \t\r\n")
		if i := bytes.LastIndexByte(trimmed, '\n'); i >= 0 {
			return bytes.TrimSpace(trimmed[i+1:]), nil
		}
		if int64(len(tail)) > max {
			return nil, fmt.Errorf("the last line of %s is longer than %d bytes", path, max)
		}
	}
	return bytes.TrimSpace(tail), nil
}
