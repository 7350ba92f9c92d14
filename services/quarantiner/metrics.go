package quarantiner

import "github.com/prometheus/client_golang/prometheus"

// metrics are the quarantiner's Prometheus collectors.
type metrics struct {
	written             *prometheus.CounterVec
	writeSeconds        prometheus.Histogram
	duplicates          *prometheus.CounterVec
	originalUnavailable prometheus.Counter
	batches             prometheus.Counter
	batched             prometheus.Counter
	refusedBatches      prometheus.Counter
	batching            prometheus.Gauge
	decisionsRefused    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_quarantine_records_written_total",
			Help: "Sealed quarantine records written, by kind, failure class and error code.",
		}, []string{"kind", "class", "code"}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "deadletter_quarantine_write_seconds",
			Help:    "Time from a failure's report to its sealed record being stored.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_quarantine_duplicates_total",
			Help: "Failures that were already quarantined (a duplicate advisory, both paths, or a second copy of the same event).",
		}, []string{"reason"}),
		originalUnavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_quarantine_original_unavailable_total",
			Help: "Exhausted events whose original could no longer be fetched from EVENTS.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_quarantine_batches_total",
			Help: "Atomic batches of records stored in QUARANTINE (one write, one fsync under sync_interval: always, each).",
		}),
		batched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_quarantine_batched_records_total",
			Help: "Records stored in QUARANTINE as part of an atomic batch (the others were written one by one).",
		}),
		refusedBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_quarantine_refused_batches_total",
			Help: "Batches the server refused as a whole (a chain moved on, a duplicate record id): their records were written one by one.",
		}),
		batching: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_quarantine_batching",
			Help: "1 while atomic batches of records are measured cheaper than one-by-one writes (and used), 0 otherwise.",
		}),
		decisionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_quarantine_decisions_refused_total",
			Help: "Appends of a decision record (approved, released, dismissed) refused because its signed decision did not check against the people registry (issue #38).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.written, m.writeSeconds, m.duplicates, m.originalUnavailable, m.batches, m.batched, m.refusedBatches, m.batching,
			m.decisionsRefused)
	}
	return m
}

func (m *metrics) preferBatches(on bool) {
	if on {
		m.batching.Set(1)
	} else {
		m.batching.Set(0)
	}
}
