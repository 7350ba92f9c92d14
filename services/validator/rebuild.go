package validator

import (
	"context"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// restoreTimeout bounds the restore of IDEMPOTENCY at start: a full
// comparison of a store of a million committed events takes about a
// minute on a busy 2-core machine (docs/operations/rebuild.md).
const restoreTimeout = 30 * time.Minute

// restoreKeys restores IDEMPOTENCY from LEDGER (issue 38: the bucket is an
// index of LEDGER's write-once commits), in the background of ingest,
// which it never delays: Run starts it once the bucket is bound and
// consumes at once. Until it ends, a claim taken looks its key up in
// LEDGER before the downstream POST (committer.committedBefore), and a
// resent event LEDGER refuses is a duplicate in any case (committer.resent):
// an event whose mark the restore has not written back yet is never
// committed, nor posted downstream, a second time. What it found and did
// is logged (rebuild.LogReport: keys, kinds and fields, never a value).
// A difference younger than the grace (rebuild.DefaultGrace) is a write
// in flight, perhaps another validator's, and is left to it.
func (s *Service) restoreKeys(run context.Context) {
	defer s.commit.restoring.Store(false)
	ctx, cancel := context.WithTimeout(run, restoreTimeout)
	defer cancel()
	start := time.Now()
	opts := rebuild.Options{Now: s.commit.now}
	if s.hooks != nil {
		opts.Grace = s.hooks.restoreGrace
	}
	rep, err := rebuild.Restore(ctx, s.js, subjects.IdempotencyBucket, opts)
	if err != nil {
		if run.Err() == nil { // not the validator stopping
			s.log.ErrorContext(ctx, "INDEX_RESTORE_FAILED", "bucket", subjects.IdempotencyBucket, "code", api.CodeOf(rebuild.APIError(err)), "err", err)
		}
		return
	}
	rebuild.LogReport(ctx, s.log, rep)
	s.log.InfoContext(ctx, "index restored", "bucket", subjects.IdempotencyBucket, "seconds", time.Since(start).Seconds())
}
