package auditor

import (
	"context"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/rebuild"
	"github.com/deadletter/deadletter/shared/subjects"
)

// restoreTimeout bounds the restore of HOLDS at start. HOLDS is read from
// AUDIT's hold actions only, so it costs per hold, not per record.
const restoreTimeout = 2 * time.Minute

// restoreHolds restores HOLDS from AUDIT's hold actions (issue 38: the
// bucket is an index of sealed facts) before the holds are loaded, so a
// wiped or altered HOLDS is listed, readable and liftable again from the
// start. A restore that fails is logged and the auditor starts anyway:
// the held chains stay held (their sealed hold records), audit.verify
// reports the bucket's problems and `deadletter rebuild` restores it.
// What it found and did is logged (rebuild.LogReport: ids, kinds and
// fields, never a case id, a reason or a name).
func (s *Service) restoreHolds(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	rep, err := rebuild.Restore(ctx, s.js, subjects.HoldsBucket, rebuild.Options{Now: s.now})
	if err != nil {
		s.log.ErrorContext(ctx, "INDEX_RESTORE_FAILED", "bucket", subjects.HoldsBucket, "code", api.CodeOf(rebuild.APIError(err)), "err", err)
		return
	}
	rebuild.LogReport(ctx, s.log, rep)
}
