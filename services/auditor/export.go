package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Export bounds.
const (
	// defaultExportChains is the most chains of one export page.
	defaultExportChains = 1000
	// exportReplyShare is the share of the connection's max payload an
	// export page fills (the rest is the reply's own members).
	exportReplyShare = 0.75
	// proofHashBytes is what one proof hash takes in a reply (hex, quotes
	// and a comma).
	proofHashBytes = 2*merkle.Size + 3
)

// ErrStoreMismatch: QUARANTINE no longer recomputes the Merkle root of
// the checkpoint an export is proved against (audit.verify says which
// record differs).
var ErrStoreMismatch = errors.New("auditor: QUARANTINE does not match the checkpoint")

// proofTree is the Merkle tree of one checkpoint, kept for the pages of
// the exports proved against it: every leaf (32 bytes per record) and
// the sequence of each.
type proofTree struct {
	lastSeq uint64
	root    string
	seqs    []uint64 // leaf i is the record at seqs[i]
	tree    *merkle.Tree
}

// leafIndex returns the leaf of the record at seq.
func (t *proofTree) leafIndex(seq uint64) (uint64, bool) {
	i, ok := slices.BinarySearch(t.seqs, seq)
	return uint64(i), ok
}

// exportTrees keeps the tree of the newest checkpoint exported (one: a
// new checkpoint replaces it).
type exportTrees struct {
	mu   sync.Mutex
	last *proofTree
}

// treeOf returns the Merkle tree of cp, from the cache or by reading
// QUARANTINE's records 1..cp.LastSeq, and checks that its root is cp's.
func (s *Service) treeOf(ctx context.Context, cp api.Checkpoint) (*proofTree, error) {
	s.trees.mu.Lock()
	defer s.trees.mu.Unlock()
	if t := s.trees.last; t != nil && t.lastSeq == cp.LastSeq && t.root == cp.MerkleRoot {
		return t, nil
	}
	t := &proofTree{lastSeq: cp.LastSeq, root: cp.MerkleRoot, seqs: make([]uint64, 0, cp.TreeSize)}
	leaves := make([]merkle.Hash, 0, cp.TreeSize)
	if cp.LastSeq > 0 {
		_, _, err := scan(ctx, s.js, subjects.QuarantineStream, "", 1, cp.LastSeq, func(m *jetstream.RawStreamMsg) bool {
			h, _ := chain.DecodeHead(m.Data) // unreadable: the leaf of no audit_hash, as the index does
			leaves = append(leaves, export.LeafOf(m.Sequence, h.AuditHash))
			t.seqs = append(t.seqs, m.Sequence)
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("auditor: read %s: %w", subjects.QuarantineStream, err)
		}
	}
	t.tree = merkle.NewTree(leaves)
	if uint64(len(leaves)) != cp.TreeSize || t.tree.Root().String() != cp.MerkleRoot {
		return nil, fmt.Errorf("%w: %d records up to sequence %d, the checkpoint says %d (run audit.verify)",
			ErrStoreMismatch, len(leaves), cp.LastSeq, cp.TreeSize)
	}
	s.trees.last = t
	return t, nil
}

// exportCursor is "<AUDIT seq of the checkpoint>-<QUARANTINE seq of the
// first record of the page's last chain>".
func exportCursor(auditSeq, seq uint64) string {
	return strconv.FormatUint(auditSeq, 10) + "-" + strconv.FormatUint(seq, 10)
}

func parseExportCursor(c string) (auditSeq, seq uint64, ok bool) {
	a, b, found := strings.Cut(c, "-")
	if !found {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return x, y, err1 == nil && err2 == nil && x > 0 && y > 0
}

// exportCheckpoint returns the checkpoint an export is proved against:
// for a first page, a checkpoint covering every record stored now
// (written unless the newest covers them); for a later page, the one the
// cursor names.
func (s *Service) exportCheckpoint(ctx context.Context, auditSeq uint64) (api.ExportedCheckpoint, error) {
	var out api.ExportedCheckpoint
	if auditSeq == 0 {
		rep, err := s.Checkpoint(ctx)
		if errors.Is(err, ErrBehindAnchor) {
			return out, err // says why and the two ways out, never "retry"
		}
		if err != nil {
			return out, api.Wrap(api.ErrUnavailable, err, "no checkpoint could be written for the export: retry")
		}
		out.Checkpoint, out.AuditSeq = rep.Checkpoint, rep.Seq
	} else {
		m, err := s.audit.GetMsg(ctx, auditSeq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, api.BadField("cursor", "names no checkpoint")
		}
		if err != nil {
			return out, fmt.Errorf("auditor: read checkpoint: %w", err)
		}
		if m.Subject != subjects.AuditCheckpoints || json.Unmarshal(m.Data, &out.Checkpoint) != nil {
			return out, api.BadField("cursor", "names no checkpoint")
		}
		out.AuditSeq = auditSeq
	}
	if out.Version < api.CheckpointVersionMerkle || out.MerkleRoot == "" {
		return out, api.Errorf(api.ErrUnavailable, "the checkpoint has no Merkle root: retry once a new one is written")
	}
	return out, nil
}

// Export returns one page of an inspection export (api.ExportRequest):
// the matching chains, newest first, every record the checkpoint covers
// with its inclusion proof. It is a payload read: refused to a role that
// does not read payloads, and recorded in AUDIT (one access record per
// page, acknowledged) before the page is sent.
func (s *Service) Export(ctx context.Context, req api.ExportRequest) (api.ExportReply, error) {
	who, err := s.payloadReader(ctx, api.AccessExport)
	if err != nil {
		return api.ExportReply{}, err
	}
	f := req.Filter
	// The identifiers are read as a records search reads them, in every
	// domain: a field the filter's domain does not search by is a
	// BAD_REQUEST naming it (parseIDFilter), never an empty export.
	idf, err := parseIDFilter(f.Search())
	if err != nil {
		return api.ExportReply{}, err
	}
	limit := req.Limit
	if limit == 0 {
		limit = defaultExportChains
	}
	var auditSeq, before uint64
	if req.Cursor != "" {
		var ok bool
		if auditSeq, before, ok = parseExportCursor(req.Cursor); !ok {
			return api.ExportReply{}, api.BadField("cursor", "not a cursor of this endpoint")
		}
	}
	cp, err := s.exportCheckpoint(ctx, auditSeq)
	if err != nil {
		return api.ExportReply{}, err
	}
	tree, err := s.treeOf(ctx, cp.Checkpoint)
	if err != nil {
		return api.ExportReply{}, err
	}
	if before == 0 || before > cp.LastSeq+1 {
		before = cp.LastSeq + 1
	}
	match := func(it *listItem) bool {
		return (f.Party == "" || it.PartyID == f.Party) && (f.Status == "" || it.Status == f.Status) &&
			(f.From.IsZero() || !it.QuarantinedAt.Before(f.From)) && (f.To.IsZero() || !it.QuarantinedAt.After(f.To)) &&
			idf.match(it)
	}
	budget := int(float64(s.nc.MaxPayload()) * exportReplyShare)
	if s.exportBudget > 0 {
		budget = s.exportBudget
	}
	rep := api.ExportReply{Checkpoint: cp, Chains: []api.ExportChain{}}
	var items []listItem
	more := false
	if before > 1 {
		err := s.scanChains(ctx, idf.scanDomain(f.Domain), before-1, idf.set(), func(it listItem) bool {
			if !match(&it) {
				return true
			}
			if len(items) == limit {
				more = true
				return false
			}
			items = append(items, it)
			return true
		})
		if err != nil {
			return api.ExportReply{}, fmt.Errorf("auditor: export: %w", err)
		}
	}
	ids, err := s.fillExportPage(ctx, tree, items, budget, &rep)
	if err != nil {
		return api.ExportReply{}, err
	}
	if len(ids) < len(items) || more {
		rep.NextCursor = exportCursor(cp.AuditSeq, items[len(ids)-1].seq)
	}
	if rep.Page, err = s.pageManifest(req, &rep); err != nil {
		return api.ExportReply{}, err
	}
	// Recorded, and acknowledged, before a payload byte leaves.
	filter := req.Filter
	if rep.AccessSeq, err = s.recordAccess(ctx, who, api.AccessExport, req.Reason, &filter, ids); err != nil {
		return api.ExportReply{}, err
	}
	return rep, nil
}

// pageManifest returns the signed manifest of the page rep answering req
// (unsigned when the auditor has no signing key: export.Verify refuses it,
// as it refuses the unsigned checkpoint of such an auditor).
func (s *Service) pageManifest(req api.ExportRequest, rep *api.ExportReply) (api.ExportPage, error) {
	p := api.ExportPage{Filter: req.Filter, CheckpointSeq: rep.Checkpoint.AuditSeq, MerkleRoot: rep.Checkpoint.MerkleRoot,
		Cursor: req.Cursor, NextCursor: rep.NextCursor, Chains: len(rep.Chains), Digest: api.ExportPageDigest(rep.Chains)}
	for _, c := range rep.Chains {
		p.Records += len(c.Records)
	}
	if s.signer == nil {
		return p, nil
	}
	if err := export.SignPage(&p, s.signer); err != nil {
		return p, fmt.Errorf("auditor: sign the export page: %w", err)
	}
	return p, nil
}

// exportReaders is how many chains an export page reads at a time.
const exportReaders = 16

// fillExportPage reads the chains of items, in windows of exportReaders
// read in parallel, and adds them to rep in order until the next would
// take the page past budget bytes. It returns the ids added.
func (s *Service) fillExportPage(ctx context.Context, tree *proofTree, items []listItem, budget int, rep *api.ExportReply) ([]string, error) {
	type read struct {
		c         api.ExportChain
		uncovered int
		size      int
		err       error
	}
	var ids []string
	size := 0
	for lo := 0; lo < len(items); lo += exportReaders {
		window := items[lo:min(lo+exportReaders, len(items))]
		reads := make([]read, len(window))
		var wg sync.WaitGroup
		for i, it := range window {
			wg.Go(func() {
				r := &reads[i]
				r.c, r.uncovered, r.size, r.err = s.exportChain(ctx, tree, it.Domain, it.DLQID)
			})
		}
		wg.Wait()
		for i, r := range reads {
			if r.err != nil {
				return nil, fmt.Errorf("auditor: export: %w", r.err)
			}
			if size+r.size > budget {
				if len(ids) == 0 {
					return nil, api.Errorf(api.ErrInternal, "chain %s does not fit in one reply", window[i].DLQID)
				}
				return ids, nil
			}
			size += r.size
			rep.Chains = append(rep.Chains, r.c)
			rep.Uncovered += r.uncovered
			ids = append(ids, window[i].DLQID)
		}
	}
	return ids, nil
}

// exportChain reads the chain dlqID and returns its records the tree
// covers, each with its proof, how many it left out (stored after the
// checkpoint), and the bytes the chain takes in a reply.
func (s *Service) exportChain(ctx context.Context, tree *proofTree, domain, dlqID string) (api.ExportChain, int, int, error) {
	stored, err := s.chains.Stored(ctx, domain, dlqID)
	if err != nil {
		return api.ExportChain{}, 0, 0, fmt.Errorf("read chain: %w", err)
	}
	c := api.ExportChain{DLQID: dlqID, Domain: domain, Records: make([]api.ExportRecord, 0, len(stored))}
	uncovered, size := 0, 64+len(dlqID)+len(domain)
	for _, m := range stored {
		if m.Seq > tree.lastSeq {
			uncovered++
			continue
		}
		i, ok := tree.leafIndex(m.Seq)
		if !ok {
			return api.ExportChain{}, 0, 0, fmt.Errorf("%w: sequence %d is not a leaf", ErrStoreMismatch, m.Seq)
		}
		path, err := tree.tree.InclusionProof(i)
		if err != nil {
			return api.ExportChain{}, 0, 0, err
		}
		r := api.ExportRecord{Seq: m.Seq, LeafIndex: i, Record: m.Data, Proof: make([]string, len(path))}
		for j, h := range path {
			r.Proof[j] = h.String()
		}
		c.Records = append(c.Records, r)
		size += 64 + len(m.Data) + len(path)*proofHashBytes
	}
	return c, uncovered, size, nil
}
