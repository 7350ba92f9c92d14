// Package export writes and verifies inspection exports: the JSONL file
// of chains with their inclusion proofs under a signed checkpoint that the
// auditor's export endpoint pages out (Writer, Write), and its offline
// verification (Verify), with the signing keys and signatures they carry
// (sign.go). The auditor serves the pages; dlqctl and the console write
// the file and verify it, without the auditor service package.
package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/merkle"
	"github.com/deadletter/deadletter/shared/record"
)

// ErrRefused: an inspection export does not verify (Verify).
var ErrRefused = errors.New("export refused")

// maxExportLine bounds one line of a JSONL export (a chain).
const maxExportLine = 64 << 20

// Report is what Verify checked.
type Report struct {
	// Chains and Records are those the file holds; Uncovered what its end
	// line says was left out (stored after the checkpoint).
	Chains, Records, Uncovered int
	// Checkpoint is the signed checkpoint the export is proved against.
	Checkpoint api.ExportedCheckpoint
}

// Writer writes a JSONL inspection export (api.ExportLine) as its
// pages arrive: the header and checkpoint first, then per page one line
// per chain and the page's signed manifest (Page), and on Close the end
// line, which counts the chains and records and says how many records
// were left out (stored after the checkpoint).
type Writer struct {
	bw  *bufio.Writer
	end api.ExportEnd
}

// line writes one export line in the export's one form
// (api.EncodeExportLine: records byte for byte what the page digest
// hashed).
func (x *Writer) line(l api.ExportLine) error { return api.EncodeExportLine(x.bw, l) }

// NewWriter writes the header h and the checkpoint cp to w.
func NewWriter(w io.Writer, h api.ExportHeader, cp api.ExportedCheckpoint) (*Writer, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	x := &Writer{bw: bw}
	if err := x.line(api.ExportLine{Header: &h}); err != nil {
		return nil, err
	}
	if err := x.line(api.ExportLine{Checkpoint: &cp}); err != nil {
		return nil, err
	}
	return x, nil
}

// Chain writes one chain.
func (x *Writer) Chain(c api.ExportChain) error {
	x.end.Chains++
	x.end.Records += len(c.Records)
	return x.line(api.ExportLine{Chain: &c})
}

// Page writes a page's chains and its signed manifest.
func (x *Writer) Page(rep api.ExportReply) error {
	for _, c := range rep.Chains {
		if err := x.Chain(c); err != nil {
			return err
		}
	}
	return x.line(api.ExportLine{Page: &rep.Page})
}

// Close writes the end line (uncovered records left out) and flushes.
func (x *Writer) Close(uncovered int) error {
	x.end.Uncovered = uncovered
	if err := x.line(api.ExportLine{End: &x.end}); err != nil {
		return err
	}
	return x.bw.Flush()
}

// Write writes a whole JSONL export of the pages with an
// Writer.
func Write(w io.Writer, h api.ExportHeader, pages []api.ExportReply) error {
	if len(pages) == 0 {
		return errors.New("export: no page")
	}
	x, err := NewWriter(w, h, pages[0].Checkpoint)
	if err != nil {
		return err
	}
	uncovered := 0
	for _, p := range pages {
		if err := x.Page(p); err != nil {
			return err
		}
		uncovered += p.Uncovered
	}
	return x.Close(uncovered)
}

// Verify checks a JSONL inspection export (api.ExportLine) with no
// server: its header; its checkpoint's signature by pubKey (the key the
// verifier trusts, never the file's); every chain's seals and links
// (record.VerifyChain), that each record names its chain, and each
// record's RFC 6962 inclusion proof (api.MerkleAlgorithm leaf) against
// the signed Merkle root, with github.com/transparency-dev/merkle/proof;
// no chain twice; every page's signed manifest (api.ExportPage): signed
// by pubKey, of the header's filter and the checkpoint, its digest equal
// to the chains before it (api.ExportPageDigest, over each record in its
// one export form, api.ExportRecordJSON: files whose records were
// HTML-escaped by an older writer verify too), its cursor the previous page's next cursor (the
// first page's empty), and the last page's next cursor empty, so that no
// chain, record or page of the export can be left out unseen; and the end
// line's counts. The first problem refuses the file: the error wraps
// ErrRefused and says which line and why.
func Verify(r io.Reader, pubKey string) (Report, error) {
	var rep Report
	refuse := func(line int, format string, args ...any) (Report, error) {
		return rep, fmt.Errorf("%w: line %d: %s", ErrRefused, line, fmt.Sprintf(format, args...))
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxExportLine)
	var (
		cp     *api.ExportedCheckpoint
		header api.ExportHeader
		root   merkle.Hash
		seen   = map[string]bool{}
		end    *api.ExportEnd
		n      int
		pages  int
		next   string            // the cursor the next page must answer
		last   = true            // the previous page was the last
		page   []api.ExportChain // the chains since the last manifest
	)
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if end != nil {
			return refuse(n, "content after the end line")
		}
		var l api.ExportLine
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return refuse(n, "not an export line (JSON): %v", err)
		}
		switch {
		case n == 1:
			if l.Header == nil || l.Header.Format != api.ExportFormat {
				return refuse(n, "not a header of format %s", api.ExportFormat)
			}
			header = *l.Header
		case l.Header != nil:
			return refuse(n, "a second header")
		case l.Checkpoint != nil:
			if cp != nil {
				return refuse(n, "a second checkpoint")
			}
			c := *l.Checkpoint
			if c.Version < api.CheckpointVersionMerkle || c.MerkleRoot == "" {
				return refuse(n, "the checkpoint has no Merkle root")
			}
			if err := VerifyCheckpoint(c.Checkpoint, pubKey); err != nil {
				return refuse(n, "checkpoint (AUDIT seq %d): %v", c.AuditSeq, err)
			}
			if c.TreeSize != c.Count {
				return refuse(n, "checkpoint tree_size %d differs from count %d", c.TreeSize, c.Count)
			}
			var err error
			if root, err = merkle.ParseHash(c.MerkleRoot); err != nil {
				return refuse(n, "checkpoint merkle_root: %v", err)
			}
			cp = &c
			rep.Checkpoint = c
		case l.Chain != nil:
			if cp == nil {
				return refuse(n, "a chain before the checkpoint")
			}
			if err := verifyExportChain(*l.Chain, cp.Checkpoint, root); err != nil {
				return refuse(n, "chain %.80q: %v", l.Chain.DLQID, err)
			}
			if seen[l.Chain.DLQID] {
				return refuse(n, "chain %.80q a second time", l.Chain.DLQID)
			}
			seen[l.Chain.DLQID] = true
			rep.Chains++
			rep.Records += len(l.Chain.Records)
			page = append(page, *l.Chain)
		case l.Page != nil:
			if cp == nil {
				return refuse(n, "a page before the checkpoint")
			}
			if err := verifyPage(*l.Page, header, *cp, page, pubKey); err != nil {
				return refuse(n, "page %d: %v", pages+1, err)
			}
			switch {
			case pages == 0 && l.Page.Cursor != "":
				return refuse(n, "page 1 answers cursor %q: the export's first pages are missing", l.Page.Cursor)
			case pages > 0 && l.Page.Cursor != next:
				return refuse(n, "page %d answers cursor %q, the page before it ended at %q: a page is missing", pages+1, l.Page.Cursor, next)
			case pages > 0 && last:
				return refuse(n, "page %d follows the last page", pages+1)
			}
			pages++
			next, last, page = l.Page.NextCursor, l.Page.NextCursor == "", nil
		case l.End != nil:
			end = l.End
		default:
			return refuse(n, "an empty export line")
		}
	}
	if err := sc.Err(); err != nil {
		return refuse(n+1, "unreadable: %v", err)
	}
	switch {
	case n == 0:
		return refuse(1, "the file is empty")
	case cp == nil:
		return refuse(n, "no checkpoint")
	case len(page) > 0:
		return refuse(n, "%d chains after the last page manifest", len(page))
	case pages == 0:
		return refuse(n, "no page manifest")
	case !last:
		return refuse(n, "the last page names a next cursor %q: the export's last pages are missing", next)
	case end == nil:
		return refuse(n, "no end line: the file is cut short")
	case end.Chains != rep.Chains || end.Records != rep.Records:
		return refuse(n, "the end line counts %d chains and %d records, the file holds %d and %d",
			end.Chains, end.Records, rep.Chains, rep.Records)
	}
	rep.Uncovered = end.Uncovered
	return rep, nil
}

// verifyPage checks one page manifest: its signature by pubKey, its
// filter and checkpoint against the header and the file's checkpoint,
// and its counts and digest against the chains that precede it.
func verifyPage(p api.ExportPage, h api.ExportHeader, cp api.ExportedCheckpoint, chains []api.ExportChain, pubKey string) error {
	if err := VerifySigned(p.SignedBytes(), p.Key, p.Signature, pubKey); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	records := 0
	for _, c := range chains {
		records += len(c.Records)
	}
	hf, _ := json.Marshal(h.Filter)
	pf, _ := json.Marshal(p.Filter)
	switch {
	case !bytes.Equal(hf, pf):
		return fmt.Errorf("the manifest's filter %s is not the header's %s", pf, hf)
	case p.CheckpointSeq != cp.AuditSeq || p.MerkleRoot != cp.MerkleRoot:
		return fmt.Errorf("the manifest names checkpoint %d (root %.16s…), the file's is %d", p.CheckpointSeq, p.MerkleRoot, cp.AuditSeq)
	case p.Chains != len(chains) || p.Records != records:
		return fmt.Errorf("the manifest counts %d chains and %d records, the page holds %d and %d: something was left out or added",
			p.Chains, p.Records, len(chains), records)
	case p.Digest != api.ExportPageDigest(chains):
		return errors.New("the page's chains do not match its signed digest")
	}
	return nil
}

// verifyExportChain checks one exported chain against the checkpoint cp
// whose Merkle root is root.
func verifyExportChain(c api.ExportChain, cp api.Checkpoint, root merkle.Hash) error {
	if len(c.Records) == 0 {
		return errors.New("no records")
	}
	raws := make([][]byte, len(c.Records))
	for i, r := range c.Records {
		raws[i] = r.Record
	}
	if ps := record.VerifyChain(raws); len(ps) > 0 {
		p := ps[0]
		return fmt.Errorf("record %d (seq %d): %s: %s", p.Index, c.Records[min(max(p.Index, 0), len(c.Records)-1)].Seq, p.Kind, p.Detail)
	}
	var prevSeq uint64
	for i, r := range c.Records {
		h, err := chain.DecodeHead(r.Record)
		if err != nil {
			return fmt.Errorf("record %d (seq %d): %w", i, r.Seq, err)
		}
		switch {
		case h.DLQID != c.DLQID || h.Domain != c.Domain:
			return fmt.Errorf("record %d (seq %d) belongs to another chain", i, r.Seq)
		case r.Seq <= prevSeq:
			return fmt.Errorf("record %d (seq %d): sequences out of order", i, r.Seq)
		case r.Seq > cp.LastSeq || r.LeafIndex >= cp.TreeSize || r.LeafIndex >= r.Seq:
			return fmt.Errorf("record %d (seq %d, leaf %d): outside the checkpoint's tree", i, r.Seq, r.LeafIndex)
		}
		prevSeq = r.Seq
		path := make([][]byte, len(r.Proof))
		for j, s := range r.Proof {
			ph, err := merkle.ParseHash(s)
			if err != nil {
				return fmt.Errorf("record %d (seq %d): proof hash %d: %w", i, r.Seq, j, err)
			}
			path[j] = ph[:]
		}
		leaf := LeafOf(r.Seq, h.AuditHash)
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, r.LeafIndex, cp.TreeSize, leaf[:], path, root[:]); err != nil {
			return fmt.Errorf("record %d (seq %d): the inclusion proof does not verify against the signed merkle_root: %w", i, r.Seq, err)
		}
	}
	return nil
}
