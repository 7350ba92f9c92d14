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
		lastSeq, count, digest := s.index.snapshot()
		if last != nil && last.cp.LastSeq >= lastSeq {
			return api.CheckpointReply{Seq: last.seq, Checkpoint: last.cp, Unchanged: true}, nil
		}
		cp := api.Checkpoint{
			Version: 1, Algorithm: api.CheckpointAlgorithm, LastSeq: lastSeq, Count: count, Digest: digest,
			At: s.now().UTC(), Instance: s.cfg.Instance,
		}
		var expect uint64
		if last != nil {
			sum := sha256.Sum256(last.raw)
			cp.Prev, expect = hexString(sum[:]), last.seq
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
			"digest", cp.Digest, "prev", cp.Prev)
		return api.CheckpointReply{Seq: ack.Sequence, Checkpoint: cp}, nil
	}
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
