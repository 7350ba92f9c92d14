package exportsheet

import (
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/record"
)

// chainColumn is a column of a domain's sheet whose cells come from the
// chain's records rather than the payload (the payload's columns are the
// domain's own: domain.Spec.Sheet): where the event came from, who
// corrected it.
type chainColumn struct {
	Column
	cell func(f *chainFacts) any
}

// chainFacts is what a row's chain columns read: the chain folded up to
// the row's record, and the chain's latest correction up to it.
type chainFacts struct {
	st record.State
	// correctedBy and correctedAt are the person who wrote the latest
	// correction (its record's actor) and when; approvedBy the second
	// person who signed its approval ("" without one).
	correctedBy, approvedBy string
	correctedAt             time.Time
	// approver is the signer of an approved correction not yet written.
	approver string
}

// next folds record r into f (after f.st is the state up to r).
func (f *chainFacts) next(r record.Record) {
	switch r.Kind {
	case record.KindApproved:
		if r.Signature != nil && r.Signature.Action == api.ActionCorrect {
			f.approver = r.Signature.Approver
		}
	case record.KindCorrected:
		f.correctedBy, f.correctedAt, f.approvedBy, f.approver = r.Actor, r.QuarantinedAt.UTC(), f.approver, ""
	}
}

// chainColumns are the chain columns of each domain's sheet, after its
// lead columns: a DSCSA event's source document (its instance id, and the
// event's 1-based position among the document's events, "event i of n"),
// a pharmacy event's correcting person (who wrote the latest correction,
// who approved it, when: DEA inspection copies name who changed a record).
var chainColumns = map[string][]chainColumn{
	dscsa.Name: {
		{Column{Name: "source_document_id", Kind: Text}, func(f *chainFacts) any {
			if d := f.st.Document; d != nil {
				return d.ID
			}
			return nil
		}},
		{Column{Name: "source_document_event", Kind: Integer}, func(f *chainFacts) any {
			if d := f.st.Document; d != nil {
				return int64(d.Index + 1)
			}
			return nil
		}},
		{Column{Name: "source_document_events", Kind: Integer}, func(f *chainFacts) any {
			if d := f.st.Document; d != nil && d.Count > 0 {
				return int64(d.Count)
			}
			return nil
		}},
	},
	pharmacy.Name: {
		{Column{Name: "corrected_by", Kind: Text}, func(f *chainFacts) any { return nonEmpty(f.correctedBy) }},
		{Column{Name: "correction_approved_by", Kind: Text}, func(f *chainFacts) any { return nonEmpty(f.approvedBy) }},
		{Column{Name: "corrected_at", Kind: Time}, func(f *chainFacts) any {
			if f.correctedAt.IsZero() {
				return nil
			}
			return f.correctedAt
		}},
	},
}

// chainCells returns the cells of dom's chain columns for the facts f.
func chainCells(dom string, f *chainFacts) []any {
	cols := chainColumns[dom]
	if len(cols) == 0 {
		return nil
	}
	out := make([]any, len(cols))
	for i, c := range cols {
		out[i] = c.cell(f)
	}
	return out
}

func nonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
