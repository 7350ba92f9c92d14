package anchor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Rotated anchors (issue #40, O4). `deadletter anchors rotate` begins a
// new store on purpose: it moves the export file of the earlier store
// aside under RotatedName, kept, so that the earlier store's backup is
// still verified against it. The next auditor that starts names each such
// file in AUDIT (RecordRotated): the new store says for good which
// earlier anchors it was begun beside, when and with what last
// checkpoint, so that a deleted store is never silently taken for a new
// one.

// rotatedInfix separates an export file's name from a rotation's time.
const rotatedInfix = ".before-"

// rotatedLayout is a rotation's time in a rotated file's name (a valid
// subject token too).
const rotatedLayout = "20060102T150405Z"

// RotatedName is where `deadletter anchors rotate` moves exportFile at
// time at: "checkpoints.before-20261207T193000Z.jsonl" beside it.
func RotatedName(exportFile string, at time.Time) string {
	ext := filepath.Ext(exportFile)
	return strings.TrimSuffix(exportFile, ext) + rotatedInfix + at.UTC().Format(rotatedLayout) + ext
}

// RotatedFile is an earlier store's export file moved aside.
type RotatedFile struct {
	// Path is the file; At the rotation's time (from its name).
	Path string    `json:"path"`
	At   time.Time `json:"at"`
	// SHA256 is the digest (hex) of the file's bytes; LastSeq, TreeSize
	// and AuditSeq are its last checkpoint's (zero when unreadable).
	SHA256   string `json:"sha256"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	TreeSize uint64 `json:"tree_size,omitempty"`
	AuditSeq uint64 `json:"audit_seq,omitempty"`
}

// Rotated lists the files moved aside beside exportFile, oldest first.
func Rotated(exportFile, pubKey string) ([]RotatedFile, error) {
	if exportFile == "" || exportFile == "-" {
		return nil, nil
	}
	ext := filepath.Ext(exportFile)
	prefix := filepath.Base(strings.TrimSuffix(exportFile, ext)) + rotatedInfix
	ents, err := os.ReadDir(filepath.Dir(exportFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAnchor, err)
	}
	var out []RotatedFile
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ext) {
			continue
		}
		at, err := time.Parse(rotatedLayout, strings.TrimSuffix(strings.TrimPrefix(name, prefix), ext))
		if err != nil {
			continue
		}
		path := filepath.Join(filepath.Dir(exportFile), name)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrAnchor, err)
		}
		sum := sha256.Sum256(b)
		rf := RotatedFile{Path: path, At: at, SHA256: hex.EncodeToString(sum[:])}
		if line, err := LastLine(path, MaxLine); err == nil && len(line) > 0 {
			if a, err := ParseLine(line, pubKey, pubKey != ""); err == nil {
				rf.LastSeq, rf.TreeSize, rf.AuditSeq = a.CP.LastSeq, a.CP.TreeSize, a.CP.AuditSeq
			}
		}
		out = append(out, rf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// ActionAnchorsRotated is the AUDIT action that names a rotated export
// file (object "anchors", id the rotation's time).
const ActionAnchorsRotated = "anchors_rotated"

// RecordRotated names in AUDIT every rotated export file beside the
// auditor's export file that AUDIT does not name yet
// (subjects.AuditAction("anchors", <time>), one message per rotation,
// written only if none is there). It returns the rotations written.
func (p *Checkpoints) RecordRotated(ctx context.Context) ([]RotatedFile, error) {
	pub := ""
	if p.cfg.Signer != nil {
		pub, _ = p.cfg.Signer.PublicKey()
	}
	files, err := Rotated(p.cfg.ExportFile, pub)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	var wrote []RotatedFile
	for _, rf := range files {
		id := rf.At.UTC().Format(rotatedLayout)
		subj := subjects.AuditAction("anchors", id)
		_, err := p.audit.GetLastMsgForSubject(ctx, subj)
		if err == nil {
			continue
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return wrote, fmt.Errorf("auditor: read %s: %w", subj, err)
		}
		detail, _ := json.Marshal(rf)
		b, _ := json.Marshal(api.AuditAction{Action: ActionAnchorsRotated, Object: "anchors", ObjectID: id,
			Actor: p.cfg.Instance, At: p.cfg.Now().UTC(), Reason: "a new store begun beside the anchors of an earlier one (deadletter anchors rotate)",
			Detail: detail})
		// Written only when the subject holds nothing: two auditors
		// starting at once name a rotation once.
		if _, err := p.cfg.JS.Publish(ctx, subj, b, jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				continue
			}
			return wrote, fmt.Errorf("auditor: write %s: %w", subj, err)
		}
		p.cfg.Log.Info("earlier anchors named in AUDIT", "file", rf.Path, "rotated_at", rf.At, "sha256", rf.SHA256, "last_seq", rf.LastSeq)
		wrote = append(wrote, rf)
	}
	return wrote, nil
}
