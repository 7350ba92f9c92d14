package auditor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

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

// behindAnchor is the value of deadletter_audit_behind_anchor.
func (s *Service) behindAnchor() float64 {
	if b, _ := s.anchored.get(); b {
		return 1
	}
	return 0
}

// anchorKinds are the problems that say the store is behind an anchor.
var anchorKinds = map[string]bool{
	api.ProblemStoreMissing: true, api.ProblemAnchorShort: true,
	api.ProblemAnchorMismatch: true, api.ProblemAnchorNotInAudit: true,
}

// ownAnchor reads the newest checkpoint the auditor exported: the last
// line of Config.ExportFile, checked with the signing key's public key
// when the auditor signs. It returns nil when there is no export file
// ("-", unset, or not written yet).
func (s *Service) ownAnchor() (*anchor.Anchor, error) {
	if s.cfg.ExportFile == "" || s.cfg.ExportFile == "-" {
		return nil, nil
	}
	line, err := anchor.LastLine(s.cfg.ExportFile, anchor.MaxLine)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(line) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: own export file: %w", ErrAnchor, err)
	}
	pub := ""
	if s.signer != nil {
		if pub, err = s.signer.PublicKey(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSigningKey, err)
		}
	}
	a, err := anchor.ParseLine(line, pub, s.signer != nil)
	if err != nil {
		return nil, fmt.Errorf("own export file %s: %w", s.cfg.ExportFile, err)
	}
	return a, nil
}

// checkOwnAnchor compares the store with the own anchor cheaply, without
// reading QUARANTINE's records (start-up, and verify on a store whose
// oldest records expired): QUARANTINE must reach the anchor's last
// sequence and hold at least its records (deletes are denied), and AUDIT
// must hold the anchor's checkpoint at its sequence. The full Merkle
// comparison is audit.verify's.
func (s *Service) checkOwnAnchor(ctx context.Context, a *anchor.Anchor) ([]api.VerifyProblem, error) {
	cp := a.CP
	if cp.TreeSize == 0 {
		return nil, nil
	}
	var ps []api.VerifyProblem
	info, err := s.quarantine.Info(ctx)
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
	m, err := s.audit.GetMsg(ctx, cp.AuditSeq)
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

// startAnchorCheck checks the store against the own anchor at start-up:
// a store behind it is logged (AUDIT_BEHIND_ANCHOR, one line per
// problem), counted in deadletter_audit_verify_failures_total, and sets
// deadletter_audit_behind_anchor, which stays until a verify finds the
// store whole again.
func (s *Service) startAnchorCheck(ctx context.Context) {
	a, err := s.ownAnchor()
	if err != nil {
		s.log.Error("AUDIT_ANCHOR_UNREADABLE", "export_file", s.cfg.ExportFile, "err", err)
		return
	}
	if a == nil {
		return
	}
	ps, err := s.checkOwnAnchor(ctx, a)
	if err != nil {
		s.log.Error("anchor check failed", "when", "start", "err", err)
		return
	}
	s.anchorProblems("start", a, ps)
}

// anchorProblems records what a check against the own anchor found.
func (s *Service) anchorProblems(when string, a *anchor.Anchor, ps []api.VerifyProblem) {
	n := 0
	for _, p := range ps {
		if !anchorKinds[p.Kind] {
			continue
		}
		n++
		if when == "start" {
			s.metrics.verifyFailed.WithLabelValues(p.Kind).Inc()
		}
		s.log.Error("AUDIT_BEHIND_ANCHOR", "when", when, "problem", p.Kind, "from_seq", p.FromSeq, "to_seq", p.ToSeq,
			"checkpoint_seq", p.CheckpointSeq, "anchor_last_seq", a.CP.LastSeq, "anchor_tree_size", a.CP.TreeSize,
			"anchor_audit_seq", a.CP.AuditSeq, "detail", p.Detail)
	}
	s.anchored.set(n)
	if n == 0 {
		s.log.Info("store whole against its own anchor", "when", when, "anchor_last_seq", a.CP.LastSeq,
			"anchor_tree_size", a.CP.TreeSize)
	}
}
