package record

import (
	"encoding/json"
	"fmt"
)

// Kinds of chain problem.
const (
	// ProblemSealMismatch: the record's audit_hash does not recompute.
	ProblemSealMismatch = "seal_mismatch"
	// ProblemBrokenPrevHash: prev_hash is not the audit_hash of the record
	// read before it ("" for the first record).
	ProblemBrokenPrevHash = "broken_prev_hash"
	// ProblemIndexGap: index is not one more than the previous record's
	// (0 for the first); a missing, extra or reordered record.
	ProblemIndexGap = "index_gap"
	// ProblemFork: two records claim the same predecessor or the same index.
	ProblemFork = "fork"
	// ProblemDLQIDMismatch: the record belongs to another chain.
	ProblemDLQIDMismatch = "dlq_id_mismatch"
	// ProblemUnparseable: the bytes are not a JSON object with the link
	// members dlq_id (string), index (integer), prev_hash and audit_hash
	// (strings).
	ProblemUnparseable = "unparseable"
)

// Problem is one integrity finding about a stored record.
type Problem struct {
	// Index is the record's position in its chain as read (0-based), which
	// is the index the record should have; -1 when the record cannot be
	// attributed to a chain.
	Index int `json:"index"`
	// Seq is the stream sequence of the record, set by callers that know
	// it (ChainVerifier.Add does); 0 otherwise.
	Seq uint64 `json:"seq,omitempty"`
	// Kind is one of the Problem* constants.
	Kind string `json:"kind"`
	// Detail explains the finding (hashes and indexes, never payload).
	Detail string `json:"detail"`
}

// link is what chain verification reads from one stored record.
type link struct {
	dlqID   string
	domain  string // "" when the record has no string domain member
	index   int
	prev    string
	hash    string // the stored audit_hash
	sealErr error
}

// readLink parses the stored record raw for chain verification; an error
// means the record is unparseable.
func readLink(raw []byte) (link, error) {
	s, err := readSealed(raw)
	if err != nil {
		return link{}, err
	}
	if !s.hasStored {
		return link{}, ErrNoAuditHash
	}
	l := link{hash: s.stored, sealErr: s.verify()}
	if err := s.member("dlq_id", &l.dlqID); err != nil {
		return link{}, err
	}
	if err := s.member("index", &l.index); err != nil {
		return link{}, err
	}
	if err := s.member("prev_hash", &l.prev); err != nil {
		return link{}, err
	}
	_ = s.member("domain", &l.domain) // optional for chain checks
	return l, nil
}

// member decodes the link member name into dst (a *string or *int).
func (s sealed) member(name string, dst any) error {
	v := s.members[linkMember([]byte(name))]
	if !v.present {
		return fmt.Errorf("%w: no %s", ErrInvalidJSON, name)
	}
	switch d := dst.(type) {
	case *string:
		if v.isStr {
			*d = v.str
			return nil
		}
	case *int:
		if v.isNum {
			*d = v.num
			return nil
		}
	}
	if v.raw != nil && json.Unmarshal(v.raw, dst) == nil {
		return nil
	}
	return fmt.Errorf("%w: %s has the wrong type", ErrInvalidJSON, name)
}

// tail is the verification state of one chain: the last record linked.
type tail struct {
	n    int  // records of the chain read so far
	last link // last record linked into the chain
	has  bool // last is set and was the record read just before
	// prevs and indexes (batch mode only) map every prev_hash and index
	// seen to the position of the record, for exact fork detection.
	prevs   map[string]int
	indexes map[int]int
}

// add checks the next record l of the chain and links it, returning its
// problems with Index set to its position.
func (t *tail) add(l link) []Problem {
	pos := t.n
	t.n++
	var ps []Problem
	if l.sealErr != nil {
		ps = append(ps, Problem{Index: pos, Kind: ProblemSealMismatch, Detail: l.sealErr.Error()})
	}
	if detail, fork := t.fork(l); fork {
		return append(ps, Problem{Index: pos, Kind: ProblemFork, Detail: detail})
	}
	ps = append(ps, t.links(l, pos)...)
	t.last, t.has = l, true
	if t.prevs != nil {
		t.prevs[l.prev], t.indexes[l.index] = pos, pos
	}
	return ps
}

// fork reports whether l claims a predecessor or an index already taken.
// In batch mode every earlier record is remembered; in streaming mode only
// the last one, so a fork is seen when its two branches are adjacent.
func (t *tail) fork(l link) (string, bool) {
	if t.prevs != nil {
		if p, ok := t.prevs[l.prev]; ok {
			return fmt.Sprintf("prev_hash %s is also the prev_hash of the record at position %d", l.prev, p), true
		}
		if p, ok := t.indexes[l.index]; ok {
			return fmt.Sprintf("index %d is also the index of the record at position %d", l.index, p), true
		}
		return "", false
	}
	if t.has && l.prev == t.last.prev {
		return fmt.Sprintf("prev_hash %s is also the prev_hash of the previous record", l.prev), true
	}
	if t.has && l.index == t.last.index {
		return fmt.Sprintf("index %d is also the index of the previous record", l.index), true
	}
	return "", false
}

// links checks l's index and prev_hash against the last linked record
// (or against the rules of a first record). After an unparseable record
// the expected values are unknown and not checked.
func (t *tail) links(l link, pos int) []Problem {
	var ps []Problem
	switch {
	case pos == 0:
		if l.index != 0 {
			ps = append(ps, Problem{Index: pos, Kind: ProblemIndexGap, Detail: fmt.Sprintf("first record has index %d", l.index)})
		}
		if l.prev != "" {
			ps = append(ps, Problem{Index: pos, Kind: ProblemBrokenPrevHash, Detail: "first record has a prev_hash"})
		}
	case t.has:
		if want := t.last.index + 1; l.index != want {
			ps = append(ps, Problem{Index: pos, Kind: ProblemIndexGap, Detail: fmt.Sprintf("index %d, expected %d", l.index, want)})
		}
		if l.prev != t.last.hash {
			ps = append(ps, Problem{Index: pos, Kind: ProblemBrokenPrevHash,
				Detail: fmt.Sprintf("prev_hash %.64q, previous audit_hash %.64q", l.prev, t.last.hash)})
		}
	}
	return ps
}

// skip accounts for an unparseable record of the chain.
func (t *tail) skip() {
	t.n++
	t.has = false
}

// VerifyChain checks the stored records of ONE dlq id, in stream order:
// every seal recomputes; record i has index i and record 0 has prev_hash
// ""; every later record's prev_hash is the audit_hash of the record before
// it; all share the first record's dlq_id; no two records claim the same
// prev_hash or the same index (fork). Problems are in record order with
// Index = position in raws; Seq is left 0. A fork record is not linked, so
// the records after it are checked against the branch read first. It keeps
// every hash of the chain in memory; for many chains use ChainVerifier.
func VerifyChain(raws [][]byte) []Problem {
	t := &tail{prevs: map[string]int{}, indexes: map[int]int{}}
	var ps []Problem
	dlqID, haveID := "", false
	for i, raw := range raws {
		l, err := readLink(raw)
		if err != nil {
			ps = append(ps, Problem{Index: i, Kind: ProblemUnparseable, Detail: err.Error()})
			t.skip()
			continue
		}
		if !haveID {
			dlqID, haveID = l.dlqID, true
		} else if l.dlqID != dlqID {
			ps = append(ps, Problem{Index: i, Kind: ProblemDLQIDMismatch,
				Detail: fmt.Sprintf("dlq_id %.200q, chain %.200q", l.dlqID, dlqID)})
		}
		ps = append(ps, t.add(l)...)
	}
	return ps
}

// ChainVerifier checks stored records read one at a time, in stream order,
// across many chains (an auditor reading the whole quarantine stream). It
// keeps only the last record's link per dlq id, O(chains) memory, so it
// detects a fork only when the two branches are read one after the other;
// otherwise the second branch shows as index_gap and broken_prev_hash.
// Records are attributed to the chain named by their dlq_id, so a
// dlq_id_mismatch cannot occur here. The zero value is ready to use; it is
// not safe for concurrent use.
type ChainVerifier struct {
	chains map[string]*tail
}

// Add checks the stored record raw, read at stream sequence seq, against
// the chain of its dlq_id and returns its problems with Seq set. An
// unparseable record belongs to no chain and is reported with Index -1.
func (v *ChainVerifier) Add(seq uint64, raw []byte) []Problem {
	l, err := readLink(raw)
	if err != nil {
		return []Problem{{Index: -1, Seq: seq, Kind: ProblemUnparseable, Detail: err.Error()}}
	}
	return v.addLink(seq, l)
}

// addLink links l, read at seq, into the chain of its dlq id.
func (v *ChainVerifier) addLink(seq uint64, l link) []Problem {
	if v.chains == nil {
		v.chains = map[string]*tail{}
	}
	t, ok := v.chains[l.dlqID]
	if !ok {
		t = &tail{}
		v.chains[l.dlqID] = t
	}
	ps := t.add(l)
	for i := range ps {
		ps[i].Seq = seq
	}
	return ps
}

// Link is what chain verification reads from one stored record: its link
// members, its stored audit_hash and the result of its seal check. ReadLink
// makes one; ChainVerifier.AddLink links it. Reading links is the costly,
// independent part of verification (it recomputes the seal), so callers
// may read many in parallel and link them in stream order.
type Link struct {
	// DLQID, Domain, Index and PrevHash are the record's members.
	DLQID    string
	Domain   string
	Index    int
	PrevHash string
	// AuditHash is the stored audit_hash member.
	AuditHash string
	// SealErr is nil when the seal recomputes (see VerifySeal).
	SealErr error
	// Err is set when the record is unparseable; the other fields are
	// then empty.
	Err error
}

// ReadLink parses the stored record raw and checks its seal.
func ReadLink(raw []byte) Link {
	l, err := readLink(raw)
	if err != nil {
		return Link{Err: err}
	}
	return Link{DLQID: l.dlqID, Domain: l.domain, Index: l.index, PrevHash: l.prev, AuditHash: l.hash, SealErr: l.sealErr}
}

// AddLink is Add for a link read by ReadLink: v.AddLink(seq, ReadLink(raw))
// equals v.Add(seq, raw).
func (v *ChainVerifier) AddLink(seq uint64, pl Link) []Problem {
	if pl.Err != nil {
		return []Problem{{Index: -1, Seq: seq, Kind: ProblemUnparseable, Detail: pl.Err.Error()}}
	}
	return v.addLink(seq, link{dlqID: pl.DLQID, domain: pl.Domain, index: pl.Index, prev: pl.PrevHash, hash: pl.AuditHash, sealErr: pl.SealErr})
}

// Chains returns how many dlq ids have been seen.
func (v *ChainVerifier) Chains() int { return len(v.chains) }

// Head returns the index and audit_hash of the last record linked into the
// chain of dlqID, and how many records of that chain were read.
func (v *ChainVerifier) Head(dlqID string) (index int, hash string, records int, ok bool) {
	t, ok := v.chains[dlqID]
	if !ok {
		return 0, "", 0, false
	}
	return t.last.index, t.last.hash, t.n, true
}
