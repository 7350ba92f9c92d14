package auditor

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/export"
	"github.com/deadletter/deadletter/shared/subjects"
)

// storedCheckpoint is a checkpoint as read from AUDIT.
type storedCheckpoint struct {
	seq uint64
	cp  api.Checkpoint
	raw []byte
}

// lastCheckpoint reads the last checkpoint of AUDIT (nil when none).
func (s *Service) lastCheckpoint(ctx context.Context) (*storedCheckpoint, bool, error) {
	m, err := s.audit.GetLastMsgForSubject(ctx, subjects.AuditCheckpoints)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("auditor: read last checkpoint: %w", err)
	}
	sc := &storedCheckpoint{seq: m.Sequence, raw: m.Data}
	if err := json.Unmarshal(m.Data, &sc.cp); err != nil {
		return nil, false, fmt.Errorf("auditor: last checkpoint (AUDIT seq %d) unreadable: %w", m.Sequence, err)
	}
	return sc, true, nil
}

// shutdownCheckpointTimeout bounds the checkpoint written when the
// auditor stops (before its connection drains).
const shutdownCheckpointTimeout = 10 * time.Second

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

// checkpointAge is the value of deadletter_audit_checkpoint_age_seconds.
func (s *Service) checkpointAge() float64 {
	return s.coverage.age(s.now(), s.index.applied()).Seconds()
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
func (s *Service) Checkpoint(ctx context.Context) (api.CheckpointReply, error) {
	return s.checkpoint(ctx, checkpointMode{catchUp: true})
}

// autoCheckpoint writes a checkpoint the auditor decided on (why: start,
// periodic, shutdown) and logs a failure.
func (s *Service) autoCheckpoint(ctx context.Context, why string, catchUp bool) {
	rep, err := s.checkpoint(ctx, checkpointMode{catchUp: catchUp, auto: true})
	if err != nil {
		s.log.Error("checkpoint failed", "when", why, "err", err)
		return
	}
	if !rep.Unchanged && rep.Seq != 0 {
		s.log.Info("checkpoint written", "when", why, "audit_seq", rep.Seq, "last_seq", rep.Checkpoint.LastSeq)
	}
}

func (s *Service) checkpoint(ctx context.Context, mode checkpointMode) (api.CheckpointReply, error) {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if behind, n := s.anchored.get(); behind {
		// A checkpoint over a store that lost records would become the
		// newest anchor and hide the loss.
		return api.CheckpointReply{}, api.Wrap(api.ErrConflict, ErrBehindAnchor,
			fmt.Sprintf("no checkpoint is written while the store is behind its own anchor (%d problem(s)): restore it (docs/operations/backup.md) and verify", n))
	}
	if mode.catchUp {
		info, err := s.quarantine.Info(ctx)
		if err != nil {
			return api.CheckpointReply{}, fmt.Errorf("auditor: %w", err)
		}
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := s.index.waitFor(wait, info.State.LastSeq); err != nil {
			return api.CheckpointReply{}, fmt.Errorf("auditor: the live view did not reach sequence %d: %w", info.State.LastSeq, err)
		}
	}
	for attempt := 0; ; attempt++ {
		last, _, err := s.lastCheckpoint(ctx)
		if err != nil {
			return api.CheckpointReply{}, err
		}
		if last != nil {
			s.coverage.saw(last.cp)
		}
		st := s.index.snapshot()
		if last == nil && mode.auto && st.count == 0 {
			return api.CheckpointReply{Unchanged: true}, nil // nothing to cover
		}
		if last != nil && last.cp.LastSeq >= st.lastSeq {
			rep := api.CheckpointReply{Seq: last.seq, Checkpoint: last.cp, Unchanged: true}
			if s.exportPending && last.cp.LastSeq == st.lastSeq && last.cp.MerkleRoot == st.root.String() {
				// The last export failed: write it now.
				if err := s.export(last.seq, last.cp, st); err != nil {
					return rep, err
				}
			}
			return rep, nil
		}
		cp := api.Checkpoint{
			Version: api.CheckpointVersionMerkle, Algorithm: api.CheckpointAlgorithm, LastSeq: st.lastSeq, Count: st.count,
			Digest: st.digest, At: s.now().UTC(), Instance: s.cfg.Instance,
			MerkleRoot: st.root.String(), TreeSize: st.count,
		}
		var expect uint64
		if last != nil {
			sum := sha256.Sum256(last.raw)
			cp.Prev, expect = hexString(sum[:]), last.seq
		}
		if s.signer != nil {
			if err := export.SignCheckpoint(&cp, s.signer); err != nil {
				return api.CheckpointReply{}, err
			}
		}
		b, err := json.Marshal(cp)
		if err != nil {
			return api.CheckpointReply{}, err
		}
		m := nats.NewMsg(subjects.AuditCheckpoints)
		m.Data = b
		ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect))
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence && attempt < 3 {
			continue // another auditor wrote one first: decide again
		}
		if err != nil {
			return api.CheckpointReply{}, fmt.Errorf("auditor: write checkpoint: %w", err)
		}
		s.metrics.checkpoints.Inc()
		s.coverage.saw(cp)
		s.log.Info("AUDIT_CHECKPOINT", "audit_seq", ack.Sequence, "last_seq", cp.LastSeq, "count", cp.Count,
			"digest", cp.Digest, "prev", cp.Prev, "merkle_root", cp.MerkleRoot, "signed", cp.Signature != "")
		rep := api.CheckpointReply{Seq: ack.Sequence, Checkpoint: cp}
		s.exportPending = s.cfg.ExportFile != ""
		if err := s.export(ack.Sequence, cp, st); err != nil {
			return rep, err
		}
		return rep, nil
	}
}

// export writes the checkpoint stored at auditSeq, with the block hashes
// of st, to the export sink (Config.ExportFile; nothing when unset).
func (s *Service) export(auditSeq uint64, cp api.Checkpoint, st viewState) error {
	if s.cfg.ExportFile == "" {
		return nil
	}
	line := api.ExportedCheckpoint{Checkpoint: cp, AuditSeq: auditSeq, BlockHeight: st.height,
		Blocks: make([]string, len(st.blocks))}
	for i, h := range st.blocks {
		line.Blocks[i] = h.String()
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrExport, err)
	}
	if err := anchor.AppendLine(s.cfg.ExportFile, b); err != nil {
		s.log.Error("AUDIT_CHECKPOINT_EXPORT_FAILED", "audit_seq", auditSeq, "err", err)
		return err
	}
	s.exportPending = false
	return nil
}

// loadCheckpoints reads every checkpoint of AUDIT in order and checks
// their chain, returning the problems found.
func (s *Service) loadCheckpoints(ctx context.Context) ([]storedCheckpoint, []api.VerifyProblem, error) {
	info, err := s.audit.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("auditor: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil, nil, nil
	}
	var (
		cps      []storedCheckpoint
		problems []api.VerifyProblem
		prev     []byte
		expected = uint64(1)
	)
	// The whole stream is read, not only its checkpoints: AUDIT also holds
	// governance actions and the access audit, and a sequence missing
	// among any of them is a message removed from a WORM store.
	_, _, err = scan(ctx, s.js, subjects.AuditStream, "", 1, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
		seq, data := m.Sequence, m.Data
		if seq > expected {
			problems = append(problems, api.VerifyProblem{Kind: api.ProblemCheckpointChain, CheckpointSeq: expected,
				Detail: fmt.Sprintf("AUDIT sequences %d..%d are missing", expected, seq-1)})
		}
		expected = seq + 1
		if m.Subject != subjects.AuditCheckpoints {
			return true
		}
		sc := storedCheckpoint{seq: seq, raw: data}
		if err := json.Unmarshal(data, &sc.cp); err != nil || sc.cp.Algorithm != api.CheckpointAlgorithm {
			problems = append(problems, api.VerifyProblem{Kind: api.ProblemCheckpointChain, CheckpointSeq: seq,
				Detail: "checkpoint unreadable or of an unknown algorithm"})
			prev = data
			return true
		}
		want := ""
		if prev != nil {
			sum := sha256.Sum256(prev)
			want = hexString(sum[:])
		}
		if sc.cp.Prev != want {
			problems = append(problems, api.VerifyProblem{Kind: api.ProblemCheckpointChain, CheckpointSeq: seq,
				Detail: fmt.Sprintf("prev %.64q, hash of the previous checkpoint %q", sc.cp.Prev, want)})
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
