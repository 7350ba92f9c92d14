package redriver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/services/redriver/replay"
)

// metrics are the redriver's Prometheus collectors.
type metrics struct {
	published prometheus.Counter
	outcomes  *prometheus.CounterVec
	retries   prometheus.Counter
	inFlight  prometheus.Gauge
	drains    *prometheus.CounterVec
	refused   *prometheus.CounterVec
	// pauses counts the drains' automatic pauses, by reason.
	pauses *prometheus.CounterVec
	// batches, batched and unbatched count the atomic batches of replays
	// stored on EVENTS, the replays they carried, and the batches not
	// stored as a whole (their replays then written one by one).
	batches, batched, unbatched prometheus.Counter
	// batching is 1 while atomic batches of replays are measured cheaper
	// than one publish each.
	batching prometheus.Gauge
	// approvalsRefused counts the approvals found approved without a
	// valid proof and refused (never executed).
	approvalsRefused prometheus.Counter
	// unrecorded is the drain governance events not in AUDIT yet (kept in
	// their drain's state, written by the outbox).
	unrecorded prometheus.Gauge
	// notifications counts the notifications by kind and outcome (package
	// notify).
	notifications *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_redrive_published_total",
			Help: "Replays published to EVENTS by the redriver.",
		}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_redrive_outcomes_total",
			Help: "Outcomes of replays (replayed, skipped_duplicate, replay_failed, poisoned, pending, resolved_elsewhere, not_redrivable, held, error).",
		}, []string{"outcome"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_redrive_retries_total",
			Help: "Replays of a drain retried after a transient failure (unavailable, conflict).",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_redrive_in_flight",
			Help: "Replays in flight across the instance's drains.",
		}),
		drains: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_redrive_drains_total",
			Help: "Drains that reached a final status, by status.",
		}, []string{"status"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_redrive_refused_total",
			Help: "Requests refused unanswered, by code (BAD_REQUEST: an empty or reserved reply subject).",
		}, []string{"code"}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_redriver_drain_pauses_total",
			Help: "Drains paused by themselves, by reason (canary: the canary's re-failure rate; failure_rate: the sliding window's).",
		}, []string{"reason"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_redrive_replay_batches_total",
			Help: "Atomic batches of replays stored on EVENTS (two replays or more each).",
		}),
		batched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_redrive_replays_batched_total",
			Help: "Replays stored on EVENTS as part of an atomic batch.",
		}),
		unbatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_redrive_replay_batches_unbatched_total",
			Help: "Batches of replays not stored as a whole (refused, failed, or EVENTS without atomic publish): their replays were written one by one.",
		}),
		batching: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_redrive_replay_batching",
			Help: "1 while atomic batches of replays are measured cheaper than one publish each (and used), 0 otherwise.",
		}),
		approvalsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_redrive_approvals_refused_total",
			Help: "Approvals found approved without a valid proof of their signature (forged or unsigned) and refused: never executed.",
		}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_redrive_notifications_total",
			Help: "Notifications (drain_paused, approval_pending) by outcome: published on NATS, dropped by a full queue, delivered to the webhook, failed at the webhook.",
		}, []string{"kind", "outcome"}),
		unrecorded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_redrive_audit_unrecorded",
			Help: "Drain governance events (pauses, canary verdicts, resumes, cancels) not written to AUDIT yet: kept in their drain's state and retried until written.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.outcomes, m.retries, m.inFlight, m.drains, m.refused, m.pauses, m.batches, m.batched, m.unbatched, m.batching,
			m.approvalsRefused, m.unrecorded, m.notifications)
	}
	return m
}

// replayMetrics are the collectors of the replay engine (package replay).
func (m *metrics) replayMetrics() *replay.Metrics {
	return &replay.Metrics{Published: m.published, Batches: m.batches, Batched: m.batched, Unbatched: m.unbatched, Batching: m.batching}
}
