package validator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/codes"
)

// Outcomes of one delivery, the label of deadletter_validator_events_total.
const (
	outcomeCommitted  = "committed"
	outcomeDuplicate  = "duplicate"
	outcomeStructural = "structural"
	outcomeTransient  = "transient"
	outcomeExhausted  = "exhausted"
)

// metrics are the validator's Prometheus collectors.
type metrics struct {
	events        *prometheus.CounterVec
	failures      *prometheus.CounterVec
	commitSeconds prometheus.Histogram
	batchSize     prometheus.Histogram
	fallbacks     prometheus.Counter
	batching      prometheus.Gauge
	conflicts     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_validator_events_total",
			Help: "Deliveries processed by the validator, by outcome (committed, duplicate, structural, transient, exhausted).",
		}, []string{"outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_validator_failures_total",
			Help: "Failed deliveries by domain and error code.",
		}, []string{"domain", "code"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "deadletter_validator_commit_seconds",
			Help:    "Time to commit one valid event (claim, downstream, LEDGER, mark).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "deadletter_validator_commit_batch_events",
			Help:    "Events committed per atomic batch (LEDGER and IDEMPOTENCY writes).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deadletter_validator_commit_fallbacks_total",
			Help: "Events committed one at a time: alone, one-event writes measured cheaper than batches, a key LEDGER held, a refused or failed batch, or atomic publish off.",
		}),
		batching: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "deadletter_validator_commit_batching",
			Help: "1 while atomic batches are measured cheaper than one-event writes (and used), 0 otherwise.",
		}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "deadletter_validator_idempotency_conflicts_total",
			Help: "Events quarantined IDEMPOTENCY_CONFLICT by domain: their key is committed in LEDGER with other content.",
		}, []string{"domain"}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.failures, m.commitSeconds, m.batchSize, m.fallbacks, m.batching, m.conflicts)
	}
	return m
}

func (m *metrics) outcome(o string) { m.events.WithLabelValues(o).Inc() }

func (m *metrics) failure(domain string, c codes.Code) {
	m.failures.WithLabelValues(domain, string(c)).Inc()
}

func (m *metrics) conflict(domain string) { m.conflicts.WithLabelValues(domain).Inc() }

func (m *metrics) committed(start time.Time) {
	m.commitSeconds.Observe(time.Since(start).Seconds())
}

func (m *metrics) batch(n int) { m.batchSize.Observe(float64(n)) }

func (m *metrics) fallback(n int) { m.fallbacks.Add(float64(n)) }

func (m *metrics) preferBatches(on bool) {
	if on {
		m.batching.Set(1)
	} else {
		m.batching.Set(0)
	}
}
