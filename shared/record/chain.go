package record

import (
	"encoding/hex"
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

// tail is the batch verification state of one chain (VerifyChain): the
// last record linked, and every prev_hash and index seen mapped to the
// position of its record, for exact fork detection. Streaming verification
// uses Tail.
type tail struct {
	n       int  // records of the chain read so far
	last    link // last record linked into the chain
	has     bool // last is set and was the record read just before
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
	t.prevs[l.prev], t.indexes[l.index] = pos, pos
	return ps
}

// fork reports whether l claims a predecessor or an index already taken
// by any earlier record of the chain.
func (t *tail) fork(l link) (string, bool) {
	if p, ok := t.prevs[l.prev]; ok {
		return fmt.Sprintf("prev_hash %s is also the prev_hash of the record at position %d", l.prev, p), true
	}
	if p, ok := t.indexes[l.index]; ok {
		return fmt.Sprintf("index %d is also the index of the record at position %d", l.index, p), true
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
// keeps a Tail per dlq id, O(chains) memory, so it detects a fork only
// when the two branches are read one after the other; otherwise the second
// branch shows as index_gap and broken_prev_hash. Records are attributed
// to the chain named by their dlq_id, so a dlq_id_mismatch cannot occur
// here. For memory bounded whatever the number of chains, keep Tails in a
// bounded cache and seed an evicted chain's Tail with TailAfter (see the
// auditor). The zero value is ready to use; it is not safe for concurrent
// use.
type ChainVerifier struct {
	chains map[string]*Tail
}

// Add checks the stored record raw, read at stream sequence seq, against
// the chain of its dlq_id and returns its problems with Seq set. An
// unparseable record belongs to no chain and is reported with Index -1.
func (v *ChainVerifier) Add(seq uint64, raw []byte) []Problem {
	return v.AddLink(seq, ReadLink(raw))
}

// Link is what chain verification reads from one stored record: its link
// members, its stored audit_hash and the result of its seal check. ReadLink
// makes one; ChainVerifier.AddLink and Tail.Add link it. Reading links is
// the costly, independent part of verification (it recomputes the seal),
// so callers may read many in parallel and link them in stream order.
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
func (v *ChainVerifier) AddLink(seq uint64, l Link) []Problem {
	if l.Err != nil {
		return unparseable(seq, l.Err)
	}
	if v.chains == nil {
		v.chains = map[string]*Tail{}
	}
	t, ok := v.chains[l.DLQID]
	if !ok {
		t = &Tail{}
		v.chains[l.DLQID] = t
	}
	return t.Add(seq, l)
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
	return t.index, t.hash.String(), t.n, true
}

func unparseable(seq uint64, err error) []Problem {
	return []Problem{{Index: -1, Seq: seq, Kind: ProblemUnparseable, Detail: err.Error()}}
}

// Tail is the streaming verification state of one chain: how many of its
// records were read and the link members of the last one linked, hashes
// held as 32 bytes (about 100 bytes in all). The zero Tail is a chain of
// which no record was read yet. Streaming mode remembers only the last
// record linked, so a fork is found when its two branches are adjacent in
// the chain as read; otherwise the later branch shows as index_gap and
// broken_prev_hash.
type Tail struct {
	n          int  // records of the chain read so far
	has        bool // the last record read was linked and is held below
	index      int  // index of the last record linked
	prev, hash digest
}

// TailAfter returns the Tail of a chain whose last record read is pred, a
// record read by ReadLink without error, as if the chain had been read up
// to it: the position of the next record is pred.Index+1. A verifier that
// no longer holds a chain's Tail (a bounded cache evicted it) seeds it
// from the chain's previous stored record this way; it then finds exactly
// what it would have found with the Tail kept, except that positions count
// from pred's index instead of the records read, and that when pred is
// itself a fork (not linked when it was read) the record after it is
// checked against pred rather than against the branch read first.
func TailAfter(pred Link) Tail {
	t := Tail{n: pred.Index + 1}
	t.link(pred)
	return t
}

// TailUnlinked returns the Tail of a chain of which records were read but
// whose last record is unknown (unparseable, or not found): the next
// record is checked for its seal only, at position records, and linked.
func TailUnlinked(records int) Tail { return Tail{n: records} }

// Records returns how many records of the chain were read (with TailAfter:
// counted from the index of the record it was seeded with).
func (t *Tail) Records() int { return t.n }

// Add checks l, the next record of the chain read at stream sequence seq,
// links it, and returns its problems with Index set to its position in
// the chain and Seq to seq. A record that could not be read (l.Err) is
// reported as unparseable with Index -1 and leaves the Tail as it was: it
// belongs to no chain. Add does not compare l.DLQID with the chain's.
func (t *Tail) Add(seq uint64, l Link) []Problem {
	if l.Err != nil {
		return unparseable(seq, l.Err)
	}
	pos := t.n
	t.n++
	var ps []Problem
	if l.SealErr != nil {
		ps = append(ps, Problem{Index: pos, Seq: seq, Kind: ProblemSealMismatch, Detail: l.SealErr.Error()})
	}
	prev := toDigest(l.PrevHash)
	if t.has && prev == t.prev {
		return append(ps, Problem{Index: pos, Seq: seq, Kind: ProblemFork,
			Detail: fmt.Sprintf("prev_hash %s is also the prev_hash of the previous record", l.PrevHash)})
	}
	if t.has && l.Index == t.index {
		return append(ps, Problem{Index: pos, Seq: seq, Kind: ProblemFork,
			Detail: fmt.Sprintf("index %d is also the index of the previous record", l.Index)})
	}
	switch {
	case pos == 0:
		if l.Index != 0 {
			ps = append(ps, Problem{Index: pos, Seq: seq, Kind: ProblemIndexGap, Detail: fmt.Sprintf("first record has index %d", l.Index)})
		}
		if l.PrevHash != "" {
			ps = append(ps, Problem{Index: pos, Seq: seq, Kind: ProblemBrokenPrevHash, Detail: "first record has a prev_hash"})
		}
	case t.has:
		if want := t.index + 1; l.Index != want {
			ps = append(ps, Problem{Index: pos, Seq: seq, Kind: ProblemIndexGap, Detail: fmt.Sprintf("index %d, expected %d", l.Index, want)})
		}
		if prev != t.hash {
			ps = append(ps, Problem{Index: pos, Seq: seq, Kind: ProblemBrokenPrevHash,
				Detail: fmt.Sprintf("prev_hash %.64q, previous audit_hash %.64q", l.PrevHash, t.hash.String())})
		}
	}
	t.link(l)
	return ps
}

// link makes l the last record linked.
func (t *Tail) link(l Link) {
	t.has, t.index, t.prev, t.hash = true, l.Index, toDigest(l.PrevHash), toDigest(l.AuditHash)
}

// digest holds a hash member compactly: 64 lowercase hex digits as their
// 32 bytes, anything else (tampered, or "") as the string itself.
type digest struct {
	b     [32]byte
	s     string
	isHex bool
}

func toDigest(s string) digest {
	var d digest
	if len(s) == 64 && isLowerHex(s) {
		for i := range d.b {
			d.b[i] = unhex(s[2*i])<<4 | unhex(s[2*i+1])
		}
		d.isHex = true
		return d
	}
	d.s = s
	return d
}

// String returns the member as stored.
func (d digest) String() string {
	if d.isHex {
		return hex.EncodeToString(d.b[:])
	}
	return d.s
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
