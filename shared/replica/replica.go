// Package replica keeps a second copy of the WORM streams and LEDGER on
// another server: JetStream mirrors, on the second server, of the
// primary's streams, reached over a leaf node connection through the
// primary's JetStream domain (the mirror's external API prefix
// $JS.<domain>.API). A mirror keeps the primary's sequences, so the
// anchors (checkpoints exported by the auditor) prove the copy whole; its
// lag is exported as deadletter_replica_lag_messages.
package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/subjects"
)

// Streams are the streams mirrored: the evidence and the system of record.
func Streams() []string {
	return []string{subjects.QuarantineStream, subjects.AuditStream, subjects.LegalHoldStream, subjects.LedgerStream}
}

// Mirror is the configuration of the mirror of stream name, in the
// primary's JetStream domain: no subjects of its own, WORM (deny delete,
// deny purge), on file.
func Mirror(name, primaryDomain string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: name, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Mirror:     &jetstream.StreamSource{Name: name, Domain: primaryDomain},
		DenyDelete: true, DenyPurge: true,
		Description: "deadletter replica: a mirror of " + name + " in JetStream domain " + primaryDomain,
	}
}

// EnsureMirrors creates, on the second server (js), a mirror of each
// stream of names that is not there yet.
func EnsureMirrors(ctx context.Context, js jetstream.JetStream, primaryDomain string, names []string) error {
	for _, name := range names {
		_, err := js.Stream(ctx, name)
		if err == nil {
			continue
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("replica: %s: %w", name, err)
		}
		if _, err := js.CreateStream(ctx, Mirror(name, primaryDomain)); err != nil {
			return fmt.Errorf("replica: create the mirror of %s: %w", name, err)
		}
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
