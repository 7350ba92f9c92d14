package auditor

import (
	"io"

	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
)

// Errors of checkpoint signing and anchors.
var (
	// ErrSigningKey: the signing key file is unusable (export.ErrSigningKey).
	ErrSigningKey = export.ErrSigningKey
	// ErrAnchor: an anchor is malformed, or its signature does not verify
	// with the caller's public key (anchor.ErrAnchor, export.ErrSignature).
	ErrAnchor = anchor.ErrAnchor
	// ErrExport: a checkpoint could not be written to the export sink
	// (anchor.ErrExport).
	ErrExport = anchor.ErrExport
	// ErrBehindAnchor: the store is behind the newest checkpoint the
	// auditor exported; no checkpoint is written over it
	// (anchor.ErrBehindAnchor).
	ErrBehindAnchor = anchor.ErrBehindAnchor
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

// leafOf is export.LeafOf, for the live view's tree (index.go).
func leafOf(seq uint64, auditHash string) merkle.Hash { return export.LeafOf(seq, auditHash) }
