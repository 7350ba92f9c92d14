package anchor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/merkle"
	"github.com/deadletter/deadletter/shared/subjects"
)

// State is the live view's running digest and Merkle state, which a
// checkpoint covers.
type State struct {
	LastSeq, Count uint64
	Digest         string
	Root           merkle.Hash
	Height         int           // of the blocks
	Blocks         []merkle.Hash // block hashes of the tree
}

// View is what the part reads from the auditor's live view of QUARANTINE.
type View interface {
	// WaitFor returns once the view applied every record up to seq.
	WaitFor(ctx context.Context, seq uint64) error
	// Applied is the last QUARANTINE sequence applied.
	Applied() uint64
	// Snapshot is the running digest and Merkle state.
	Snapshot() State
}

// Config is what the checkpoint part needs from the auditor.
type Config struct {
	JS   jetstream.JetStream
	View View
	Log  *slog.Logger
	// Now is the clock (read on every use: tests set the auditor's).
	Now func() time.Time
	// Instance names the auditor in the checkpoints it writes.
	Instance string
	// ExportFile is the export sink of every checkpoint written ("":
	// none; "-": standard output, never read back as an anchor).
	ExportFile string
	// Signer signs the checkpoints (nil: unsigned).
	Signer nkeys.KeyPair
	// Written counts a checkpoint written
	// (deadletter_audit_checkpoints_total).
	Written func()
	// Failed counts a problem found at start against the own anchor
	// (deadletter_audit_verify_failures_total).
	Failed func(kind string)
}

// Checkpoints is the auditor's checkpoint part: it writes the signed
// checkpoints to AUDIT (conditional on the last one, so two auditors
// never fork their chain) and exports each to the export sink, reads
// them back for verify, and checks the store against its own anchor (the
// newest checkpoint exported), refusing to write over a store behind it.
type Checkpoints struct {
	cfg Config

	// Set by Start before any request is served.
	quarantine, audit jetstream.Stream

	mu            sync.Mutex  // serializes checkpoint writes
	exportPending bool        // the last checkpoint written is not exported yet (mu)
	coverage      coverage    // what the newest checkpoint covers, for its age gauge
	anchored      anchorState // what the last check against the own anchor found
}

// NewCheckpoints returns the part; Start binds it to the streams.
func NewCheckpoints(cfg Config) *Checkpoints { return &Checkpoints{cfg: cfg} }

// Start binds the part to QUARANTINE and AUDIT and reads where they
// stand: the store against the own anchor (before any checkpoint is
// written over it) and the newest checkpoint, for the age gauge.
func (p *Checkpoints) Start(ctx context.Context, quarantine, audit jetstream.Stream) {
	p.quarantine, p.audit = quarantine, audit
	p.coverage.start(p.cfg.Now())
	p.checkAtStart(ctx)
	if _, err := p.RecordRotated(ctx); err != nil {
		p.cfg.Log.Warn("naming the earlier store's rotated anchors in AUDIT failed", "err", err)
	}
	if last, _, err := p.last(ctx); err != nil {
		p.cfg.Log.Warn("reading the newest checkpoint failed", "err", err)
	} else if last != nil {
		p.coverage.saw(last.CP)
	}
}

// Saw notes checkpoint cp, read from AUDIT (verify), for the age gauge.
func (p *Checkpoints) Saw(cp api.Checkpoint) { p.coverage.saw(cp) }

// Stored is a checkpoint as read from AUDIT.
type Stored struct {
	// Seq is its AUDIT sequence.
	Seq uint64
	// CP is the checkpoint.
	CP api.Checkpoint
	// Raw is its bytes as stored.
	Raw []byte
}

// last reads the last checkpoint of AUDIT (nil when none).
func (p *Checkpoints) last(ctx context.Context) (*Stored, bool, error) {
	m, err := p.audit.GetLastMsgForSubject(ctx, subjects.AuditCheckpoints)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("auditor: read last checkpoint: %w", err)
	}
	sc := &Stored{Seq: m.Sequence, Raw: m.Data}
	if err := json.Unmarshal(m.Data, &sc.CP); err != nil {
		return nil, false, fmt.Errorf("auditor: last checkpoint (AUDIT seq %d) unreadable: %w", m.Sequence, err)
	}
	return sc, true, nil
}

// ShutdownTimeout bounds the checkpoint written when the auditor stops
// (before its connection drains).
const ShutdownTimeout = 10 * time.Second

// coverage is what the newest checkpoint known covers, and since when
// QUARANTINE may hold records it does not: the state of
// deadletter_audit_checkpoint_age_seconds.
type coverage struct {
	mu      sync.Mutex
	known   bool      // a checkpoint was read or written
	lastSeq uint64    // the last QUARANTINE sequence it covers
	since   time.Time // its time, or when it was last seen covering every record applied
}

// saw records cp, read from or written to AUDIT.
func (c *coverage) saw(cp api.Checkpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known && cp.LastSeq < c.lastSeq {
		return // older than one already seen
	}
	c.known, c.lastSeq = true, cp.LastSeq
	if cp.At.After(c.since) {
		c.since = cp.At
	}
}

// start sets the time from which records no checkpoint covers count
// when no checkpoint is known.
func (c *coverage) start(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		c.since = now
	}
}

// age returns how long records up to applied have been uncovered at now
// (0 when the newest checkpoint covers them, or there are none).
func (c *coverage) age(now time.Time, applied uint64) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if applied == 0 || (c.known && applied <= c.lastSeq) {
		c.since = now
		return 0
	}
	return max(0, now.Sub(c.since))
}

// Age is the value of deadletter_audit_checkpoint_age_seconds.
func (p *Checkpoints) Age() float64 {
	return p.coverage.age(p.cfg.Now(), p.cfg.View.Applied()).Seconds()
}

// checkpointMode says what a checkpoint covers and when one is written.
type checkpointMode struct {
	// catchUp: cover every record of QUARANTINE stored now (waiting, at
	// most 30 s, for the live view to apply them); otherwise cover the
	// records the live view has applied.
	catchUp bool
	// auto: a checkpoint the auditor writes by itself (start-up, periodic,
	// shutdown), never one over an empty store.
	auto bool
}

// Checkpoint appends a checkpoint covering every record of QUARANTINE
// stored now, unless the last checkpoint already covers them. Writes are
// conditional on AUDIT's last checkpoint, so two auditors never fork the
// checkpoint chain.
func (p *Checkpoints) Checkpoint(ctx context.Context) (api.CheckpointReply, error) {
	return p.checkpoint(ctx, checkpointMode{catchUp: true})
}

// Auto writes a checkpoint the auditor decided on (why: start,
// periodic, shutdown) and logs a failure.
func (p *Checkpoints) Auto(ctx context.Context, why string, catchUp bool) {
	rep, err := p.checkpoint(ctx, checkpointMode{catchUp: catchUp, auto: true})
	if err != nil {
		p.cfg.Log.Error("checkpoint failed", "when", why, "err", err)
		return
	}
	if !rep.Unchanged && rep.Seq != 0 {
		p.cfg.Log.Info("checkpoint written", "when", why, "audit_seq", rep.Seq, "last_seq", rep.Checkpoint.LastSeq)
	}
}

func (p *Checkpoints) checkpoint(ctx context.Context, mode checkpointMode) (api.CheckpointReply, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if behind, n := p.anchored.get(); behind {
		// A checkpoint over a store that lost records would become the
		// newest anchor and hide the loss.
		return api.CheckpointReply{}, api.Wrap(api.ErrConflict, ErrBehindAnchor,
			fmt.Sprintf("no checkpoint is written while the store is behind its own anchor %s (%d problem(s)): "+
				"this is not the store those anchors were written for. Either restore it from its backup (make restore, docs/operations/backup.md) and verify, "+
				"or begin a new store on purpose with `deadletter anchors rotate` (the earlier anchors are moved aside, kept and named in AUDIT) and start again", p.cfg.ExportFile, n))
	}
	if mode.catchUp {
		info, err := p.quarantine.Info(ctx)
		if err != nil {
			return api.CheckpointReply{}, fmt.Errorf("auditor: %w", err)
		}
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := p.cfg.View.WaitFor(wait, info.State.LastSeq); err != nil {
			return api.CheckpointReply{}, fmt.Errorf("auditor: the live view did not reach sequence %d: %w", info.State.LastSeq, err)
		}
	}
	for attempt := 0; ; attempt++ {
		last, _, err := p.last(ctx)
		if err != nil {
			return api.CheckpointReply{}, err
		}
		if last != nil {
			p.coverage.saw(last.CP)
		}
		st := p.cfg.View.Snapshot()
		if last == nil && mode.auto && st.Count == 0 {
			return api.CheckpointReply{Unchanged: true}, nil // nothing to cover
		}
		if last != nil && last.CP.LastSeq >= st.LastSeq {
			rep := api.CheckpointReply{Seq: last.Seq, Checkpoint: last.CP, Unchanged: true}
			if p.exportPending && last.CP.LastSeq == st.LastSeq && last.CP.MerkleRoot == st.Root.String() {
				// The last export failed: write it now.
				if err := p.export(last.Seq, last.CP, st); err != nil {
					return rep, err
				}
			}
			return rep, nil
		}
		cp := api.Checkpoint{
			Version: api.CheckpointVersionMerkle, Algorithm: api.CheckpointAlgorithm, LastSeq: st.LastSeq, Count: st.Count,
			Digest: st.Digest, At: p.cfg.Now().UTC(), Instance: p.cfg.Instance,
			MerkleRoot: st.Root.String(), TreeSize: st.Count,
		}
		var expect uint64
		if last != nil {
			sum := sha256.Sum256(last.Raw)
			cp.Prev, expect = hex.EncodeToString(sum[:]), last.Seq
		}
		if p.cfg.Signer != nil {
			if err := export.SignCheckpoint(&cp, p.cfg.Signer); err != nil {
				return api.CheckpointReply{}, err
			}
		}
		b, err := json.Marshal(cp)
		if err != nil {
			return api.CheckpointReply{}, err
		}
		m := nats.NewMsg(subjects.AuditCheckpoints)
		m.Data = b
		ack, err := p.cfg.JS.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence && attempt < 3 {
			continue // another auditor wrote one first: decide again
		}
		if err != nil {
			return api.CheckpointReply{}, fmt.Errorf("auditor: write checkpoint: %w", err)
		}
		p.cfg.Written()
		p.coverage.saw(cp)
		p.cfg.Log.Info("AUDIT_CHECKPOINT", "audit_seq", ack.Sequence, "last_seq", cp.LastSeq, "count", cp.Count,
			"digest", cp.Digest, "prev", cp.Prev, "merkle_root", cp.MerkleRoot, "signed", cp.Signature != "")
		rep := api.CheckpointReply{Seq: ack.Sequence, Checkpoint: cp}
		p.exportPending = p.cfg.ExportFile != ""
		if err := p.export(ack.Sequence, cp, st); err != nil {
			return rep, err
		}
		return rep, nil
	}
}

// export writes the checkpoint stored at auditSeq, with the block hashes
// of st, to the export sink (Config.ExportFile; nothing when unset).
func (p *Checkpoints) export(auditSeq uint64, cp api.Checkpoint, st State) error {
	if p.cfg.ExportFile == "" {
		return nil
	}
	line := api.ExportedCheckpoint{Checkpoint: cp, AuditSeq: auditSeq, BlockHeight: st.Height,
		Blocks: make([]string, len(st.Blocks))}
	for i, h := range st.Blocks {
		line.Blocks[i] = h.String()
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExport, err)
	}
	if err := AppendLine(p.cfg.ExportFile, b); err != nil {
		p.cfg.Log.Error("AUDIT_CHECKPOINT_EXPORT_FAILED", "audit_seq", auditSeq, "err", err)
		return err
	}
	p.exportPending = false
	return nil
}

// Load reads every checkpoint of AUDIT in order and checks
// their chain, returning the problems found.
func (p *Checkpoints) Load(ctx context.Context) ([]Stored, []api.VerifyProblem, error) {
	info, err := p.audit.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("auditor: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil, nil, nil
	}
	var (
		cps      []Stored
		problems []api.VerifyProblem
		prev     []byte
		expected = uint64(1)
	)
	// The whole stream is read, not only its checkpoints: AUDIT also holds
	// governance actions and the access audit, and a sequence missing
	// among any of them is a message removed from a WORM store.
	_, _, err = read.Scan(ctx, p.cfg.JS, subjects.AuditStream, "", 1, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
		seq, data := m.Sequence, m.Data
		if seq > expected {
			problems = append(problems, api.VerifyProblem{Kind: api.ProblemCheckpointChain, CheckpointSeq: expected,
				Detail: fmt.Sprintf("AUDIT sequences %d..%d are missing", expected, seq-1)})
		}
		expected = seq + 1
		if m.Subject != subjects.AuditCheckpoints {
			return true
		}
		sc := Stored{Seq: seq, Raw: data}
		if err := json.Unmarshal(data, &sc.CP); err != nil || sc.CP.Algorithm != api.CheckpointAlgorithm {
			problems = append(problems, api.VerifyProblem{Kind: api.ProblemCheckpointChain, CheckpointSeq: seq,
				Detail: "checkpoint unreadable or of an unknown algorithm"})
			prev = data
			return true
		}
		want := ""
		if prev != nil {
			sum := sha256.Sum256(prev)
			want = hex.EncodeToString(sum[:])
		}
		if sc.CP.Prev != want {
			problems = append(problems, api.VerifyProblem{Kind: api.ProblemCheckpointChain, CheckpointSeq: seq,
				Detail: fmt.Sprintf("prev %.64q, hash of the previous checkpoint %q", sc.CP.Prev, want)})
		}
		prev = data
		cps = append(cps, sc)
		return true
	})
	if err != nil {
		return nil, nil, fmt.Errorf("auditor: read checkpoints: %w", err)
	}
	return cps, problems, nil
}

// ErrBehindAnchor: the store is behind the newest checkpoint the auditor
// exported (records, a stream or the whole store missing); no checkpoint
// is written over it, so the export file keeps naming what was lost.
var ErrBehindAnchor = errors.New("auditor: the store is behind its own anchor")

// anchorState is what the last check against the own anchor found: the
// value of deadletter_audit_behind_anchor.
type anchorState struct {
	mu       sync.Mutex
	behind   bool
	problems int
}

func (a *anchorState) set(problems int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.behind, a.problems = problems > 0, problems
}

func (a *anchorState) get() (bool, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.behind, a.problems
}

// Behind is the value of deadletter_audit_behind_anchor.
func (p *Checkpoints) Behind() float64 {
	if b, _ := p.anchored.get(); b {
		return 1
	}
	return 0
}

// anchorKinds are the problems that say the store is behind an anchor.
var anchorKinds = map[string]bool{
	api.ProblemStoreMissing: true, api.ProblemAnchorShort: true,
	api.ProblemAnchorMismatch: true, api.ProblemAnchorNotInAudit: true,
}

// Own reads the newest checkpoint the auditor exported: the last
// line of Config.ExportFile, checked with the signing key's public key
// when the auditor signs. It returns nil when there is no export file
// ("-", unset, or not written yet).
func (p *Checkpoints) Own() (*Anchor, error) {
	if p.cfg.ExportFile == "" || p.cfg.ExportFile == "-" {
		return nil, nil
	}
	line, err := LastLine(p.cfg.ExportFile, MaxLine)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(line) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: own export file: %w", ErrAnchor, err)
	}
	pub := ""
	if p.cfg.Signer != nil {
		if pub, err = p.cfg.Signer.PublicKey(); err != nil {
			return nil, fmt.Errorf("%w: %w", export.ErrSigningKey, err)
		}
	}
	a, err := ParseLine(line, pub, p.cfg.Signer != nil)
	if err != nil {
		return nil, fmt.Errorf("own export file %s: %w", p.cfg.ExportFile, err)
	}
	return a, nil
}

// CheckOwn compares the store with the own anchor cheaply, without
// reading QUARANTINE's records (start-up, and verify on a store whose
// oldest records expired): QUARANTINE must reach the anchor's last
// sequence and hold at least its records (deletes are denied), and AUDIT
// must hold the anchor's checkpoint at its sequence. The full Merkle
// comparison is audit.verify's.
func (p *Checkpoints) CheckOwn(ctx context.Context, a *Anchor) ([]api.VerifyProblem, error) {
	cp := a.CP
	if cp.TreeSize == 0 {
		return nil, nil
	}
	var ps []api.VerifyProblem
	info, err := p.quarantine.Info(ctx)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		ps = append(ps, api.VerifyProblem{Kind: api.ProblemStoreMissing, FromSeq: 1, ToSeq: cp.LastSeq,
			Detail: fmt.Sprintf("stream %s does not exist; the anchor says it held %d records up to sequence %d",
				subjects.QuarantineStream, cp.TreeSize, cp.LastSeq)})
	case err != nil:
		return nil, fmt.Errorf("auditor: %w", err)
	case info.State.Msgs == 0:
		ps = append(ps, api.VerifyProblem{Kind: api.ProblemStoreMissing, FromSeq: 1, ToSeq: cp.LastSeq,
			Detail: fmt.Sprintf("QUARANTINE holds no record; the anchor says it held %d up to sequence %d", cp.TreeSize, cp.LastSeq)})
	case info.State.LastSeq < cp.LastSeq:
		ps = append(ps, api.VerifyProblem{Kind: api.ProblemAnchorShort, FromSeq: info.State.LastSeq + 1, ToSeq: cp.LastSeq,
			Detail: fmt.Sprintf("QUARANTINE ends at sequence %d; the anchor says it held records up to sequence %d (%d..%d missing)",
				info.State.LastSeq, cp.LastSeq, info.State.LastSeq+1, cp.LastSeq)})
	case (info.Config.MaxAge == 0 || info.State.FirstSeq <= 1) && info.State.Msgs < cp.TreeSize:
		ps = append(ps, api.VerifyProblem{Kind: api.ProblemAnchorShort, FromSeq: 1, ToSeq: cp.LastSeq,
			Detail: fmt.Sprintf("QUARANTINE holds %d records; the anchor says it held %d up to sequence %d",
				info.State.Msgs, cp.TreeSize, cp.LastSeq)})
	}
	m, err := p.audit.GetMsg(ctx, cp.AuditSeq)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		ps = append(ps, api.VerifyProblem{Kind: api.ProblemStoreMissing, CheckpointSeq: cp.AuditSeq,
			Detail: fmt.Sprintf("stream %s does not exist; the anchor is a checkpoint it held", subjects.AuditStream)})
	case errors.Is(err, jetstream.ErrMsgNotFound):
		ps = append(ps, api.VerifyProblem{Kind: api.ProblemAnchorNotInAudit, CheckpointSeq: cp.AuditSeq,
			Detail: fmt.Sprintf("AUDIT holds nothing at sequence %d, where the anchor's checkpoint was", cp.AuditSeq)})
	case err != nil:
		return nil, fmt.Errorf("auditor: %w", err)
	default:
		var got api.Checkpoint
		if m.Subject != subjects.AuditCheckpoints || json.Unmarshal(m.Data, &got) != nil ||
			got.Signature != cp.Signature || got.MerkleRoot != cp.MerkleRoot || got.TreeSize != cp.TreeSize {
			ps = append(ps, api.VerifyProblem{Kind: api.ProblemAnchorNotInAudit, CheckpointSeq: cp.AuditSeq,
				Detail: fmt.Sprintf("AUDIT sequence %d is not the anchor's checkpoint", cp.AuditSeq)})
		}
	}
	return ps, nil
}

// checkAtStart checks the store against the own anchor at start-up:
// a store behind it is logged (AUDIT_BEHIND_ANCHOR, one line per
// problem), counted in deadletter_audit_verify_failures_total, and sets
// deadletter_audit_behind_anchor, which stays until a verify finds the
// store whole again.
func (p *Checkpoints) checkAtStart(ctx context.Context) {
	a, err := p.Own()
	if err != nil {
		p.cfg.Log.Error("AUDIT_ANCHOR_UNREADABLE", "export_file", p.cfg.ExportFile, "err", err)
		return
	}
	if a == nil {
		return
	}
	ps, err := p.CheckOwn(ctx, a)
	if err != nil {
		p.cfg.Log.Error("anchor check failed", "when", "start", "err", err)
		return
	}
	p.Problems("start", a, ps)
}

// Problems records what a check against the own anchor found.
func (p *Checkpoints) Problems(when string, a *Anchor, ps []api.VerifyProblem) {
	n := 0
	for _, pb := range ps {
		if !anchorKinds[pb.Kind] {
			continue
		}
		n++
		if when == "start" {
			p.cfg.Failed(pb.Kind)
		}
		p.cfg.Log.Error("AUDIT_BEHIND_ANCHOR", "when", when, "problem", pb.Kind, "from_seq", pb.FromSeq, "to_seq", pb.ToSeq,
			"checkpoint_seq", pb.CheckpointSeq, "anchor_last_seq", a.CP.LastSeq, "anchor_tree_size", a.CP.TreeSize,
			"anchor_audit_seq", a.CP.AuditSeq, "detail", pb.Detail)
	}
	p.anchored.set(n)
	if n == 0 {
		p.cfg.Log.Info("store whole against its own anchor", "when", when, "anchor_last_seq", a.CP.LastSeq,
			"anchor_tree_size", a.CP.TreeSize)
	}
}
