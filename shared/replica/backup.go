package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/backup"
)

// ErrNoOrigin: a stream of the second copy carries no origin
// configuration (backup.OriginMetadata): it was not made by
// EnsureFromBackup.
var ErrNoOrigin = errors.New("replica: no origin configuration")

// FromBackup is the configuration of the second copy's mirror of the
// primary's backup-account mirror whose configuration is bak (the
// deployment kit's layout: the replica's leaf connection is bound to the
// primary's backup account, kit.Replica): the origin's configuration
// (backup.OriginMetadata) without subjects, mirroring bak's stream in the
// primary's JetStream domain, the origin kept in its metadata for
// PromoteAll.
//
// replicas, when not 0, is the copy's replica count (the second
// server's size), in place of the origin's.
func FromBackup(bak jetstream.StreamConfig, primaryDomain string, replicas int) (jetstream.StreamConfig, error) {
	raw, ok := bak.Metadata[backup.OriginMetadata]
	if !ok {
		return jetstream.StreamConfig{}, fmt.Errorf("%w: %s", ErrNoOrigin, bak.Name)
	}
	var origin jetstream.StreamConfig
	if err := json.Unmarshal([]byte(raw), &origin); err != nil {
		return jetstream.StreamConfig{}, fmt.Errorf("%w: %s: %w", ErrNoOrigin, bak.Name, err)
	}
	m := Mirror(origin, primaryDomain)
	m.RePublish, m.SubjectTransform, m.Sources, m.MirrorDirect = nil, nil, nil, false
	m.Metadata = map[string]string{backup.OriginMetadata: raw}
	if replicas > 0 {
		m.Replicas = replicas
	}
	return m, nil
}

// EnsureFromBackup creates on the second server (nc: its admin) a mirror
// of each of the primary's backup-account mirrors (access.BackupStreams)
// that is not there yet, reached through the primary's JetStream domain.
// A stream the backup account does not hold is skipped unless a backup
// requires it. It returns the names of the second copy's streams.
// replicas: as FromBackup.
func EnsureFromBackup(ctx context.Context, nc *nats.Conn, primaryDomain string, replicas int) ([]string, error) {
	own, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	primary, err := jetstream.NewWithDomain(nc, primaryDomain)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, name := range access.BackupStreams() {
		if _, err := own.Stream(ctx, name); err == nil {
			names = append(names, name)
			continue
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return names, fmt.Errorf("replica: %s: %w", name, err)
		}
		s, err := primary.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && !backup.Required[name] {
			continue
		}
		if err != nil {
			return names, fmt.Errorf("replica: the primary's backup mirror of %s: %w", name, err)
		}
		cfg, err := FromBackup(s.CachedInfo().Config, primaryDomain, replicas)
		if err != nil {
			return names, err
		}
		if _, err := own.CreateStream(ctx, cfg); err != nil {
			return names, fmt.Errorf("replica: create the mirror of %s: %w", name, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// PromoteAll makes every mirror of the second server (nc: its admin) that
// EnsureFromBackup created its origin stream (the origin configuration
// kept in its metadata: subjects, limits, WORM flags), after the
// primary is lost. A stream already promoted is left alone. It returns the
// names promoted. Each keeps the copy's replica count.
func PromoteAll(ctx context.Context, nc *nats.Conn) ([]string, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range access.BackupStreams() {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("replica: %s: %w", name, err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Mirror == nil {
			continue
		}
		raw, ok := cfg.Metadata[backup.OriginMetadata]
		if !ok {
			return out, fmt.Errorf("%w: %s", ErrNoOrigin, name)
		}
		var origin jetstream.StreamConfig
		if err := json.Unmarshal([]byte(raw), &origin); err != nil {
			return out, fmt.Errorf("%w: %s: %w", ErrNoOrigin, name, err)
		}
		origin.Replicas = cfg.Replicas
		if err := Promote(ctx, js, origin); err != nil {
			return out, err
		}
		out = append(out, name)
	}
	return out, nil
}
