package auditor

import (
	"context"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/services/auditor/legalhold"
	"github.com/deadletter/deadletter/services/auditor/reconcile"
)

// view is the live view (index) as the auditor's parts read it: each
// part declares the little it needs as an interface of its own package.
type view struct{ x *index }

// WaitFor returns once the live view applied every record up to seq.
func (v view) WaitFor(ctx context.Context, seq uint64) error { return v.x.waitFor(ctx, seq) }

// Carries reports whether chain dlqID carries hold holdID.
func (v view) Carries(dlqID, holdID string) bool { return v.x.carries(dlqID, holdID) }

// HeldChains returns the held chains (holdID "": all; else those that
// carry holdID), sorted by dlq id.
func (v view) HeldChains(holdID string) []legalhold.Held {
	refs := v.x.heldChains(holdID)
	out := make([]legalhold.Held, len(refs))
	for i, ref := range refs {
		out[i] = legalhold.Held{DLQID: ref.dlqID, Domain: ref.domain, Records: ref.records, Holds: ref.holds}
	}
	return out
}

// Applied is the last QUARANTINE sequence the live view applied.
func (v view) Applied() uint64 { return v.x.applied() }

// Snapshot is the live view's running digest and Merkle state.
func (v view) Snapshot() anchor.State {
	st := v.x.snapshot()
	return anchor.State{LastSeq: st.lastSeq, Count: st.count, Digest: st.digest, Root: st.root, Height: st.height, Blocks: st.blocks}
}

// Chains calls fn under the live view's read lock with a lookup of the
// unresolved chains it holds (reconcile.View).
func (v view) Chains(fn func(get func(dlqID string) (reconcile.Chain, bool))) {
	v.x.mu.RLock()
	defer v.x.mu.RUnlock()
	fn(func(id string) (reconcile.Chain, bool) {
		e, ok := v.x.chains[id]
		if !ok {
			return reconcile.Chain{}, false
		}
		return reconcile.Chain{Status: e.status, Class: e.class, SourceStream: e.sourceStream, SourceSeq: e.sourceSeq}, true
	})
}

// chainReader is the auditor's direct-get reader of QUARANTINE's chains
// as the parts use it (read.ChainReader).
type chainReader struct{ s *Service }

// EachLastRecord hands fn the last record of each id's chain
// (Service.eachLastRecord).
func (r chainReader) EachLastRecord(ctx context.Context, ids []string, upTo uint64, fn func(id string, m read.Msg)) error {
	return r.s.eachLastRecord(ctx, ids, upTo, func(id string, m directMsg) { fn(id, read.Msg{Seq: m.seq, Subject: m.subject, Data: m.data}) })
}

// FirstRecord returns the first record on subject (Service.firstRecord).
func (r chainReader) FirstRecord(ctx context.Context, subject string) (read.Msg, bool, error) {
	m, ok, err := r.s.firstRecord(ctx, subject)
	return read.Msg{Seq: m.seq, Subject: m.subject, Data: m.data}, ok, err
}
