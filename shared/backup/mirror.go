package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
)

// OriginMetadata is the metadata key of a mirror of the backup account
// that holds its origin's configuration (JSON): what a restore gives the
// stream back (a snapshot of a mirror carries the mirror's own
// configuration).
const OriginMetadata = "deadletter.origin"

// ErrMirror: the backup account's mirrors are missing, not mirrors, or
// could not be created.
var ErrMirror = errors.New("backup: backup account mirror")

// MirrorConfig returns the configuration of the backup account's mirror of
// the services' stream whose configuration is origin: origin without
// subjects (and what only a stream with subjects may have), mirroring
// origin through the services' account's exports (access.BackupAPIPrefix,
// access.BackupDeliverPrefix), so its age limit and WORM flags hold on the
// copy, with origin itself in its metadata (OriginMetadata), from which a
// restore recreates origin as it was. The mirror has no byte limit: it
// never holds more than origin (whose byte limit refuses new messages and
// whose age limit the mirror shares), and a byte limit would reserve its
// size in the server's store a second time (8 GiB for EVENTS), so that
// creating the mirrors failed "insufficient storage resources" on a disk
// with less than every reservation free.
// Every mirror is write-once, whatever its origin allows: no rollup,
// delete and purge denied (an erasure its origin allowed is still copied;
// the origins are write-once too, package streams).
func MirrorConfig(origin jetstream.StreamConfig) (jetstream.StreamConfig, error) {
	clean := origin
	clean.Metadata = userMetadata(origin.Metadata)
	b, err := json.Marshal(clean)
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	m := clean
	m.Subjects, m.Duplicates, m.RePublish, m.SubjectTransform, m.Sources = nil, 0, nil, nil, nil
	m.AllowAtomicPublish, m.AllowBatchPublish, m.MirrorDirect = false, false, false
	m.MaxBytes = -1
	// Write-once whatever the origin allows (a bucket's stream denies no
	// purge on an earlier layout): no rollup, delete or purge of the copy.
	m.AllowRollup, m.DenyDelete, m.DenyPurge = false, true, true
	m.Mirror = &jetstream.StreamSource{Name: origin.Name, External: &jetstream.ExternalStream{
		APIPrefix: access.BackupAPIPrefix, DeliverPrefix: access.BackupDeliverPrefix(origin.Name),
	}}
	m.Description = "deadletter backup account: a mirror of " + origin.Name
	m.Metadata = map[string]string{OriginMetadata: string(b)}
	return m, nil
}

// userMetadata drops the server's own metadata keys (_nats.*).
func userMetadata(md map[string]string) map[string]string {
	var out map[string]string
	for k, v := range md {
		if strings.HasPrefix(k, "_nats.") {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// EnsureMirrors creates, in the backup account, the mirror of each of the
// services' streams of access.BackupStreams that is not there yet, from
// the stream's configuration as the services' account reports it, and
// makes an existing one write-once when an earlier version made it
// otherwise. nc is
// the backup account's break-glass user (access.BackupAdmin). A stream
// not provisioned in the services' account is skipped unless a backup
// requires it.
func EnsureMirrors(ctx context.Context, nc *nats.Conn) error {
	own, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	origin, err := jetstream.NewWithAPIPrefix(nc, access.BackupAPIPrefix)
	if err != nil {
		return err
	}
	for _, name := range access.BackupStreams() {
		st, err := own.Stream(ctx, name)
		if err == nil {
			if err := harden(ctx, own, st.CachedInfo().Config); err != nil {
				return err
			}
			continue
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("%w: %s: %w", ErrMirror, name, err)
		}
		s, err := origin.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && !Required[name] {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: the services' %s: %w", ErrMirror, name, err)
		}
		cfg, err := MirrorConfig(s.CachedInfo().Config)
		if err != nil {
			return err
		}
		if _, err := own.CreateStream(ctx, cfg); err != nil {
			return fmt.Errorf("%w: create the mirror of %s: %w", ErrMirror, name, err)
		}
	}
	return nil
}

// harden makes an existing mirror write-once (no rollup, deny delete and
// purge) when an earlier version created it otherwise. An update may set
// these flags, never clear them.
func harden(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	if !cfg.AllowRollup && cfg.DenyDelete && cfg.DenyPurge {
		return nil
	}
	cfg.AllowRollup, cfg.DenyDelete, cfg.DenyPurge = false, true, true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("%w: make the mirror %s write-once: %w", ErrMirror, cfg.Name, err)
	}
	return nil
}

// mirrorInfo is the part of a mirror's STREAM.INFO a backup reads.
type mirrorInfo struct {
	Error  *apiError `json:"error,omitempty"`
	Config struct {
		Metadata map[string]string `json:"metadata"`
	} `json:"config"`
	State  streamState `json:"state"`
	Mirror *struct {
		Lag    uint64 `json:"lag"`
		Active int64  `json:"active"`
	} `json:"mirror"`
}

// streamInfo asks the info of stream name.
func streamInfo(ctx context.Context, nc *nats.Conn, name string) (mirrorInfo, error) {
	var info mirrorInfo
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+name, nil)
	if err != nil {
		return info, fmt.Errorf("%w: %s: %w", ErrMirror, name, err)
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return info, fmt.Errorf("%w: %s: %w", ErrMirror, name, err)
	}
	if info.Error != nil {
		if info.Error.ErrCode == errStreamNotFound {
			return info, errNotProvisioned
		}
		return info, fmt.Errorf("%w: %s: %s (%d)", ErrMirror, name, info.Error.Description, info.Error.ErrCode)
	}
	return info, nil
}

// caughtUp waits until the mirror name reports no lag after having been
// in contact with its origin, polling every 100 ms for at most wait. It
// returns the last lag seen (0 when caught up).
func caughtUp(ctx context.Context, nc *nats.Conn, name string, wait time.Duration) (uint64, error) {
	deadline := time.Now().Add(wait)
	for {
		info, err := streamInfo(ctx, nc, name)
		if err != nil {
			return 0, err
		}
		if info.Mirror == nil {
			return 0, fmt.Errorf("%w: %s is not a mirror", ErrMirror, name)
		}
		if info.Mirror.Lag == 0 && info.Mirror.Active >= 0 {
			return 0, nil
		}
		if time.Now().After(deadline) {
			return info.Mirror.Lag, nil
		}
		select {
		case <-ctx.Done():
			return info.Mirror.Lag, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// originConfig returns the origin's configuration a mirror's snapshot
// carries in its metadata.
func originConfig(name string, mirrorCfg json.RawMessage) (json.RawMessage, error) {
	var c struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(mirrorCfg, &c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMirror, name, err)
	}
	o, ok := c.Metadata[OriginMetadata]
	if !ok || !json.Valid([]byte(o)) {
		return nil, fmt.Errorf("%w: %s has no origin configuration (metadata %s)", ErrMirror, name, OriginMetadata)
	}
	return json.RawMessage(o), nil
}

// Consumer is a durable consumer of the services' account and its
// position, as a backup of the mirrors records it.
type Consumer struct {
	// Name is the durable name.
	Name string `json:"name"`
	// Config is its configuration as the server reported it.
	Config json.RawMessage `json:"config"`
	// AckFloor is the stream sequence up to which every message was
	// acknowledged: a restored consumer starts after it.
	AckFloor uint64 `json:"ack_floor"`
}

// consumerPositions reads the info of stream's consumers of
// access.BackupConsumers through the backup account's import (none
// provisioned: none listed).
func consumerPositions(ctx context.Context, nc *nats.Conn, stream string) ([]Consumer, error) {
	var out []Consumer
	for _, name := range access.BackupConsumers()[stream] {
		m, err := nc.RequestWithContext(ctx, access.BackupConsumerInfo(stream, name), nil)
		if err != nil {
			return nil, fmt.Errorf("%w: consumer %s on %s: %w", ErrSnapshot, name, stream, err)
		}
		var info struct {
			Error    *apiError       `json:"error,omitempty"`
			Config   json.RawMessage `json:"config"`
			AckFloor struct {
				Stream uint64 `json:"stream_seq"`
			} `json:"ack_floor"`
		}
		if err := json.Unmarshal(m.Data, &info); err != nil {
			return nil, fmt.Errorf("%w: consumer %s on %s: %w", ErrSnapshot, name, stream, err)
		}
		if info.Error != nil {
			if info.Error.Code == 404 {
				continue
			}
			return nil, fmt.Errorf("%w: consumer %s on %s: %s (%d)", ErrSnapshot, name, stream, info.Error.Description, info.Error.ErrCode)
		}
		out = append(out, Consumer{Name: name, Config: info.Config, AckFloor: info.AckFloor.Stream})
	}
	return out, nil
}

// restoreConsumers creates each consumer a part recorded, with its
// configuration, and resets it to the message after its acknowledgement
// floor ($JS.API.CONSUMER.RESET).
func restoreConsumers(ctx context.Context, nc *nats.Conn, p Part) error {
	for _, c := range p.Consumers {
		body, err := json.Marshal(map[string]any{"stream_name": p.Stream, "config": c.Config})
		if err != nil {
			return err
		}
		if err := apiCall(ctx, nc, "$JS.API.CONSUMER.CREATE."+p.Stream+"."+c.Name, body); err != nil {
			return fmt.Errorf("%w: consumer %s on %s: %w", ErrRestore, c.Name, p.Stream, err)
		}
		body, _ = json.Marshal(map[string]uint64{"seq": c.AckFloor + 1})
		if err := apiCall(ctx, nc, "$JS.API.CONSUMER.RESET."+p.Stream+"."+c.Name, body); err != nil {
			return fmt.Errorf("%w: reset consumer %s on %s to %d: %w", ErrRestore, c.Name, p.Stream, c.AckFloor+1, err)
		}
	}
	return nil
}

// apiCall sends a JetStream API request and returns its error, if any.
func apiCall(ctx context.Context, nc *nats.Conn, subject string, body []byte) error {
	m, err := nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return err
	}
	var rep struct {
		Error *apiError `json:"error,omitempty"`
	}
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return err
	}
	if rep.Error != nil {
		return fmt.Errorf("%s (%d)", rep.Error.Description, rep.Error.ErrCode)
	}
	return nil
}
