package auditor

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// defaultMaxProblems caps the problems listed in a verify reply.
const defaultMaxProblems = 1000

// verifyBatch is how many records are read before their seals are checked
// in parallel and linked in order.
const verifyBatch = 512

// stored is one message read from a stream.
type stored struct {
	seq     uint64
	subject string
	data    []byte
	link    record.Link
}

// verifier is the state of one verification: the chains (O(chains)
// memory), the running digest and the checkpoints to compare with.
type verifier struct {
	rep      *api.VerifyReply
	max      int
	chains   record.ChainVerifier
	digest   interface{ Write([]byte) (int, error) }
	sum      func() string
	line     []byte
	expected uint64 // next QUARANTINE sequence expected
	count    uint64
	cps      []storedCheckpoint
	next     int // first checkpoint not yet compared
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
// the stream once, with memory proportional to the number of chains, not
// records.
func (s *Service) Verify(ctx context.Context, req api.VerifyRequest) (api.VerifyReply, error) {
	start := time.Now()
	rep, err := s.verify(ctx, req)
	rep.Seconds = time.Since(start).Seconds()
	switch {
	case err != nil:
		s.metrics.verifyRuns.WithLabelValues("error").Inc()
	case rep.OK:
		s.metrics.verifyRuns.WithLabelValues("ok").Inc()
	default:
		s.metrics.verifyRuns.WithLabelValues("failed").Inc()
	}
	return rep, err
}

func (s *Service) verify(ctx context.Context, req api.VerifyRequest) (api.VerifyReply, error) {
	rep := api.VerifyReply{}
	v := &verifier{rep: &rep, max: req.MaxProblems, expected: 1}
	if v.max <= 0 {
		v.max = defaultMaxProblems
	}
	h := sha256.New()
	v.digest, v.sum = h, func() string { return hexSum(h) }
	cps, cpProblems, err := s.loadCheckpoints(ctx)
	if err != nil {
		return rep, err
	}
	v.cps = cps
	rep.Checkpoints = len(cps)
	for _, p := range cpProblems {
		v.problem(p)
	}
	info, err := s.quarantine.Info(ctx)
	if err != nil {
		return rep, fmt.Errorf("auditor: %w", err)
	}
	last := info.State.LastSeq
	if len(cps) > 0 && cps[len(cps)-1].cp.LastSeq > last {
		last = cps[len(cps)-1].cp.LastSeq // records the checkpoints cover must be there
	}
	if info.State.Msgs > 0 {
		cons, err := s.js.OrderedConsumer(ctx, subjects.QuarantineStream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return rep, fmt.Errorf("auditor: read %s: %w", subjects.QuarantineStream, err)
		}
		if err := s.readBatches(ctx, cons, last, v.add); err != nil {
			return rep, fmt.Errorf("auditor: read %s: %w", subjects.QuarantineStream, err)
		}
	}
	v.finish(last)
	rep.Chains = v.chains.Chains()
	rep.OK = rep.ProblemCount == 0
	for _, p := range rep.Problems {
		s.metrics.verifyFailed.WithLabelValues(p.Kind).Inc()
		s.log.Error("AUDIT_VERIFY_FAILED", "seq", p.Seq, "dlq_id", p.DLQID, "problem", p.Kind,
			"checkpoint_seq", p.CheckpointSeq, "detail", p.Detail)
	}
	if n := rep.ProblemCount - len(rep.Problems); n > 0 {
		s.log.Error("AUDIT_VERIFY_FAILED", "problems_not_listed", n)
	}
	return rep, nil
}

// readBatches reads the stream up to lastSeq in batches, checks the seals
// of each batch in parallel and hands the records to add in stream order.
// Reading the next batch overlaps with checking the current one.
func (s *Service) readBatches(ctx context.Context, cons jetstream.Consumer, lastSeq uint64, add func(*stored)) error {
	batches := make(chan []stored, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		batch := make([]stored, 0, verifyBatch)
		err := eachMsg(ctx, cons, lastSeq, func(m jetstream.Msg, meta *jetstream.MsgMetadata) bool {
			batch = append(batch, stored{seq: meta.Sequence.Stream, subject: m.Subject(), data: m.Data()})
			if len(batch) == verifyBatch {
				batches <- batch
				batch = make([]stored, 0, verifyBatch)
			}
			return true
		})
		if len(batch) > 0 {
			batches <- batch
		}
		readErr <- err
	}()
	workers := max(1, runtime.GOMAXPROCS(0))
	for batch := range batches {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(batch); i += workers {
					batch[i].link = record.ReadLink(batch[i].data)
				}
			}()
		}
		wg.Wait()
		for i := range batch {
			add(&batch[i])
			batch[i] = stored{} // release the bytes
		}
	}
	return <-readErr
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
	v.line = digestLine(v.line[:0], m.seq, m.link.AuditHash)
	_, _ = v.digest.Write(v.line)
	for _, p := range v.chains.AddLink(m.seq, m.link) {
		v.problem(api.VerifyProblem{Seq: m.seq, Subject: m.subject, DLQID: m.link.DLQID, Index: p.Index, Kind: p.Kind, Detail: p.Detail})
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
	for v.next < len(v.cps) && v.cps[v.next].cp.LastSeq < seq {
		sc := v.cps[v.next]
		v.next++
		if sc.cp.LastSeq >= v.expected && sc.cp.LastSeq < seq {
			// The checkpoint ends in a gap not reported yet: report it first.
			v.missing(v.expected, sc.cp.LastSeq)
			v.expected = sc.cp.LastSeq + 1
		}
		digest := v.sum()
		if sc.cp.Count != v.count || sc.cp.Digest != digest {
			var why []string
			if sc.cp.Count != v.count {
				why = append(why, fmt.Sprintf("count %d, recomputed %d", sc.cp.Count, v.count))
			}
			if sc.cp.Digest != digest {
				why = append(why, fmt.Sprintf("digest %.64s, recomputed %s", sc.cp.Digest, digest))
			}
			v.problem(api.VerifyProblem{Kind: api.ProblemCheckpointMismatch, CheckpointSeq: sc.seq, FromSeq: 1,
				ToSeq: sc.cp.LastSeq, Detail: strings.Join(why, "; ")})
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
