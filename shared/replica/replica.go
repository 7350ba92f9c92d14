// Package replica keeps a second copy of the store on another server:
// JetStream mirrors, on the second server, reached over a leaf node
// connection through the primary's JetStream domain (the mirror's
// external API prefix $JS.<domain>.API). In the deployment kit's layout
// (kit.Replica) the leaf is bound to the primary's backup account and the
// second copy mirrors its mirrors (EnsureFromBackup: every stream and
// bucket but the work queues), promoted after a failover (PromoteAll),
// the validator resuming where the primary's left off (Resume). Mirror and
// Configs mirror the primary's own streams directly (a leaf bound to the
// services' account). A mirror keeps the primary's sequences, so the
// anchors (checkpoints exported by the auditor) prove the copy whole; its
// lag is exported as deadletter_replica_lag_messages (NewCollector,
// registered by dlqctl replica metrics).
package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/streams"
)

// Configs are the primary's streams the second copy mirrors: the WORM
// stores of o (QUARANTINE, AUDIT and, with a retention, LEGALHOLD) and
// LEDGER, the system of record.
func Configs(o streams.Options) []jetstream.StreamConfig {
	return append(streams.WORMStreams(o), streams.Ledger(o))
}

// Names returns the stream names of cfgs.
func Names(cfgs []jetstream.StreamConfig) []string {
	out := make([]string, len(cfgs))
	for i, c := range cfgs {
		out[i] = c.Name
	}
	return out
}

// Mirror is the configuration of the mirror of the primary's stream cfg
// (streams.Quarantine, streams.Ledger...) in the primary's JetStream
// domain: cfg without subjects, mirroring, so that its limits, WORM flags
// and once-per-subject rules hold on the copy too and Promote can make it
// the stream itself.
func Mirror(cfg jetstream.StreamConfig, primaryDomain string) jetstream.StreamConfig {
	m := cfg
	m.Subjects, m.Duplicates = nil, 0
	m.AllowAtomicPublish, m.AllowBatchPublish = false, false
	m.Mirror = &jetstream.StreamSource{Name: cfg.Name, Domain: primaryDomain}
	m.Description = "deadletter second copy: a mirror of " + cfg.Name + " in JetStream domain " + primaryDomain
	return m
}

// EnsureMirrors creates, on the second server (js), the mirror of each of
// the primary's stream configurations cfgs that is not there yet.
func EnsureMirrors(ctx context.Context, js jetstream.JetStream, primaryDomain string, cfgs []jetstream.StreamConfig) error {
	for _, cfg := range cfgs {
		_, err := js.Stream(ctx, cfg.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("replica: %s: %w", cfg.Name, err)
		}
		if _, err := js.CreateStream(ctx, Mirror(cfg, primaryDomain)); err != nil {
			return fmt.Errorf("replica: create the mirror of %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// Promote makes the second copy of cfg's stream the stream itself (after
// the primary is lost): the mirror stops and the stream takes cfg's
// subjects, keeping every record at its sequence (JetStream's mirror
// promotion: an update that removes the mirror).
func Promote(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("replica: promote %s: %w", cfg.Name, err)
	}
	return nil
}

// Lag returns how many messages each mirror of names is behind its
// origin, as the second server reports it.
func Lag(ctx context.Context, js jetstream.JetStream, names []string) (map[string]uint64, error) {
	out := make(map[string]uint64, len(names))
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("replica: %s: %w", name, err)
		}
		info := s.CachedInfo()
		if info.Mirror == nil {
			return nil, fmt.Errorf("replica: %s is not a mirror", name)
		}
		out[name] = info.Mirror.Lag
	}
	return out, nil
}

// Collector exports deadletter_replica_lag_messages{stream}, read from the
// second server at each scrape.
type Collector struct {
	js    jetstream.JetStream
	names []string
	lag   *prometheus.Desc
}

// NewCollector returns the collector of the mirrors of names on js.
func NewCollector(js jetstream.JetStream, names []string) *Collector {
	return &Collector{js: js, names: names, lag: prometheus.NewDesc("deadletter_replica_lag_messages",
		"Messages a mirror of the second copy (package replica) is behind its stream on the primary, by stream, as the second server reports it.",
		[]string{"stream"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.lag }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lag, err := Lag(ctx, c.js, c.names)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.lag, err)
		return
	}
	for name, n := range lag {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(n), name)
	}
}
