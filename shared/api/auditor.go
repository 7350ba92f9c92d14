package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/deadletter/deadletter/shared/record"
)

// Kinds of verification problem, beyond the chain problems of
// record.Problem* (seal_mismatch, broken_prev_hash, index_gap, fork,
// unparseable).
const (
	// ProblemMissing: a sequence of QUARANTINE below its last sequence holds
	// no record (deleted or lost: the stream denies deletes, so a gap is
	// tampering or corruption).
	ProblemMissing = "missing"
	// ProblemSubjectMismatch: a record is stored on a subject that does not
	// name its own domain and dlq id.
	ProblemSubjectMismatch = "subject_mismatch"
	// ProblemCheckpointMismatch: the running digest or count recomputed over
	// the checkpointed range differs from the checkpoint.
	ProblemCheckpointMismatch = "checkpoint_mismatch"
	// ProblemCheckpointChain: a checkpoint does not name the previous
	// checkpoint's hash, or cannot be read.
	ProblemCheckpointChain = "checkpoint_chain"
	// ProblemCheckpointSignature: with a caller's public key
	// (VerifyRequest.PubKey), a checkpoint of AUDIT is signed by another
	// key, its signature does not verify, or it is unsigned although an
	// earlier one is signed.
	ProblemCheckpointSignature = "checkpoint_signature"
	// ProblemAnchorMismatch: the Merkle root recomputed over the first
	// TreeSize records of QUARANTINE differs from the anchor's: a record
	// was rewritten, inserted or removed. Seq, Subject and DLQID name the
	// rewritten record when the anchor's blocks localize it to one record;
	// FromSeq..ToSeq is the range of the first block that differs.
	ProblemAnchorMismatch = "anchor_mismatch"
	// ProblemAnchorShort: QUARANTINE holds fewer records than the anchor
	// says it held.
	ProblemAnchorShort = "anchor_short"
	// ProblemStoreMissing: QUARANTINE or AUDIT is missing or empty while
	// the anchor says it held records (a store deleted wholesale).
	ProblemStoreMissing = "store_missing"
	// ProblemAnchorNotInAudit: AUDIT holds no checkpoint equal to the
	// anchor (same signature, root and tree size): AUDIT was rewritten or
	// recreated since the anchor was exported.
	ProblemAnchorNotInAudit = "anchor_not_in_audit"
	// ProblemAnchorUnreadable: the auditor's own export file (its anchor,
	// checked on every verify) cannot be read or does not verify.
	ProblemAnchorUnreadable = "anchor_unreadable"
	// ProblemLegalHoldCopy: a copy in LEGALHOLD fails its seal or its
	// chain's links, lacks its provenance headers, or differs from the
	// original still in QUARANTINE.
	ProblemLegalHoldCopy = "legalhold_copy"
	// ProblemLegalHoldIncomplete: a held chain's records that QUARANTINE
	// no longer holds (expired by its MaxAge) are not all in LEGALHOLD.
	ProblemLegalHoldIncomplete = "legalhold_incomplete"
	// ProblemDocument: an EPCIS document kept in DOCUMENTS does not hash
	// to the SHA-256 it is stored under (overwritten or altered), or a
	// record names a document whose object is deleted or missing.
	ProblemDocument = "document"
)

// VerifyRequest asks the auditor to verify QUARANTINE and the checkpoints
// in AUDIT. The empty request verifies everything.
type VerifyRequest struct {
	// MaxProblems caps the problems listed (default 1000); the counts are
	// always complete.
	MaxProblems int `json:"max_problems,omitempty"`
	// Anchor is a checkpoint exported by the auditor (one JSON line of its
	// export sink, an ExportedCheckpoint; when several lines are given,
	// the last non-empty one is used), kept outside the store. With it the
	// store is checked against the anchor: it must hold at least the
	// anchor's TreeSize records and their Merkle root must be the
	// anchor's. Requires PubKey.
	Anchor string `json:"anchor,omitempty"`
	// PubKey is the nkeys public key (account or user) the anchor, and
	// every signed checkpoint of AUDIT, must be signed with. It always
	// comes from the caller, never from the store. Requires Anchor.
	PubKey string `json:"pubkey,omitempty"`
}

// VerifyAnchor is what audit.verify checked an anchor against.
type VerifyAnchor struct {
	// TreeSize, LastSeq, MerkleRoot, At and Key are the anchor's.
	TreeSize   uint64    `json:"tree_size"`
	LastSeq    uint64    `json:"last_seq"`
	MerkleRoot string    `json:"merkle_root"`
	At         time.Time `json:"at"`
	Key        string    `json:"key"`
	// Records is how many records of the store the anchor covered (at
	// most TreeSize); Matched is true when they were all there and their
	// Merkle root is the anchor's.
	Records uint64 `json:"records"`
	Matched bool   `json:"matched"`
	// Own is true when the anchor is the newest line of the auditor's own
	// export file (checked on every verify without being asked), false
	// when the caller gave it (VerifyRequest.Anchor).
	Own bool `json:"own,omitempty"`
}

// VerifyProblem is one finding of audit.verify.
type VerifyProblem struct {
	// Seq is the QUARANTINE sequence of the record concerned (0 for a
	// checkpoint problem).
	Seq uint64 `json:"seq,omitempty"`
	// Subject, DLQID and Index name the record when it could be read.
	Subject string `json:"subject,omitempty"`
	DLQID   string `json:"dlq_id,omitempty"`
	Index   int    `json:"index,omitempty"`
	// Kind is a record.Problem* or api.Problem* constant.
	Kind string `json:"kind"`
	// Detail explains the finding (hashes, sequences, never payload).
	Detail string `json:"detail"`
	// CheckpointSeq is the AUDIT sequence of the checkpoint concerned, and
	// FromSeq..ToSeq the QUARANTINE range it covers (checkpoint problems).
	CheckpointSeq uint64 `json:"checkpoint_seq,omitempty"`
	FromSeq       uint64 `json:"from_seq,omitempty"`
	ToSeq         uint64 `json:"to_seq,omitempty"`
}

// VerifyReply is the outcome of audit.verify.
type VerifyReply struct {
	// OK is true when no problem was found.
	OK bool `json:"ok"`
	// Records is the number of records read, Chains the number of dlq ids,
	// LastSeq the last QUARANTINE sequence covered.
	Records uint64 `json:"records"`
	Chains  int    `json:"chains"`
	LastSeq uint64 `json:"last_seq"`
	// Checkpoints is the number of checkpoints checked.
	Checkpoints int `json:"checkpoints"`
	// NewestCheckpointAt is when the newest checkpoint of AUDIT was written
	// (nil when there is none), NewestCheckpointAgeSeconds how long before
	// the verification that was, and NewestCheckpointLastSeq the last
	// QUARANTINE sequence it covers.
	NewestCheckpointAt         *time.Time `json:"newest_checkpoint_at,omitempty"`
	NewestCheckpointAgeSeconds float64    `json:"newest_checkpoint_age_seconds,omitempty"`
	NewestCheckpointLastSeq    uint64     `json:"newest_checkpoint_last_seq,omitempty"`
	// ProblemCount counts every problem; Problems lists the first
	// MaxProblems of them, in stream order.
	ProblemCount int             `json:"problem_count"`
	Problems     []VerifyProblem `json:"problems,omitempty"`
	// Seconds is how long the verification took.
	Seconds float64 `json:"seconds"`
	// Anchor is the anchor checked (VerifyRequest.Anchor), nil without one.
	Anchor *VerifyAnchor `json:"anchor,omitempty"`
	// ExpiredBelowSeq, when QUARANTINE has a MaxAge, is its first
	// sequence: the records below it expired (they are not reported
	// missing; checkpoints over them no longer recompute).
	ExpiredBelowSeq uint64 `json:"expired_below_seq,omitempty"`
	// LegalHold is the check of LEGALHOLD, nil when it is not provisioned
	// (QUARANTINE has no MaxAge).
	LegalHold *VerifyLegalHold `json:"legal_hold,omitempty"`
	// Documents is the check of DOCUMENTS (problems of kind
	// ProblemDocument).
	Documents *VerifyDocuments `json:"documents,omitempty"`
}

// VerifyDocuments is what audit.verify found in DOCUMENTS: Objects
// documents re-hashed (Bytes in all), and Named distinct documents the
// records read name (each must be there).
type VerifyDocuments struct {
	Objects int    `json:"objects"`
	Bytes   uint64 `json:"bytes"`
	Named   int    `json:"named"`
}

// VerifyLegalHold is what audit.verify found in LEGALHOLD: the copies of
// held chains (their problems are among VerifyReply.Problems, kinds
// ProblemLegalHoldCopy and ProblemLegalHoldIncomplete).
type VerifyLegalHold struct {
	// Records and Chains are the copies read and the chains they belong
	// to; Expired counts the held chains whose first record QUARANTINE no
	// longer holds (each must be whole in LEGALHOLD).
	Records uint64 `json:"records"`
	Chains  int    `json:"chains"`
	Expired int    `json:"expired"`
}

// Checkpoint is one record of the AUDIT stream (subject audit.checkpoints):
// tamper evidence over every QUARANTINE record up to LastSeq. See
// Algorithm for how Digest is computed.
type Checkpoint struct {
	// Version is the checkpoint format (1).
	Version int `json:"version"`
	// Algorithm names the digest: CheckpointAlgorithm.
	Algorithm string `json:"algorithm"`
	// LastSeq is the last QUARANTINE sequence covered; Count the records
	// covered (sequences 1..LastSeq that hold a record).
	LastSeq uint64 `json:"last_seq"`
	Count   uint64 `json:"count"`
	// Digest is the running SHA-256 (lowercase hex) described by
	// CheckpointAlgorithm.
	Digest string `json:"digest"`
	// Prev is the lowercase hex SHA-256 of the stored bytes of the previous
	// checkpoint ("" for the first), chaining the checkpoints.
	Prev string `json:"prev"`
	// At is when the checkpoint was written (UTC).
	At time.Time `json:"at"`
	// Instance names the auditor that wrote it.
	Instance string `json:"instance,omitempty"`
	// MerkleRoot is the lowercase hex root of the MerkleAlgorithm tree
	// over the TreeSize records with sequences 1..LastSeq (version 2).
	MerkleRoot string `json:"merkle_root,omitempty"`
	TreeSize   uint64 `json:"tree_size,omitempty"`
	// Key is the nkeys public key of the signer and Signature the
	// standard base64 ed25519 signature of SignedBytes (both empty when
	// the auditor has no signing key).
	Key       string `json:"key,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// MerkleAlgorithm: Checkpoint.MerkleRoot is the RFC 6962 Merkle tree hash
// (SHA-256; leaf hash SHA-256(0x00 || leaf), node SHA-256(0x01 || left ||
// right), split at the largest power of two below the size) whose leaves
// are the QUARANTINE records in sequence order, one per record: its
// sequence as 8 bytes big-endian followed by the 32 bytes of its
// audit_hash (hex decoded), or the 8 bytes alone when the record has no
// readable audit_hash.
const MerkleAlgorithm = "rfc6962-sha256-seq-audithash-v1"

// CheckpointVersionMerkle is the version of checkpoints carrying a Merkle
// root (and, with a signing key, a signature).
const CheckpointVersionMerkle = 2

// SignedBytes is the canonical text a checkpoint's Signature covers: one
// "name=value" line per field, in this order, strings quoted as Go
// strconv.Quote does, the time in RFC 3339 with nanoseconds in UTC:
//
//	deadletter-checkpoint-v2
//	version=2
//	algorithm="sha256-running-v1"
//	last_seq=12
//	count=12
//	digest="<hex>"
//	prev="<hex or empty>"
//	at="2026-01-02T03:04:05.123456789Z"
//	instance="auditor"
//	merkle_algorithm="rfc6962-sha256-seq-audithash-v1"
//	merkle_root="<hex>"
//	tree_size=12
//	key="<nkeys public key>"
func (c Checkpoint) SignedBytes() []byte {
	b := []byte("deadletter-checkpoint-v2\n")
	b = fmt.Appendf(b, "version=%d\nalgorithm=%s\nlast_seq=%d\ncount=%d\ndigest=%s\nprev=%s\n",
		c.Version, strconv.Quote(c.Algorithm), c.LastSeq, c.Count, strconv.Quote(c.Digest), strconv.Quote(c.Prev))
	b = fmt.Appendf(b, "at=%s\ninstance=%s\nmerkle_algorithm=%s\nmerkle_root=%s\ntree_size=%d\nkey=%s\n",
		strconv.Quote(c.At.UTC().Format(time.RFC3339Nano)), strconv.Quote(c.Instance), strconv.Quote(MerkleAlgorithm),
		strconv.Quote(c.MerkleRoot), c.TreeSize, strconv.Quote(c.Key))
	return b
}

// ExportedCheckpoint is one line of the auditor's export sink: a
// checkpoint as stored in AUDIT (at AuditSeq), and the hashes of the
// aligned blocks of 2^BlockHeight leaves of its Merkle tree (the last one
// partial; lowercase hex), at most the auditor's AnchorBlocks of them.
// The blocks are not signed: a verifier accepts them only when they
// recombine into the signed MerkleRoot, and uses them to find which
// block, and when blocks hold one record which record, of a rewritten
// store differs.
type ExportedCheckpoint struct {
	Checkpoint
	AuditSeq    uint64   `json:"audit_seq"`
	BlockHeight int      `json:"block_height"`
	Blocks      []string `json:"blocks,omitempty"`
}

// CheckpointAlgorithm: Digest = SHA-256 over the concatenation, in
// sequence order, of one line per QUARANTINE record with sequence 1..LastSeq:
// the decimal sequence, one space, the record's audit_hash member (64
// lowercase hex digits; "-" when the record has no readable audit_hash),
// and a line feed. For example "1 9f86d0...\n2 60303a...\n".
const CheckpointAlgorithm = "sha256-running-v1"

// CheckpointRequest asks for a checkpoint now (the empty request).
type CheckpointRequest struct{}

// CheckpointReply is the checkpoint written (or the last one, unchanged,
// when no record was stored since it).
type CheckpointReply struct {
	// Seq is the checkpoint's sequence in AUDIT.
	Seq        uint64     `json:"seq"`
	Checkpoint Checkpoint `json:"checkpoint"`
	// Unchanged is true when no new checkpoint was needed.
	Unchanged bool `json:"unchanged,omitempty"`
}

// ReconcileRequest asks the auditor to account for every event received on
// EVENTS between From and To (stream receive time; zero values: from the
// first event, up to now) in Domain (empty: every domain).
type ReconcileRequest struct {
	Domain string    `json:"domain,omitempty"`
	From   time.Time `json:"from,omitzero"`
	To     time.Time `json:"to,omitzero"`
	// IDs lists the events of every category (not only unaccounted ones),
	// up to MaxIDs per category (default 1000).
	IDs    bool `json:"ids,omitempty"`
	MaxIDs int  `json:"max_ids,omitempty"`
	// Grace overrides the grace period (Go duration, e.g. "5m").
	Grace string `json:"grace,omitempty"`
	// Repair gives every unaccounted event an outcome: a sealed
	// quarantine record (class exhausted, its verbatim bytes) that the
	// quarantiner writes (QuarantinerRepair), recorded first in AUDIT.
	// Only an event the validator's consumer has settled (streams.Settled:
	// never delivered again) is repaired; the others are counted
	// RepairDeferred. Operators only; the auditor's periodic
	// reconciliation repairs on its own.
	Repair bool `json:"repair,omitempty"`
}

// Reconcile categories.
const (
	// ReconcileCommitted: the event's key is committed in LEDGER from this
	// very message.
	ReconcileCommitted = "committed"
	// ReconcileDuplicate: the key was committed or quarantined from another
	// message.
	ReconcileDuplicate = "duplicate"
	// ReconcileOpen: quarantined and open (see OpenByClass).
	ReconcileOpen = "open"
	// ReconcileRedriving: quarantined with a replay in flight.
	ReconcileRedriving = "redriving"
	// ReconcilePoison: quarantined as poison.
	ReconcilePoison = "poison"
	// ReconcileResolved: quarantined and resolved (replayed, duplicate or a
	// person's decision).
	ReconcileResolved = "resolved"
	// ReconcileReplay: a replay published by the redriver (header
	// Deadletter-Dlq-Id) whose chain exists.
	ReconcileReplay = "replay"
	// ReconcilePending: none of the above yet, younger than the grace period.
	ReconcilePending = "pending"
	// ReconcileUnaccounted: none of the above, older than the grace period.
	ReconcileUnaccounted = "unaccounted"
	// ReconcileConflict: the event's key is committed with other content
	// and the event is quarantined IDEMPOTENCY_CONFLICT (in the chain of
	// its key and content, from this or another copy of it). A conflicting
	// event with no such chain is pending, then unaccounted.
	ReconcileConflict = "conflict"
	// ReconcileDocumentPart: a part of an EPCIS document published in
	// parts; its events are accounted for under the document's manifest.
	ReconcileDocumentPart = "document_part"
)

// Reasons a LEDGER entry is unsourced (LedgerEntry.Reason).
const (
	// UnsourcedNoSource: the entry names no EVENTS message.
	UnsourcedNoSource = "no_source"
	// UnsourcedSourceMissing: EVENTS holds no message at the named
	// sequence, and it cannot have expired yet.
	UnsourcedSourceMissing = "source_missing"
	// UnsourcedContentMismatch: the named EVENTS message has other content
	// (canonical JSON SHA-256), or the entry's content hash header is not
	// its own payload's.
	UnsourcedContentMismatch = "content_mismatch"
	// UnsourcedKeyMismatch: the named EVENTS message does not pass the
	// gate with this entry's key and domain, or is a replay of another
	// chain.
	UnsourcedKeyMismatch = "key_mismatch"
)

// LedgerEntry names one LEDGER entry of a reconciliation.
type LedgerEntry struct {
	// Seq is the LEDGER sequence, Subject its subject (ledger.<domain>.<key>).
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	// SourceSeq is the EVENTS sequence it names (0: none).
	SourceSeq uint64 `json:"source_seq,omitempty"`
	// Stored is when LEDGER stored it.
	Stored time.Time `json:"stored"`
	// Reason is why it is unsourced (Unsourced* constants), or for an
	// entry keyed otherwise now whose source is expired, "source_expired".
	Reason string `json:"reason"`
	// CurrentKey, on an entry of LedgerReconcile.RekeyedEntries, is the
	// idempotency key the gate derives from the entry's event now (its
	// subject would be ledger.<domain>.<current key>).
	CurrentKey string `json:"current_key,omitempty"`
}

// LedgerReconcile is reconciliation from LEDGER back to EVENTS: every entry
// must name the EVENTS message it was committed from (a publisher's event,
// or a redriver's replay of a quarantined event or of its correction),
// with the same content and key.
type LedgerReconcile struct {
	// Entries is how many LEDGER entries were examined; Sourced found
	// their source; SourceExpired named a source EVENTS no longer holds
	// because it is older than EVENTS' max age (not checkable any more).
	Entries       int `json:"entries"`
	Sourced       int `json:"sourced"`
	SourceExpired int `json:"source_expired,omitempty"`
	// Unsourced counts the others, listed (up to MaxIDs) in
	// UnsourcedEntries: something other than the validator committing an
	// event wrote them.
	Unsourced        int           `json:"unsourced"`
	UnsourcedEntries []LedgerEntry `json:"unsourced_entries"`
	// Rekeyed counts the entries (unsourced, or whose source expired)
	// whose event the gate keys otherwise now (a key derivation changed
	// since it was committed, e.g. DSCSA events without eventID keyed by
	// the CBV 2.0 event hash ID; or an entry written under a key of the
	// writer's choosing), listed (up to MaxIDs) with their current key in
	// RekeyedEntries: the same event published again would be committed
	// again under its current key. Read only: nothing is re-keyed.
	Rekeyed        int           `json:"rekeyed,omitempty"`
	RekeyedEntries []LedgerEntry `json:"rekeyed_entries,omitempty"`
}

// ReconcileEvent names one event of a reconciliation.
type ReconcileEvent struct {
	// Seq is the EVENTS sequence, Subject its subject.
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	// Key is the idempotency key when the event parsed; DLQID its quarantine
	// id (the key, or the source-derived id when it did not parse).
	Key   string `json:"key,omitempty"`
	DLQID string `json:"dlq_id,omitempty"`
	// Received is when EVENTS stored it.
	Received time.Time `json:"received"`
	// DocumentIndex is, for an event of an EPCIS document (Seq is then
	// the document's message), its position in the document (from 0).
	DocumentIndex *int `json:"document_index,omitempty"`
}

// ReconcileReply counts every event of the range by category.
type ReconcileReply struct {
	Domain string    `json:"domain,omitempty"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Grace  string    `json:"grace"`
	// Events is the number of events examined; Counts their number per
	// category (Reconcile* constants); OpenByClass the open ones by class.
	Events      int            `json:"events"`
	Counts      map[string]int `json:"counts"`
	OpenByClass map[string]int `json:"open_by_class,omitempty"`
	// Unaccounted lists the unaccounted events (always, up to MaxIDs).
	Unaccounted []ReconcileEvent `json:"unaccounted"`
	// Ledger is the reconciliation of LEDGER's entries (stored in
	// [From, To]) against their sources.
	Ledger LedgerReconcile `json:"ledger"`
	// IDs lists the events per category, when asked.
	IDs map[string][]ReconcileEvent `json:"ids,omitempty"`
	// Repaired lists the unaccounted events a Repair gave an outcome
	// (their records sealed by the repair), up to MaxIDs; RepairFound
	// counts those the quarantiner found sealed meanwhile by the usual
	// path, RepairDeferred those the validator may still deliver (repaired
	// by a later run once it settled them).
	Repaired       []ReconcileEvent `json:"repaired,omitempty"`
	RepairFound    int              `json:"repair_found,omitempty"`
	RepairDeferred int              `json:"repair_deferred,omitempty"`
	// Seconds is how long the reconciliation took.
	Seconds float64 `json:"seconds"`
}

// GetRequest asks for one quarantine chain.
type GetRequest struct {
	DLQID string `json:"dlq_id"`
	// Domain narrows the lookup (optional).
	Domain string `json:"domain,omitempty"`
	// IncludePayload keeps the payloads in the reply (omitted by default).
	// It is a payload read: only an inspector or operator may ask, with a
	// Reason, and the read is recorded in AUDIT (an AccessRecord) before
	// the reply is sent.
	IncludePayload bool `json:"include_payload,omitempty"`
	// Reason says why the payload is read (required with IncludePayload).
	Reason string `json:"reason,omitempty"`
	// ApprovalID names the approval an approver reviews: with it an
	// approver (who otherwise reads no payloads) may read the payloads of
	// the record a correction approval acts on, and the access record's
	// reason names the approval.
	ApprovalID string `json:"approval_id,omitempty"`
}

// GetReply is the current state of a chain and its records, each with its
// QUARANTINE sequence and seal check.
type GetReply struct {
	State record.State `json:"state"`
	// DocumentBytes are, for an event read from an EPCIS document and a
	// request with IncludePayload, the event's exact original bytes in
	// the document kept in DOCUMENTS (State.Document's Offset and Length):
	// the XML element of an XML document, where State's payload is its
	// mapped JSON. Absent when the document is not kept.
	DocumentBytes []byte `json:"document_bytes,omitempty"`
	// TraceURL opens the original event's trace in Jaeger.
	TraceURL string        `json:"trace_url,omitempty"`
	Records  []ChainRecord `json:"records"`
	// Problems are the chain's integrity findings (empty when intact).
	Problems []record.Problem `json:"problems,omitempty"`
}

// ChainRecord is one stored record of a chain.
type ChainRecord struct {
	Seq    uint64          `json:"seq"`
	Record json.RawMessage `json:"record"`
	// Stream is LEGALHOLD for a record read from its legal-hold copy (the
	// original expired from QUARANTINE; Seq is then LEGALHOLD's), empty
	// for QUARANTINE.
	Stream string `json:"stream,omitempty"`
	// TraceID and TraceURL find the trace the record was written in (the
	// original event's for the first record; a redrive's for its records)
	// in Jaeger.
	TraceID  string `json:"trace_id,omitempty"`
	TraceURL string `json:"trace_url,omitempty"`
}

// ListRequest filters and pages the quarantined events, newest first (by
// the QUARANTINE sequence of each chain's first record, which follows
// quarantine time). Every filter is optional: Supplier matches the
// supplier or registrant (party id), Status a record.Status* value, From
// and To bound the quarantine time. Limit is the page size (default 100,
// at most 1000); Cursor is the NextCursor of the previous page.
type ListRequest struct {
	Domain   string `json:"domain,omitempty"`
	Class    string `json:"class,omitempty"`
	Code     string `json:"code,omitempty"`
	Supplier string `json:"supplier,omitempty"`
	// Publisher matches the publisher of the original event
	// (record.Record.Publisher).
	Publisher string    `json:"publisher,omitempty"`
	Status    string    `json:"status,omitempty"`
	From      time.Time `json:"from,omitzero"`
	To        time.Time `json:"to,omitzero"`
	Limit     int       `json:"limit,omitempty"`
	Cursor    string    `json:"cursor,omitempty"`
	// Records lists QUARANTINE's records one by one instead of chains
	// (`dlqctl tail`): oldest first, those with a sequence above AfterSeq
	// (and, with From, stored at or after From; To, Class, Code, Supplier,
	// Status and Cursor are ignored), of Domain and DLQID when given, at
	// most Limit of them, each a RecordSummary (no payload, headers,
	// details or attempts). ListReply.NextAfterSeq is the AfterSeq of the
	// next page. An AfterSeq at or past the stream's last sequence reads
	// nothing and answers that last sequence, so a follower can start at
	// the end.
	Records  bool   `json:"records,omitempty"`
	AfterSeq uint64 `json:"after_seq,omitempty"`
	DLQID    string `json:"dlq_id,omitempty"`
	// Identifier filters: find the events of a business object, the way
	// a recall or a suspect-product investigation starts (dlqctl find).
	// The auditor normalizes them as the domains do, so a person can
	// paste what they hold: NDC in any FDA layout (→ NDC-11), Registrant
	// a DEA number (any case), TransactionID (matched against the
	// transaction id the first record names, record.Record.Identifiers;
	// with Registrant, a record written before that matches through the
	// idempotency key), GTIN a
	// GTIN-8/12/13/14 (→ GTIN-14) or an SGTIN EPC URN or GS1 Digital
	// Link URI (which also gives the serial), Serial a serial number, SSCC
	// an aggregation's container (18 digits, an SSCC EPC URN or a Digital
	// Link /00/ URI), TLC an FSMA traceability lot code, Lot a pharmacy
	// or DSCSA lot or an FSMA TLC.
	// They match the identifiers the event's ordering key and party name
	// (Summary.Identifiers), never a payload; every filter given must
	// match; identifiers of two domains in one request are refused.
	NDC           string `json:"ndc,omitempty"`
	Lot           string `json:"lot,omitempty"`
	Registrant    string `json:"registrant,omitempty"`
	TransactionID string `json:"transaction_id,omitempty"`
	GTIN          string `json:"gtin,omitempty"`
	Serial        string `json:"serial,omitempty"`
	SSCC          string `json:"sscc,omitempty"`
	TLC           string `json:"tlc,omitempty"`
	// Identifiers are identifier filters by search field name, for the
	// fields of a domain (domain.Spec.Search.Fields) that have no field
	// of their own above; a named field's name ("ndc") works too.
	Identifiers map[string]string `json:"identifiers,omitempty"`
	// Document lists the quarantined events read from one EPCIS document,
	// by its SHA-256 (GroupDocument.SHA256; lowercase hex): a shipment
	// as one thing to look at (dlqctl find --document).
	Document string `json:"document,omitempty"`
}

// HasIdentifiers reports whether r filters by a domain identifier.
func (r ListRequest) HasIdentifiers() bool {
	return len(r.IdentifierFilters()) > 0
}

// IdentifierFilters returns the identifier filters r gives, by search
// field name (the named fields' JSON names, and Identifiers' keys), the
// empty ones left out; nil when there are none.
func (r ListRequest) IdentifierFilters() map[string]string {
	var m map[string]string
	add := func(name, v string) {
		if v == "" {
			return
		}
		if m == nil {
			m = map[string]string{}
		}
		m[name] = v
	}
	for name, v := range r.Identifiers {
		add(name, v)
	}
	for _, f := range [...]struct{ name, v string }{
		{"ndc", r.NDC}, {"lot", r.Lot}, {"registrant", r.Registrant}, {"transaction_id", r.TransactionID},
		{"gtin", r.GTIN}, {"serial", r.Serial}, {"sscc", r.SSCC}, {"tlc", r.TLC},
	} {
		add(f.name, f.v)
	}
	return m
}

// RecordSummary is one record of QUARANTINE in a records list
// (ListRequest.Records): what the record states, never its payload,
// headers, error detail or attempts.
type RecordSummary struct {
	// Seq is the record's QUARANTINE sequence.
	Seq uint64 `json:"seq"`
	// DLQID, Index and Kind name the record (record.Kind*).
	DLQID string `json:"dlq_id"`
	Index int    `json:"index"`
	Kind  string `json:"kind"`
	// Domain, Class, ErrorCode and RedriveCount are the event's state
	// after the record.
	Domain       string `json:"domain"`
	Class        string `json:"class"`
	ErrorCode    string `json:"error_code"`
	RedriveCount int    `json:"redrive_count"`
	// DrainID names the drain that caused the record; Actor the
	// authenticated person whose decision it records (both optional).
	DrainID string `json:"drain_id,omitempty"`
	Actor   string `json:"actor,omitempty"`
	// QuarantinedAt is when the record was written; AuditHash its seal.
	QuarantinedAt time.Time `json:"quarantined_at"`
	AuditHash     string    `json:"audit_hash"`
}

// Summary is one quarantined event in a list: its current state without
// payload, headers or attempts.
type Summary struct {
	DLQID         string    `json:"dlq_id"`
	Domain        string    `json:"domain"`
	Class         string    `json:"class"`
	Status        string    `json:"status"`
	ErrorCode     string    `json:"error_code"`
	PartyID       string    `json:"party_id,omitempty"`
	Publisher     string    `json:"publisher,omitempty"`
	RedriveCount  int       `json:"redrive_count"`
	Records       int       `json:"records"`
	FirstSeen     time.Time `json:"first_seen"`
	QuarantinedAt time.Time `json:"quarantined_at"`
	LastChange    time.Time `json:"last_change"`
	LastHash      string    `json:"last_hash"`
	// Identifiers are the business identifiers the event's ordering key
	// and party name (the ordering key is what audit.get shows without a
	// payload read), under the envelope's names: pharmacy "ndc11" and
	// "lot", DSCSA "gtin" and "serial" (an aggregation's container:
	// "sscc"), FSMA "tlc" (the supplier is
	// PartyID). Empty when the payload did not give them.
	//
	// Beside them, from the first record's identifiers (records written
	// since they carry them): pharmacy "transaction_id" and
	// "registrant_dea", DSCSA "lot", FSMA "tlc" (record.Record.Identifiers).
	Identifiers map[string]string `json:"identifiers,omitempty"`
	// EventType is the event's type: the DSCSA business step its record
	// names, else the last token of the subject it was published on
	// (pharmacy "receive", FSMA "shipping", ...); "" when neither tells.
	EventType string `json:"event_type,omitempty"`
	// HoldIDs are the legal holds the event's chain carries (placed, not
	// lifted), sorted; empty when none holds it.
	HoldIDs []string `json:"hold_ids,omitempty"`
}

// ListReply is one page; NextCursor is "" on the last page.
type ListReply struct {
	Items      []Summary `json:"items"`
	Total      int       `json:"total"`
	NextCursor string    `json:"next_cursor,omitempty"`
	// Records is the page of a records list (ListRequest.Records), and
	// NextAfterSeq the ListRequest.AfterSeq that continues it: the last
	// sequence read, or the stream's last sequence when no more records
	// matched.
	Records      []RecordSummary `json:"records,omitempty"`
	NextAfterSeq uint64          `json:"next_after_seq,omitempty"`
	// Document is, for the first page of a list of one EPCIS document
	// (ListRequest.Document), every event of the document with its
	// outcome: a shipment as one thing to look at.
	Document *DocumentOutcomes `json:"document,omitempty"`
}

// MaxDocumentEvents bounds the events DocumentOutcomes lists.
const MaxDocumentEvents = 5000

// DocumentOutcomes is every event of one EPCIS document with its outcome,
// as audit.reconcile classifies the events of the document's message
// (Reconcile* categories: committed, duplicate, open, redriving, poison,
// resolved, conflict, pending, unaccounted), by position; with a
// ListRequest.Code, only the quarantined events of that code.
type DocumentOutcomes struct {
	Document GroupDocument `json:"document"`
	// Counts counts the document's events by outcome (all of them, the
	// code filter aside).
	Counts map[string]int `json:"counts"`
	// Events lists them by position, at most MaxDocumentEvents
	// (Truncated then says so).
	Events    []DocumentEvent `json:"events"`
	Truncated bool            `json:"truncated,omitempty"`
}

// DocumentEvent is one event of a document and its outcome: its
// position (from 0), its outcome (a Reconcile* category) and, when it was
// quarantined, its dlq id and latest error code.
type DocumentEvent struct {
	Index     int    `json:"index"`
	Outcome   string `json:"outcome"`
	DLQID     string `json:"dlq_id,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
}

// GroupsRequest filters the triage groups (all optional).
type GroupsRequest struct {
	Domain string `json:"domain,omitempty"`
	// Samples is the number of sample dlq ids per group (default 5).
	Samples int `json:"samples,omitempty"`
	// OpenOnly drops groups without open records.
	OpenOnly bool `json:"open_only,omitempty"`
	// By is how events are grouped: "" by fingerprint (domain, code,
	// class) and party; GroupByDocument by the EPCIS document they were
	// read from (events not read from a document are left out).
	By string `json:"by,omitempty"`
}

// GroupByDocument groups events by their EPCIS document
// (GroupsRequest.By).
const GroupByDocument = "document"

// GroupDocument is the EPCIS document of a group by document
// (Group.Document): its identity as the first records name it.
type GroupDocument struct {
	// ID is the document's id (its SBDH instance identifier, or the
	// SHA-256 when it names none); SHA256 the hex SHA-256 of its bytes.
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
	// Format is "json" or "xml"; Events the document's event count (0
	// when unknown).
	Format string `json:"format,omitempty"`
	Events int    `json:"events,omitempty"`
	// Sender and Receiver are the SBDH's, Created its creation date, when
	// given.
	Sender   string `json:"sender,omitempty"`
	Receiver string `json:"receiver,omitempty"`
	Created  string `json:"created,omitempty"`
}

// Group is one triage group: quarantined events sharing a fingerprint
// (domain, error code, class), with a second level by supplier/registrant.
type Group struct {
	Fingerprint string `json:"fingerprint"`
	Domain      string `json:"domain"`
	Code        string `json:"code"`
	Class       string `json:"class"`
	// Party is set on second-level groups (supplier or registrant; "" when
	// unknown).
	Party string `json:"party,omitempty"`
	// Total counts every event of the group, Open those not resolved
	// (open, redriving or poison: poison events form their own class).
	Total int `json:"total"`
	Open  int `json:"open"`
	// FirstSeen and LastSeen bound when the group's events were
	// quarantined; OldestOpenSeconds is the age of the oldest open one.
	FirstSeen         time.Time `json:"first_seen"`
	LastSeen          time.Time `json:"last_seen"`
	OldestOpenSeconds float64   `json:"oldest_open_seconds"`
	// Samples are a few dlq ids, open ones first, newest first.
	Samples []string `json:"samples"`
	// Parties are the second-level groups (top level only).
	Parties []Group `json:"parties,omitempty"`
	// Document is the document of a group by document (GroupByDocument;
	// Fingerprint "document:<sha256>", Code and Class empty), and ByCode
	// its quarantined events by their latest error code.
	Document *GroupDocument `json:"document,omitempty"`
	ByCode   map[string]int `json:"by_code,omitempty"`
}

// GroupsReply lists the groups, most open first.
type GroupsReply struct {
	Groups []Group   `json:"groups"`
	At     time.Time `json:"at"`
}

// WhoamiReply is the caller of audit.whoami as the server authenticated
// it: its user name and role (a person role, or "" for a service user).
type WhoamiReply struct {
	User string `json:"user"`
	Role string `json:"role"`
	// ReadsPayloads reports whether the role may read payloads (with a
	// reason, recorded in the access audit).
	ReadsPayloads bool `json:"reads_payloads"`
}

// Access actions (AccessRecord.Action).
const (
	// AccessGet: audit.get with include_payload.
	AccessGet = "get"
	// AccessExport: one page of audit.export.
	AccessExport = "export"
	// AccessReview: approval.get of an approval whose request or identity
	// diff carries payload values (the approver reviewing a correction;
	// written by the redriver, Reason "<approval id> review").
	AccessReview = "review"
)

// MaxAccessIDs is the largest number of dlq ids an AccessRecord lists;
// a bigger read lists its filter, its count and the hash of its ids.
const MaxAccessIDs = 100

// AccessRecord is one payload read as the AUDIT stream keeps it, on
// subjects.AuditAccess(User), written (and acknowledged by the server)
// before any payload byte of the read leaves the auditor. It holds no
// payload value.
type AccessRecord struct {
	// User and Role name the caller ("anonymous" and "" for an
	// unauthenticated read of a test server with AllowAnonymous).
	User string `json:"user"`
	Role string `json:"role,omitempty"`
	// At is when the read was allowed.
	At time.Time `json:"at"`
	// Action is AccessGet, AccessExport or AccessReview.
	Action string `json:"action"`
	// DLQIDs lists the chains read (at most MaxAccessIDs; nil above).
	DLQIDs []string `json:"dlq_ids,omitempty"`
	// Filter is the export's filter (exports only).
	Filter *ExportFilter `json:"filter,omitempty"`
	// Count is the number of chains read; IDsHash the lowercase hex
	// SHA-256 of their dlq ids, each followed by a line feed, in the order
	// of the reply.
	Count   int    `json:"count"`
	IDsHash string `json:"ids_hash"`
	// Reason is the caller's stated reason.
	Reason string `json:"reason"`
}

// AccessEntry is one AccessRecord of a listing, with its AUDIT sequence.
type AccessEntry struct {
	Seq uint64 `json:"seq"`
	AccessRecord
}

// AccessRequest lists the access audit, newest first: the reads of User
// (all users when empty) made at or after Since and at or before Until
// (zero: unbounded), at most Limit (default 100, at most MaxLimit) per
// page; Cursor is the NextCursor of the previous page.
type AccessRequest struct {
	User   string    `json:"user,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Until  time.Time `json:"until,omitzero"`
	Limit  int       `json:"limit,omitempty"`
	Cursor string    `json:"cursor,omitempty"`
}

// AccessReply is one page of the access audit ("" NextCursor on the last).
type AccessReply struct {
	Items      []AccessEntry `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// ExportFilter selects the chains of an export (every member optional):
// Domain, Party (supplier or registrant), Status (a record.Status*
// value) and the quarantine time range From..To (inclusive) of the
// chain's first record. Party and Status match the chain's state when the
// page is read (its records are exported up to the export's checkpoint).
//
// The identifier filters are a records search's (ListRequest's, read
// the same way in every domain): a field the filter's domain does not
// search by is a BAD_REQUEST naming it, never an empty export.
type ExportFilter struct {
	Domain string    `json:"domain,omitempty"`
	Party  string    `json:"party,omitempty"`
	Status string    `json:"status,omitempty"`
	From   time.Time `json:"from,omitzero"`
	To     time.Time `json:"to,omitzero"`
	// Identifier filters, as ListRequest's.
	NDC           string            `json:"ndc,omitempty"`
	Lot           string            `json:"lot,omitempty"`
	Registrant    string            `json:"registrant,omitempty"`
	TransactionID string            `json:"transaction_id,omitempty"`
	GTIN          string            `json:"gtin,omitempty"`
	Serial        string            `json:"serial,omitempty"`
	SSCC          string            `json:"sscc,omitempty"`
	TLC           string            `json:"tlc,omitempty"`
	Identifiers   map[string]string `json:"identifiers,omitempty"`
}

// Search is the records search of the filter's domain, party and
// identifiers.
func (f ExportFilter) Search() ListRequest {
	return ListRequest{Domain: f.Domain, Supplier: f.Party, NDC: f.NDC, Lot: f.Lot, Registrant: f.Registrant,
		TransactionID: f.TransactionID, GTIN: f.GTIN, Serial: f.Serial, SSCC: f.SSCC, TLC: f.TLC, Identifiers: f.Identifiers}
}

// ExportRequest asks for one page of an inspection export: the chains
// matching Filter, newest first, with their full records (payloads
// included: an export is a payload read, for an inspector or operator,
// with a Reason, recorded in AUDIT per page) and the inclusion proof of
// each record in the Merkle tree of the export's signed checkpoint. The
// first page (no Cursor) first has a checkpoint written covering every
// record stored (unless the newest already does); every page is proved
// against that checkpoint, and records stored after it are left out
// (ExportReply.Uncovered counts them). Limit caps the chains of a page
// (default and most 1000); pages are also bounded in bytes.
type ExportRequest struct {
	Filter ExportFilter `json:"filter"`
	Reason string       `json:"reason"`
	Limit  int          `json:"limit,omitempty"`
	Cursor string       `json:"cursor,omitempty"`
}

// ExportRecord is one record of an exported chain: its QUARANTINE
// sequence, its stored bytes (sealed), its leaf index in the checkpoint's
// Merkle tree (api.MerkleAlgorithm) and the RFC 6962 inclusion proof of
// its leaf (lowercase hex hashes, from the leaf up).
type ExportRecord struct {
	Seq       uint64          `json:"seq"`
	LeafIndex uint64          `json:"leaf_index"`
	Record    json.RawMessage `json:"record"`
	Proof     []string        `json:"proof"`
}

// ExportChain is one exported chain: every record of it the checkpoint
// covers, in chain order.
type ExportChain struct {
	DLQID   string         `json:"dlq_id"`
	Domain  string         `json:"domain"`
	Records []ExportRecord `json:"records"`
}

// ExportReply is one page of an export. Checkpoint is the signed
// checkpoint every proof of the export is against (the same on every
// page), stored in AUDIT at Checkpoint.AuditSeq.
type ExportReply struct {
	Checkpoint ExportedCheckpoint `json:"checkpoint"`
	Chains     []ExportChain      `json:"chains"`
	// Uncovered counts the records of this page's chains stored after the
	// checkpoint (left out of the page).
	Uncovered  int    `json:"uncovered,omitempty"`
	NextCursor string `json:"next_cursor,omitempty"`
	// AccessSeq is the AUDIT sequence of this page's access record.
	AccessSeq uint64 `json:"access_seq"`
	// Page is this page's manifest, signed by the checkpoints' key: what
	// makes an export provably whole (ExportPage).
	Page ExportPage `json:"page"`
}

// ExportPage is the signed manifest of one export page. The inclusion
// proofs show that each exported record is in the signed tree, unaltered;
// the manifests show that nothing of the filter was left out: every page
// names the cursor it answered (empty for the first) and the next one
// (empty for the last), so pages chain from the first to the last, and its
// Digest covers the page's chains and records in order. A verifier
// (export.Verify) refuses a file whose pages do not chain, whose
// chains do not match their page's digest, or whose last page has a next
// cursor.
type ExportPage struct {
	// Filter is the export's filter; CheckpointSeq and MerkleRoot name
	// the checkpoint every proof of the export is against.
	Filter        ExportFilter `json:"filter"`
	CheckpointSeq uint64       `json:"checkpoint_seq"`
	MerkleRoot    string       `json:"merkle_root"`
	// Cursor is the request's cursor ("" for the first page); NextCursor
	// the reply's ("" for the last).
	Cursor     string `json:"cursor"`
	NextCursor string `json:"next_cursor"`
	// Chains and Records count the page's content; Digest is
	// ExportPageDigest of it.
	Chains  int    `json:"chains"`
	Records int    `json:"records"`
	Digest  string `json:"digest"`
	// Key and Signature: the signer's public key and its ed25519
	// signature (base64) of SignedBytes.
	Key       string `json:"key,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// SignedBytes is what an ExportPage's signature covers: every member but
// the signature, in a fixed text form.
func (p ExportPage) SignedBytes() []byte {
	f, _ := json.Marshal(p.Filter)
	b := []byte("deadletter-export-page-v1\n")
	return fmt.Appendf(b, "filter=%s\ncheckpoint_seq=%d\nmerkle_root=%s\ncursor=%s\nnext_cursor=%s\nchains=%d\nrecords=%d\ndigest=%s\nkey=%s\n",
		strconv.Quote(string(f)), p.CheckpointSeq, strconv.Quote(p.MerkleRoot), strconv.Quote(p.Cursor), strconv.Quote(p.NextCursor),
		p.Chains, p.Records, strconv.Quote(p.Digest), strconv.Quote(p.Key))
}

// ExportPageDigest is the lowercase hex SHA-256 over the chains of a page,
// in order: per chain a line "chain <dlq_id> <domain> <records>", then per
// record a line "<seq> <leaf_index> <SHA-256 of the record's bytes>", the
// bytes in their one export form (ExportRecordJSON: the stored bytes, and
// what an export file holds).
func ExportPageDigest(chains []ExportChain) string {
	h := sha256.New()
	for _, c := range chains {
		fmt.Fprintf(h, "chain %s %s %d\n", c.DLQID, c.Domain, len(c.Records))
		for _, r := range c.Records {
			sum := sha256.Sum256(ExportRecordJSON(r.Record))
			fmt.Fprintf(h, "%d %d %x\n", r.Seq, r.LeafIndex, sum)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ExportFormat names the JSONL export format (ExportHeader.Format): v2
// files carry each page's signed manifest (ExportLine.Page) after the
// page's chains.
const ExportFormat = "deadletter-export-v2"

// ExportLine is one line of a JSONL inspection export: exactly one member
// is set. The file is a header, the signed checkpoint the export is
// proved against, then per page its chains (one per line) and its signed
// manifest, and an end line; `dlqctl
// verify-export FILE --pubkey KEY` checks it with no server.
type ExportLine struct {
	Header     *ExportHeader       `json:"header,omitempty"`
	Checkpoint *ExportedCheckpoint `json:"checkpoint,omitempty"`
	Chain      *ExportChain        `json:"chain,omitempty"`
	Page       *ExportPage         `json:"page,omitempty"`
	End        *ExportEnd          `json:"end,omitempty"`
}

// ExportHeader opens an export: its format, when and why it was taken,
// and its filter. Key is the public key of the checkpoint's signer (a
// verifier compares it with the key it trusts, never trusts it).
type ExportHeader struct {
	Format     string       `json:"format"`
	ExportedAt time.Time    `json:"exported_at"`
	Filter     ExportFilter `json:"filter"`
	Reason     string       `json:"reason"`
	Key        string       `json:"key,omitempty"`
}

// ExportEnd closes an export: its counts (a file cut short has no end
// line) and the records left out because they were stored after the
// checkpoint.
type ExportEnd struct {
	Chains    int `json:"chains"`
	Records   int `json:"records"`
	Uncovered int `json:"uncovered"`
}

// RepairRequest asks the quarantiner (QuarantinerRepair) to seal the
// record of an event left without an outcome: EVENTS message Seq (only
// EVENTS), and for an event of an EPCIS document carried in that message,
// its position there. The quarantiner reads the original itself and seals
// it only when the validator's consumer has settled the message (it will
// never be delivered again).
type RepairRequest struct {
	Stream        string `json:"stream"`
	Seq           uint64 `json:"seq"`
	DocumentIndex *int   `json:"document_index,omitempty"`
	// By names who asked (a person's user, or "auditor" for the periodic
	// run), for the record's detail.
	By string `json:"by"`
}

// RepairedBy is how the detail of a record a repair sealed names the
// repair: "…: given one by reconciliation (<by>)".
const RepairedBy = "given one by reconciliation"

// RepairReply says what the quarantiner did: the chain, and whether a
// record was written (false: the event was quarantined already,
// Duplicate saying how).
type RepairReply struct {
	DLQID     string `json:"dlq_id"`
	Written   bool   `json:"written"`
	Duplicate string `json:"duplicate,omitempty"`
}
