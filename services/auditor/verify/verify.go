package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
	"github.com/deadletter/deadletter/shared/notify"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// defaultMaxProblems caps the problems listed in a verify reply.
const defaultMaxProblems = 1000

// DefaultBatch is how many records are read before their seals are
// checked in parallel and linked in order (Tuning.Batch).
const DefaultBatch = 512

// stored is one message read from a stream.
type stored struct {
	seq     uint64
	subject string
	data    []byte
	time    time.Time
	link    record.Link
	// decision is the record's, when it records a person's decision.
	decision *decisionRecord
}

// maxPredecessorWalk bounds how many records a verification steps back
// over, on one chain's subjects, to find the previous record of that
// chain when the records before are unparseable or name another dlq id.
const maxPredecessorWalk = 16

// verifier is the state of one verification: a bounded cache of chain
// tails, a fixed-size filter of the dlq ids seen, the running digest and
// the checkpoints to compare with. Its memory does not grow with the
// number of records or chains.
type verifier struct {
	p           *Verifier
	rep         *api.VerifyReply
	max         int
	cache       *tailCache
	seen        *bloom.BloomFilter
	work        map[string]record.Tail // the chains of the current batch
	chains      int                    // dlq ids whose first record was read
	lookups     int                    // chains whose previous record was read from the server
	firstChecks int                    // first records on a subject read from the server
	digest      interface{ Write([]byte) (int, error) }
	sum         func() string
	line        []byte
	expected    uint64 // next QUARANTINE sequence expected
	count       uint64
	cps         []anchor.Stored
	next        int            // first checkpoint not yet compared
	tree        merkle.Builder // Merkle tree of the records read (api.MerkleAlgorithm)
	anchor      *anchorCheck   // nil without an anchor
	docs        *docNames      // documents named by the records, checked
	decisions   *decisions     // the people's signatures (decisions.go)
	ctx         context.Context
}

func (v *verifier) problem(p api.VerifyProblem) {
	v.rep.ProblemCount++
	if len(v.rep.Problems) < v.max {
		v.rep.Problems = append(v.rep.Problems, p)
	}
}

// Verify recomputes every record's seal and every chain of QUARANTINE in
// stream order, reports sequences that hold no record, recomputes the
// running digest and compares it with every checkpoint of AUDIT. It reads
// the stream once, with bounded memory: the tails of at most
// Config.VerifyChainCache chains are kept; the tail of a chain evicted
// from that cache is seeded again, when its next record is read, from the
// chain's previous record on the server (one batched direct get per batch
// of records), so every chain is checked as if every tail were kept (see
// record.TailAfter for the two differences).
func (p *Verifier) Verify(ctx context.Context, req api.VerifyRequest, t Tuning) (api.VerifyReply, error) {
	start := time.Now()
	rep, err := p.verify(ctx, req, t)
	rep.Seconds = time.Since(start).Seconds()
	switch {
	case err != nil:
		p.cfg.Runs.WithLabelValues("error").Inc()
	case rep.OK:
		p.cfg.Runs.WithLabelValues("ok").Inc()
	default:
		p.cfg.Runs.WithLabelValues("failed").Inc()
		kinds := map[string]int{}
		for _, pb := range rep.Problems {
			kinds[pb.Kind]++
		}
		p.cfg.Alert(notify.Event{ID: fmt.Sprintf("verify_failed.%d.%d", rep.LastSeq, rep.ProblemCount), Kind: notify.KindVerifyFailed,
			Codes: kinds, Counts: map[string]int{"problems": rep.ProblemCount, "records": int(rep.Records), "chains": rep.Chains,
				"last_seq": int(rep.LastSeq)}})
	}
	return rep, err
}

func (p *Verifier) verify(ctx context.Context, req api.VerifyRequest, t Tuning) (api.VerifyReply, error) {
	rep := api.VerifyReply{}
	if t.Batch <= 0 {
		t.Batch = DefaultBatch
	}
	if t.SeenBits == 0 {
		t.SeenBits = SeenFilterBits
	}
	v := &verifier{p: p, rep: &rep, max: req.MaxProblems, expected: 1, cache: newTailCache(p.cfg.ChainCache),
		seen: newSeenFilter(t.SeenBits), work: make(map[string]record.Tail, t.Batch), docs: newDocNames()}
	rep.Documents = &api.VerifyDocuments{}
	if v.max <= 0 {
		v.max = defaultMaxProblems
	}
	if t.SeenFull {
		v.seen.BitSet().FlipRange(0, v.seen.Cap())
	}
	h := sha256.New()
	v.digest, v.sum = h, func() string { return hex.EncodeToString(h.Sum(nil)) }
	if req.Anchor != "" || req.PubKey != "" {
		if req.Anchor == "" || req.PubKey == "" {
			return rep, api.Errorf(api.ErrBadRequest, "%s", "anchor and pubkey go together: an exported checkpoint and the public key it must be signed with")
		}
		a, err := anchor.Parse(req.Anchor, req.PubKey)
		if err != nil {
			return rep, api.Wrap(api.ErrBadRequest, err, err.Error())
		}
		v.anchor = &anchorCheck{a: a}
		rep.Anchor = &api.VerifyAnchor{TreeSize: a.CP.TreeSize, LastSeq: a.CP.LastSeq, MerkleRoot: a.CP.MerkleRoot,
			At: a.CP.At, Key: a.CP.Key}
	}
	// Without an anchor from the caller, the store is checked against the
	// newest checkpoint the auditor exported (anchor.Checkpoints): a deleted or
	// shortened store is never reported intact.
	own, ownErr := (*anchor.Anchor)(nil), error(nil)
	if v.anchor == nil {
		if own, ownErr = p.cfg.Checkpoints.Own(); ownErr != nil {
			p.cfg.Log.Error("AUDIT_ANCHOR_UNREADABLE", "export_file", p.cfg.ExportFile, "err", ownErr)
			v.problem(api.VerifyProblem{Kind: api.ProblemAnchorUnreadable, Detail: ownErr.Error()})
		} else if own != nil {
			v.anchor = &anchorCheck{a: own}
			rep.Anchor = &api.VerifyAnchor{TreeSize: own.CP.TreeSize, LastSeq: own.CP.LastSeq, MerkleRoot: own.CP.MerkleRoot,
				At: own.CP.At, Key: own.CP.Key, Own: true}
		}
	}
	cps, cpProblems, err := p.cfg.Checkpoints.Load(ctx)
	switch {
	case v.anchor != nil && errors.Is(err, jetstream.ErrStreamNotFound):
		v.problem(api.VerifyProblem{Kind: api.ProblemStoreMissing,
			Detail: fmt.Sprintf("stream %s does not exist; the anchor says it held checkpoints", subjects.AuditStream)})
	case err != nil:
		return rep, err
	}
	v.cps = cps
	rep.Checkpoints = len(cps)
	if len(cps) > 0 {
		newest := cps[len(cps)-1].CP
		at := newest.At
		rep.NewestCheckpointAt, rep.NewestCheckpointLastSeq = &at, newest.LastSeq
		rep.NewestCheckpointAgeSeconds = max(0, p.cfg.Now().Sub(at).Seconds())
		p.cfg.Checkpoints.Saw(newest)
	}
	for _, p := range cpProblems {
		v.problem(p)
	}
	if req.PubKey != "" {
		v.checkSignatures(req.PubKey)
	}
	if v.anchor != nil && err == nil {
		v.anchorInAudit()
	}
	var last, msgs uint64
	info, err := p.quarantine.Info(ctx)
	switch {
	case v.anchor != nil && errors.Is(err, jetstream.ErrStreamNotFound):
		// Reported by the anchor check: the store holds no record.
	case err != nil:
		return rep, fmt.Errorf("auditor: %w", err)
	default:
		last, msgs = info.State.LastSeq, info.State.Msgs
		if info.Config.MaxAge > 0 && info.State.FirstSeq > 1 {
			// Below the first sequence, records expired by QUARANTINE's
			// MaxAge (deletes are denied): not missing. A held chain's are
			// in LEGALHOLD (legalhold.Holds.Verify).
			v.expected = info.State.FirstSeq
			rep.ExpiredBelowSeq = info.State.FirstSeq
			if own != nil {
				// The anchor's first records expired: its tree cannot be
				// recomputed; the cheap check says whether the store reaches it.
				ps, err := p.cfg.Checkpoints.CheckOwn(ctx, own)
				if err != nil {
					return rep, err
				}
				for _, p := range ps {
					v.problem(p)
				}
				v.anchor, rep.Anchor = nil, nil
			}
		}
	}
	if len(cps) > 0 && cps[len(cps)-1].CP.LastSeq > last {
		last = cps[len(cps)-1].CP.LastSeq // records the checkpoints cover must be there
	}
	// The people's registry, what every decision is checked against.
	if v.decisions, err = p.startDecisions(ctx); err != nil {
		return rep, err
	}
	v.ctx = ctx
	if msgs > 0 {
		if err := p.readBatches(ctx, last, t.Batch, v.addBatch); err != nil {
			return rep, fmt.Errorf("auditor: read %s: %w", subjects.QuarantineStream, err)
		}
	}
	v.finish(last)
	if v.anchor != nil {
		v.anchor.finish(v)
	}
	// The held chains' LEGALHOLD copies: the legal-hold part's.
	if rep.LegalHold, err = p.cfg.Holds.Verify(ctx, v.problem); err != nil {
		return rep, err
	}
	// The indexes (HOLDS, APPROVALS, DRAINS, IDEMPOTENCY) against their
	// write-once sources (indexes.go).
	p.indexes(ctx, v)
	// The decisions AUDIT records, each signed by its person (decisions.go).
	if err := p.auditDecisions(ctx, v); err != nil {
		return rep, err
	}
	if d := v.decisions; d != nil {
		p.cfg.Log.Info("verify: decisions checked", "decisions", d.checked, InfoDecisionUnsignedLegacy, d.legacy, "registry_since", d.first)
	}
	// The EPCIS documents kept verbatim in DOCUMENTS (documents.go).
	if err := p.documents(ctx, v); err != nil {
		return rep, err
	}
	if own != nil {
		p.cfg.Checkpoints.Problems("verify", own, rep.Problems)
	}
	rep.Chains = v.chains
	rep.OK = rep.ProblemCount == 0
	p.cfg.Log.Info("verify finished", "records", rep.Records, "chains", rep.Chains, "problems", rep.ProblemCount,
		"tails_cached", v.cache.Len(), "predecessor_lookups", v.lookups, "first_record_checks", v.firstChecks)
	for _, pb := range rep.Problems {
		p.cfg.Failed.WithLabelValues(pb.Kind).Inc()
		p.cfg.Log.Error("AUDIT_VERIFY_FAILED", "seq", pb.Seq, "dlq_id", pb.DLQID, "problem", pb.Kind,
			"checkpoint_seq", pb.CheckpointSeq, "detail", pb.Detail)
	}
	if n := rep.ProblemCount - len(rep.Problems); n > 0 {
		p.cfg.Log.Error("AUDIT_VERIFY_FAILED", "problems_not_listed", n)
	}
	return rep, nil
}

// readBatches reads the stream up to lastSeq in batches, checks the seals
// of each batch in parallel and hands each batch to add, in stream order.
// Reading the next batch overlaps with checking the current one.
func (p *Verifier) readBatches(ctx context.Context, lastSeq uint64, size int, add func(context.Context, []stored) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []stored, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		batch := make([]stored, 0, size)
		_, _, err := read.Scan(ctx, p.cfg.JS, subjects.QuarantineStream, "", 1, lastSeq, func(m *jetstream.RawStreamMsg) bool {
			batch = append(batch, stored{seq: m.Sequence, subject: m.Subject, data: m.Data, time: m.Time})
			if len(batch) == size {
				select {
				case batches <- batch:
				case <-ctx.Done():
					return false
				}
				batch = make([]stored, 0, size)
			}
			return true
		})
		if len(batch) > 0 {
			batches <- batch
		}
		readErr <- err
	}()
	workers := max(1, runtime.GOMAXPROCS(0))
	var addErr error
	for batch := range batches {
		if addErr != nil {
			continue // drain the reader
		}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(batch); i += workers {
					batch[i].link = record.ReadLink(batch[i].data)
					batch[i].decision = readDecision(batch[i].data)
				}
			}()
		}
		wg.Wait()
		if addErr = add(ctx, batch); addErr != nil {
			cancel() // stop the reader
		}
	}
	readErrV := <-readErr
	if addErr != nil {
		return addErr
	}
	return readErrV
}

// addBatch links the records of one batch in stream order: it first finds
// the tail of every chain the batch names (cached; new, when the filter of
// ids seen has certainly not seen the id; otherwise seeded from the
// chain's previous record, read from the server), then links the records,
// then puts the tails back in the cache.
func (v *verifier) addBatch(ctx context.Context, batch []stored) error {
	clear(v.work)
	var lookups []string
	for i := range batch {
		l := &batch[i].link
		if l.Err != nil {
			continue
		}
		if _, ok := v.work[l.DLQID]; ok {
			continue
		}
		if t, ok := v.cache.Get(l.DLQID); ok {
			v.work[l.DLQID] = t
			continue
		}
		v.work[l.DLQID] = record.Tail{}
		if !v.seen.TestOrAddString(l.DLQID) || batch[0].seq <= 1 || !read.ValidToken(l.DLQID) {
			v.chains++
			continue
		}
		if l.Index == 0 && l.PrevHash == "" {
			// Most likely a new chain the filter mistakes for one seen: the
			// first record on its subject tells (cheaply, where a search for
			// the last record before the batch reads every block back to the
			// stream's start when there is none).
			newChain, err := v.firstOnSubject(ctx, &batch[i])
			if err != nil {
				return err
			}
			if newChain {
				v.chains++
				continue
			}
		}
		lookups = append(lookups, l.DLQID)
	}
	if len(lookups) > 0 {
		if err := v.seedTails(ctx, lookups, batch[0].seq-1); err != nil {
			return err
		}
	}
	if err := v.documentsNamed(ctx, batch); err != nil {
		return err
	}
	for i := range batch {
		v.add(&batch[i])
		batch[i] = stored{} // release the bytes
	}
	for id, t := range v.work {
		v.cache.Add(id, t)
	}
	return nil
}

// firstOnSubject reports whether m is the first message stored on its
// chain's subject.
func (v *verifier) firstOnSubject(ctx context.Context, m *stored) (bool, error) {
	subject := read.ChainFilter(m.link.DLQID)
	if read.ValidToken(m.link.Domain) {
		subject = subjects.Quarantine(m.link.Domain, m.link.DLQID)
	}
	first, ok, err := v.p.cfg.Reader.FirstRecord(ctx, subject)
	if err != nil {
		return false, fmt.Errorf("auditor: read the first record of a chain: %w", err)
	}
	v.firstChecks++
	return !ok || first.Seq >= m.seq, nil
}

// seedTails seeds the tails of the chains of ids from the last record of
// each at or below upTo (the sequence before the batch), read with one
// multi_last direct get for the batch; a chain without one starts new. A
// last record that is unparseable or names another dlq id (misfiled) is
// stepped over, one request per step, at most maxPredecessorWalk times;
// past that the chain's position is unknown and its next record is checked
// for its seal only.
func (v *verifier) seedTails(ctx context.Context, ids []string, upTo uint64) error {
	type pred struct {
		seq  uint64
		link record.Link
	}
	preds := make(map[string]pred, len(ids))
	last := func(id string, m read.Msg) { preds[id] = pred{m.Seq, record.ReadLink(m.Data)} }
	if err := v.p.cfg.Reader.EachLastRecord(ctx, ids, upTo, last); err != nil {
		return fmt.Errorf("auditor: read the previous records of %d chains: %w", len(ids), err)
	}
	v.lookups += len(ids)
	for _, id := range ids {
		p, ok := preds[id]
		seeded := false
		for step := 0; ok && !seeded; step++ {
			switch {
			case p.link.Err == nil && p.link.DLQID == id:
				v.work[id], seeded = record.TailAfter(p.link), true
			case step == maxPredecessorWalk:
				v.work[id], seeded = record.TailUnlinked(1), true
			case p.seq <= 1:
				ok = false
			default:
				delete(preds, id)
				if err := v.p.cfg.Reader.EachLastRecord(ctx, []string{id}, p.seq-1, last); err != nil {
					return fmt.Errorf("auditor: read the previous record of a chain: %w", err)
				}
				p, ok = preds[id]
			}
		}
		if !seeded {
			v.chains++ // no record of the chain before: a new chain
		}
	}
	return nil
}

// add links one record, in stream order.
func (v *verifier) add(m *stored) {
	v.compareBefore(m.seq)
	if m.seq > v.expected {
		v.missing(v.expected, m.seq-1)
	}
	v.expected = m.seq + 1
	v.count++
	v.rep.Records++
	v.rep.LastSeq = m.seq
	v.line = v.p.cfg.DigestLine(v.line[:0], m.seq, m.link.AuditHash)
	_, _ = v.digest.Write(v.line)
	leaf := export.LeafOf(m.seq, m.link.AuditHash)
	v.tree.Add(leaf)
	if v.anchor != nil {
		v.anchor.add(m, leaf, &v.tree)
	}
	var ps []record.Problem
	if m.link.Err != nil {
		ps = (&record.Tail{}).Add(m.seq, m.link) // unparseable: no chain
	} else {
		t := v.work[m.link.DLQID]
		ps = t.Add(m.seq, m.link)
		v.work[m.link.DLQID] = t
	}
	for _, p := range ps {
		v.problem(api.VerifyProblem{Seq: m.seq, Subject: m.subject, DLQID: m.link.DLQID, Index: p.Index, Kind: p.Kind, Detail: p.Detail})
	}
	if m.decision != nil && m.link.Err == nil {
		v.checkRecordDecision(v.ctx, m)
	}
	if m.link.Err == nil {
		if want := subjects.Quarantine(m.link.Domain, m.link.DLQID); m.subject != want {
			v.problem(api.VerifyProblem{Seq: m.seq, Subject: m.subject, DLQID: m.link.DLQID, Index: m.link.Index,
				Kind: api.ProblemSubjectMismatch, Detail: fmt.Sprintf("stored on %.200q, the record names %.200q", m.subject, want)})
		}
	}
}

// missing reports the sequences from..to as holding no record.
func (v *verifier) missing(from, to uint64) {
	for seq := from; seq <= to; seq++ {
		v.problem(api.VerifyProblem{Seq: seq, Kind: api.ProblemMissing,
			Detail: fmt.Sprintf("QUARANTINE sequence %d holds no record (deleted, lost or corrupt)", seq)})
	}
}

// compareBefore compares the checkpoints that end before seq with the
// running digest, which then covers exactly their range.
func (v *verifier) compareBefore(seq uint64) {
	for v.next < len(v.cps) && v.cps[v.next].CP.LastSeq < seq {
		sc := v.cps[v.next]
		v.next++
		if sc.CP.LastSeq >= v.expected && sc.CP.LastSeq < seq {
			// The checkpoint ends in a gap not reported yet: report it first.
			v.missing(v.expected, sc.CP.LastSeq)
			v.expected = sc.CP.LastSeq + 1
		}
		digest := v.sum()
		merkleOK := sc.CP.MerkleRoot == "" || (sc.CP.TreeSize == v.count && sc.CP.MerkleRoot == v.tree.Root().String())
		if sc.CP.Count != v.count || sc.CP.Digest != digest || !merkleOK {
			var why []string
			if sc.CP.Count != v.count {
				why = append(why, fmt.Sprintf("count %d, recomputed %d", sc.CP.Count, v.count))
			}
			if sc.CP.Digest != digest {
				why = append(why, fmt.Sprintf("digest %.64s, recomputed %s", sc.CP.Digest, digest))
			}
			if root := v.tree.Root().String(); sc.CP.MerkleRoot != "" && sc.CP.MerkleRoot != root {
				why = append(why, fmt.Sprintf("merkle_root %.64s, recomputed %s", sc.CP.MerkleRoot, root))
			}
			v.problem(api.VerifyProblem{Kind: api.ProblemCheckpointMismatch, CheckpointSeq: sc.Seq, FromSeq: 1,
				ToSeq: sc.CP.LastSeq, Detail: strings.Join(why, "; ")})
		}
	}
}

// finish compares the remaining checkpoints and reports missing records up
// to lastSeq.
func (v *verifier) finish(lastSeq uint64) {
	v.compareBefore(lastSeq + 1)
	if lastSeq >= v.expected {
		v.missing(v.expected, lastSeq)
		v.expected = lastSeq + 1
	}
}
