package legalhold

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Copies returns the LEGALHOLD copies of a chain, in order.
func (p *Holds) Copies(ctx context.Context, domain, dlqID string) ([]chain.Stored, error) {
	var out []chain.Stored
	err := streams.ReadSubject(ctx, p.cfg.JS, subjects.LegalHoldStream, subjects.LegalHold(domain, dlqID), func(m *jetstream.RawStreamMsg) error {
		out = append(out, chain.Stored{Seq: m.Sequence, Data: m.Data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("auditor: read %s: %w", subjects.LegalHoldStream, err)
	}
	return out, nil
}

// legalCopy is one stored LEGALHOLD copy.
type legalCopy struct {
	seq            uint64
	data           []byte
	source, srcSub string
	srcSeq         uint64
}

// Verify checks LEGALHOLD (when provisioned): every copy's seal
// and its chain's links, its provenance headers, that it equals the
// original when QUARANTINE still holds it, and that every held chain
// whose first records QUARANTINE no longer holds has them all in
// LEGALHOLD. The copies are read into memory (held chains only). It
// reports each problem to problem and returns what it checked (nil when
// LEGALHOLD is not provisioned).
func (p *Holds) Verify(ctx context.Context, problem func(api.VerifyProblem)) (*api.VerifyLegalHold, error) {
	if !p.legal {
		return nil, nil
	}
	lh := &api.VerifyLegalHold{}
	stream, err := p.cfg.JS.Stream(ctx, subjects.LegalHoldStream)
	if err != nil {
		return nil, fmt.Errorf("auditor: %s: %w", subjects.LegalHoldStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("auditor: %s: %w", subjects.LegalHoldStream, err)
	}
	byChain := map[string][]legalCopy{}
	var order []string
	if info.State.Msgs > 0 {
		_, _, err = read.Scan(ctx, p.cfg.JS, subjects.LegalHoldStream, "", info.State.FirstSeq, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
			c := legalCopy{seq: m.Sequence, data: m.Data, source: m.Header.Get(HeaderSourceStream), srcSub: m.Header.Get(HeaderSourceSubject)}
			c.srcSeq, _ = strconv.ParseUint(m.Header.Get(HeaderSourceSeq), 10, 64)
			if _, ok := byChain[m.Subject]; !ok {
				order = append(order, m.Subject)
			}
			byChain[m.Subject] = append(byChain[m.Subject], c)
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("auditor: read %s: %w", subjects.LegalHoldStream, err)
		}
	}
	for _, subj := range order {
		copies := byChain[subj]
		lh.Chains++
		lh.Records += uint64(len(copies))
		raws := make([][]byte, len(copies))
		for i, c := range copies {
			raws[i] = c.data
		}
		for _, p := range record.VerifyChain(raws) {
			c := copies[min(p.Index, len(copies)-1)]
			problem(api.VerifyProblem{Seq: c.seq, Subject: subj, Index: p.Index, Kind: api.ProblemLegalHoldCopy,
				Detail: fmt.Sprintf("%s copy (LEGALHOLD sequence %d): %s: %s", subjects.LegalHoldStream, c.seq, p.Kind, p.Detail)})
		}
		for i, c := range copies {
			h, herr := chain.DecodeHead(c.data)
			want := ""
			if herr == nil {
				want = subjects.Quarantine(h.Domain, h.DLQID)
			}
			switch {
			case c.source != subjects.QuarantineStream || c.srcSeq == 0 || c.srcSub == "" || c.srcSub != want ||
				subj != subjects.LegalHold(h.Domain, h.DLQID):
				problem(api.VerifyProblem{Seq: c.seq, Subject: subj, Index: i, Kind: api.ProblemLegalHoldCopy,
					Detail: fmt.Sprintf("LEGALHOLD sequence %d: its provenance (source stream, sequence, subject) is missing or names another chain", c.seq)})
				continue
			}
			orig, err := p.originalAt(ctx, c.srcSeq)
			if err != nil {
				return nil, err
			}
			if orig != nil && (orig.Subject != c.srcSub || !bytes.Equal(orig.Data, c.data)) {
				problem(api.VerifyProblem{Seq: c.seq, Subject: subj, Index: i, Kind: api.ProblemLegalHoldCopy,
					Detail: fmt.Sprintf("LEGALHOLD sequence %d differs from QUARANTINE sequence %d", c.seq, c.srcSeq)})
			}
		}
	}
	// Every held chain is whole: the records QUARANTINE no longer holds
	// are in LEGALHOLD.
	for _, ref := range p.cfg.View.HeldChains("") {
		stored, err := p.cfg.Chains.Stored(ctx, ref.Domain, ref.DLQID)
		if err != nil && !errors.Is(err, chain.ErrNotFound) {
			return nil, fmt.Errorf("auditor: read chain: %w", err)
		}
		expired := ref.Records // none left in QUARANTINE
		if len(stored) > 0 {
			if h, err := chain.DecodeHead(stored[0].Data); err == nil {
				expired = h.Index
			}
		}
		if expired == 0 {
			continue
		}
		lh.Expired++
		copied := 0
		for _, c := range byChain[subjects.LegalHold(ref.Domain, ref.DLQID)] {
			if h, err := chain.DecodeHead(c.data); err == nil && h.Index == copied {
				copied++
			}
		}
		if copied < expired {
			problem(api.VerifyProblem{DLQID: ref.DLQID, Subject: subjects.LegalHold(ref.Domain, ref.DLQID), Kind: api.ProblemLegalHoldIncomplete,
				Detail: fmt.Sprintf("held chain: records 0..%d expired from QUARANTINE, LEGALHOLD holds the first %d", expired-1, copied)})
		}
	}
	return lh, nil
}

// originalAt returns the QUARANTINE message at seq, nil when it holds none
// (expired).
func (p *Holds) originalAt(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	var out *jetstream.RawStreamMsg
	_, err := streams.DirectGet(ctx, p.cfg.JS, subjects.QuarantineStream, streams.DirectRequest{Seq: seq}, func(m *jetstream.RawStreamMsg) error {
		if m.Sequence == seq {
			out = m
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("auditor: read %s: %w", subjects.QuarantineStream, err)
	}
	return out, nil
}
