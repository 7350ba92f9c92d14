package auditor

import (
	"encoding/hex"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/record"
)

// metrics are the auditor's Prometheus collectors. Depth, oldest age and
// poison count are computed from the live index at each scrape.
type metrics struct {
	stored        *prometheus.CounterVec
	verifyFailed  *prometheus.CounterVec
	verifyRuns    *prometheus.CounterVec
	unaccounted   prometheus.Gauge
	repaired      prometheus.Counter
	conflicts     prometheus.Gauge
	unsourced     prometheus.Gauge
	checkpoints   prometheus.Counter
	accessRefused prometheus.Counter
	lastReconcile prometheus.Gauge
	checkpointAge prometheus.GaugeFunc // computed at scrape time (coverage)
	behindAnchor  prometheus.GaugeFunc // computed at scrape time (anchorState)
	// notifications counts the notifications by kind and outcome (package
	// notify).
	notifications *prometheus.CounterVec
}

// newMetrics builds the auditor's collectors and registers them with reg
// (none when nil); checkpointAge and behindAnchor compute the checkpoint
// age and behind-anchor gauges at scrape time.
func newMetrics(reg prometheus.Registerer, checkpointAge, behindAnchor func() float64) *metrics {
	m := &metrics{
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_quarantine_stored_records_total",
			Help: "Records read from QUARANTINE by the auditor, by kind (the whole store since the auditor started: rate() of kind replayed, skipped_duplicate and resolved is the drain rate).",
		}, []string{"kind"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_audit_notifications_total",
			Help: "Notifications (failure_group, poison, verify_failed) by outcome: published on NATS, dropped by a full queue, delivered to the webhook, failed at the webhook.",
		}, []string{"kind", "outcome"}),
		verifyFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_audit_verify_failures_total",
			Help: "Problems found by audit.verify, by kind (seal_mismatch, broken_prev_hash, index_gap, fork, unparseable, missing, subject_mismatch, checkpoint_mismatch, checkpoint_chain).",
		}, []string{"kind"}),
		verifyRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_audit_verify_runs_total",
			Help: "Verifications run, by result (ok, failed, error).",
		}, []string{"result"}),
		repaired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_audit_repaired_events_total",
			Help: "Events left without an outcome that reconciliation repaired: a failure report (class exhausted, verbatim bytes) sent for the quarantiner to seal, recorded in AUDIT.",
		}),
		unaccounted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_audit_unaccounted_events",
			Help: "Events of EVENTS found unaccounted (neither committed, quarantined nor a duplicate after the grace period) by the last reconciliation of every domain.",
		}),
		conflicts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_audit_idempotency_conflicts",
			Help: "Events of EVENTS whose key is committed with other content (quarantined IDEMPOTENCY_CONFLICT), at the last reconciliation of every domain.",
		}),
		unsourced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_audit_unsourced_ledger_entries",
			Help: "LEDGER entries that name no EVENTS message with their content and key (written by something other than the validator committing an event), at the last reconciliation of every domain.",
		}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_audit_checkpoints_total",
			Help: "Checkpoints appended to AUDIT by this auditor.",
		}),
		accessRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_audit_access_unrecorded_total",
			Help: "Payload reads refused because their access record could not be written to AUDIT (fail closed).",
		}),
		lastReconcile: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_audit_last_reconcile_timestamp_seconds",
			Help: "Unix time of the last reconciliation of every domain.",
		}),
		checkpointAge: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "deadletter_audit_checkpoint_age_seconds",
			Help: "How long QUARANTINE has held records that no checkpoint in AUDIT covers: seconds since the newest checkpoint was written, or since it was last seen covering every record (since the auditor started when there is none); 0 while the newest checkpoint covers every record.",
		}, checkpointAge),
		behindAnchor: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "deadletter_audit_behind_anchor",
			Help: "1 when the last check of the store against the newest checkpoint the auditor exported (its anchor file, at start-up and on every audit.verify) found records, a stream or the whole store missing or different; 0 otherwise. No checkpoint is written while it is 1.",
		}, behindAnchor),
	}
	if reg != nil {
		reg.MustRegister(m.stored, m.verifyFailed, m.verifyRuns, m.unaccounted, m.repaired, m.conflicts, m.unsourced, m.checkpoints, m.accessRefused, m.lastReconcile, m.checkpointAge, m.behindAnchor, m.notifications)
	}
	return m
}

// depthCollector exports the gauges computed from the index at scrape
// time (from its unresolved chains and the domains seen).
type depthCollector struct {
	x      *index
	now    func() time.Time
	open   *prometheus.Desc
	oldest *prometheus.Desc
	poison *prometheus.Desc
}

func newDepthCollector(x *index, now func() time.Time) *depthCollector {
	return &depthCollector{
		x: x, now: now,
		open: prometheus.NewDesc("deadletter_quarantine_open_records",
			"Quarantined events open or being redriven (not poison, not resolved), by domain and class.",
			[]string{"domain", "class"}, nil),
		oldest: prometheus.NewDesc("deadletter_quarantine_oldest_open_age_seconds",
			"Age of the oldest open (or redriving) quarantined event since it was quarantined, by domain; 0 when none is open.",
			[]string{"domain"}, nil),
		poison: prometheus.NewDesc("deadletter_quarantine_poison_records",
			"Quarantined events isolated as poison, by domain.",
			[]string{"domain"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.oldest
	ch <- c.poison
}

// Collect implements prometheus.Collector.
func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	type dc struct{ domain, class string }
	open := map[dc]int{}
	oldest := map[string]time.Time{}
	poison := map[string]int{}
	c.x.mu.RLock()
	for d := range c.x.domains {
		oldest[d] = time.Time{}
	}
	for _, e := range c.x.chains {
		switch {
		case e.open():
			open[dc{e.domain, e.class}]++
			if o := oldest[e.domain]; o.IsZero() || e.quarantinedAt.Before(o) {
				oldest[e.domain] = e.quarantinedAt
			}
		case e.status == record.StatusPoison:
			poison[e.domain]++
		}
	}
	c.x.mu.RUnlock()
	now := c.now()
	for k, n := range open {
		if cl := record.Class(k.class); cl != record.ClassValidation && cl != record.ClassExhausted {
			ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(n), k.domain, k.class)
		}
	}
	for d, t := range oldest {
		// Both classes of every domain seen, so a depth falls to 0 instead
		// of vanishing.
		for _, class := range []string{string(record.ClassValidation), string(record.ClassExhausted)} {
			ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(open[dc{d, class}]), d, class)
		}
		age := 0.0
		if !t.IsZero() {
			age = max(0, now.Sub(t).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, d)
		ch <- prometheus.MustNewConstMetric(c.poison, prometheus.GaugeValue, float64(poison[d]), d)
	}
}

// hexString is hex.EncodeToString.
func hexString(b []byte) string { return hex.EncodeToString(b) }
