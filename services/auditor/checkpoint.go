package auditor

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
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

// Checkpoint appends a checkpoint covering every record of QUARANTINE
// stored now, unless the last checkpoint already covers them. Writes are
// conditional on AUDIT's last checkpoint, so two auditors never fork the
// checkpoint chain.
func (s *Service) Checkpoint(ctx context.Context) (api.CheckpointReply, error) {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return api.CheckpointReply{}, fmt.Errorf("auditor: %w", err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.index.waitFor(wait, info.State.LastSeq); err != nil {
		return api.CheckpointReply{}, fmt.Errorf("auditor: the live view did not reach sequence %d: %w", info.State.LastSeq, err)
	}
	for attempt := 0; ; attempt++ {
		last, _, err := s.lastCheckpoint(ctx)
		if err != nil {
			return api.CheckpointReply{}, err
		}
		st := s.index.snapshot()
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
			if err := signCheckpoint(&cp, s.signer); err != nil {
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
	if err := exportLine(s.cfg.ExportFile, b); err != nil {
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
	_, _, err = scan(ctx, s.js, subjects.AuditStream, subjects.AuditCheckpoints, 1, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
		seq, data := m.Sequence, m.Data
		if seq > expected {
			problems = append(problems, api.VerifyProblem{Kind: api.ProblemCheckpointChain, CheckpointSeq: expected,
				Detail: fmt.Sprintf("AUDIT sequences %d..%d hold no checkpoint", expected, seq-1)})
		}
		expected = seq + 1
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
