package verify

import (
	"fmt"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
)

// anchorCheck compares the records of a verification, in stream order,
// with an anchor: the Merkle root of the first TreeSize records and, when
// the anchor lists them, the hashes of its blocks of 2^BlockHeight
// records, so that the first block that differs (one record, while the
// anchored tree had at most Config.AnchorBlocks records) is named.
type anchorCheck struct {
	a        *anchor.Anchor
	records  uint64         // records of the store compared (at most TreeSize)
	block    merkle.Builder // the current block
	blockIdx int
	fromSeq  uint64 // QUARANTINE sequence of the current block's first record
	lastRec  *stored
	root     merkle.Hash // of the first TreeSize records, once read
	mismatch *api.VerifyProblem
}

// add compares one record, its leaf hash and the tree of the records so
// far (leaf included).
func (c *anchorCheck) add(m *stored, leaf merkle.Hash, tree *merkle.Builder) {
	size := c.a.CP.TreeSize
	if c.records >= size {
		return
	}
	c.records++
	if c.block.Size() == 0 {
		c.fromSeq = m.seq
	}
	c.block.Add(leaf)
	c.lastRec = &stored{seq: m.seq, subject: m.subject, link: m.link}
	if c.block.Size() == 1<<c.a.CP.BlockHeight || c.records == size {
		if c.a.Blocks != nil && c.mismatch == nil && c.blockIdx < len(c.a.Blocks) && c.block.Root() != c.a.Blocks[c.blockIdx] {
			c.mismatch = c.blockProblem(m.seq)
		}
		c.blockIdx++
		c.block.Reset()
	}
	if c.records == size {
		c.root = tree.Root()
	}
}

// blockProblem names the block ending at toSeq that differs from the
// anchor's: the record itself when the block holds one.
func (c *anchorCheck) blockProblem(toSeq uint64) *api.VerifyProblem {
	if c.block.Size() == 1 && c.lastRec != nil {
		r := c.lastRec
		return &api.VerifyProblem{Kind: api.ProblemAnchorMismatch, Seq: r.seq, Subject: r.subject, DLQID: r.link.DLQID,
			Index: r.link.Index, FromSeq: r.seq, ToSeq: r.seq,
			Detail: fmt.Sprintf("the record at QUARANTINE sequence %d is not the one the anchor of %s covered "+
				"(rewritten, inserted or removed; leaf %d of %d)", r.seq, c.a.CP.At.Format("2006-01-02T15:04:05Z07:00"),
				c.records, c.a.CP.TreeSize)}
	}
	return &api.VerifyProblem{Kind: api.ProblemAnchorMismatch, FromSeq: c.fromSeq, ToSeq: toSeq,
		Detail: fmt.Sprintf("a record of QUARANTINE sequences %d..%d is not one the anchor covered "+
			"(block %d of %d records; rewritten, inserted or removed)", c.fromSeq, toSeq, c.blockIdx, c.block.Size())}
}

// finish reports what the store lacks or holds differently.
func (c *anchorCheck) finish(v *verifier) {
	cp := c.a.CP
	rep := v.rep.Anchor
	rep.Records = c.records
	switch {
	case cp.TreeSize == 0:
		rep.Matched = true
		return
	case c.records == 0:
		v.problem(api.VerifyProblem{Kind: api.ProblemStoreMissing, FromSeq: 1, ToSeq: cp.LastSeq,
			Detail: fmt.Sprintf("QUARANTINE holds no record; the anchor says it held %d up to sequence %d", cp.TreeSize, cp.LastSeq)})
		return
	case c.records < cp.TreeSize:
		if c.mismatch != nil {
			v.problem(*c.mismatch)
		}
		from := uint64(1)
		if c.lastRec != nil {
			from = c.lastRec.seq + 1 // the records after the last one there
		}
		if c.mismatch != nil && c.mismatch.FromSeq > 0 && c.mismatch.FromSeq < from {
			// The store diverged before its end (records written after a
			// restore of an older backup): the anchor's records are
			// missing from the first that differs.
			from = c.mismatch.FromSeq
		}
		v.problem(api.VerifyProblem{Kind: api.ProblemAnchorShort, FromSeq: from, ToSeq: cp.LastSeq,
			Detail: fmt.Sprintf("QUARANTINE holds %d records up to sequence %d; the anchor says it held %d (sequences %d..%d missing or different)",
				c.records, cp.LastSeq, cp.TreeSize, from, cp.LastSeq)})
		return
	case c.root == c.a.Root:
		rep.Matched = true
		return
	case c.mismatch != nil:
		v.problem(*c.mismatch)
	default:
		v.problem(api.VerifyProblem{Kind: api.ProblemAnchorMismatch, FromSeq: 1, ToSeq: cp.LastSeq,
			Detail: fmt.Sprintf("the Merkle root of the first %d records is %s, the anchor's %s", cp.TreeSize, c.root, c.a.Root)})
	}
}

// anchorInAudit reports an anchor that AUDIT does not hold.
func (v *verifier) anchorInAudit() {
	a := v.anchor.a.CP
	for _, sc := range v.cps {
		if sc.CP.Signature == a.Signature && sc.CP.MerkleRoot == a.MerkleRoot && sc.CP.TreeSize == a.TreeSize {
			return
		}
	}
	if len(v.cps) == 0 {
		v.problem(api.VerifyProblem{Kind: api.ProblemStoreMissing, CheckpointSeq: a.AuditSeq,
			Detail: "AUDIT holds no checkpoint; the anchor is one it held"})
		return
	}
	v.problem(api.VerifyProblem{Kind: api.ProblemAnchorNotInAudit, CheckpointSeq: a.AuditSeq,
		Detail: fmt.Sprintf("AUDIT holds no checkpoint equal to the anchor (AUDIT sequence %d at export)", a.AuditSeq)})
}

// checkSignatures checks every signed checkpoint of AUDIT with pubKey,
// and that none is unsigned after a signed one.
func (v *verifier) checkSignatures(pubKey string) {
	signed := false
	for _, sc := range v.cps {
		if sc.CP.Signature == "" {
			if signed {
				v.problem(api.VerifyProblem{Kind: api.ProblemCheckpointSignature, CheckpointSeq: sc.Seq,
					Detail: "an unsigned checkpoint after signed ones"})
			}
			continue
		}
		signed = true
		if err := export.VerifyCheckpoint(sc.CP, pubKey); err != nil {
			v.problem(api.VerifyProblem{Kind: api.ProblemCheckpointSignature, CheckpointSeq: sc.Seq, Detail: err.Error()})
		}
	}
}
