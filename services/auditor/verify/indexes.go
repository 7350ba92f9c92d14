package verify

import (
	"context"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/rebuild"
)

// The mutable indexes (HOLDS, APPROVALS, DRAINS, IDEMPOTENCY: key-value
// buckets a writer of its keys can still overwrite or delete-mark) are
// compared with their write-once sources (AUDIT, QUARANTINE, LEDGER) by
// package rebuild, which also restores them: a missing, altered or extra
// entry is a problem of its kind (rebuild.Problem.VerifyKind:
// "hold_missing", "approval_altered", "drain_missing",
// "idempotency_extra", ...). Only ids and field names are named.

// The problems of the HOLDS check (VerifyProblem.Kind), as named since
// verify first compared HOLDS.
const (
	// ProblemHoldMissing: AUDIT records a hold placed that HOLDS lacks
	// (wiped, delete-marked, or not decodable).
	ProblemHoldMissing = "hold_missing"
	// ProblemHoldAltered: HOLDS says of a hold other than AUDIT does
	// (case, target, who placed it, its status, who lifted it).
	ProblemHoldAltered = "hold_altered"
	// ProblemHoldExtra: HOLDS has a hold AUDIT never recorded placed.
	ProblemHoldExtra = "hold_extra"
	// ProblemIndexUnreadable: an index or its source could not be read
	// to be compared (the rest of verify goes on).
	ProblemIndexUnreadable = "index_unreadable"
)

// indexes compares every index with its source; a bucket that cannot be
// compared is a problem of its own, never a verify gone blind.
func (p *Verifier) indexes(ctx context.Context, v *verifier) {
	rb := rebuild.New(p.cfg.JS, rebuild.Options{Now: p.cfg.Now})
	for _, b := range rebuild.Buckets() {
		ps, err := rb.Compare(ctx, b)
		if err != nil {
			v.problem(api.VerifyProblem{Kind: ProblemIndexUnreadable, Subject: b,
				Detail: "the index " + b + " could not be compared with its source: " + err.Error()})
			continue
		}
		for _, x := range ps {
			v.problem(api.VerifyProblem{Kind: x.VerifyKind(), Subject: x.Subject(), Detail: x.Detail})
		}
	}
}
