// Package backup takes and restores consistent backups of deadletter's
// store through JetStream's own snapshot and restore API, while the system
// keeps running.
//
// A backup is a directory: one snapshot file per stream or bucket (Parts,
// the evidence and the state: QUARANTINE, AUDIT, LEGALHOLD, LEDGER,
// EVENTS, the pipeline's intake streams and every KV bucket, each with its
// configuration), the newest signed checkpoint of AUDIT when the backup
// began (checkpoint.jsonl, an anchor `verify --anchor` reads), and
// manifest.json, written last: every part's stream, first and last
// sequence, message count, size and SHA-256, and the checkpoint, signed
// with the audit key. A backup without a manifest, or whose files differ
// from it, is refused by Restore: a killed backup is never taken for a
// whole one.
//
// The protocol (nats-server jetstream_api.go): a snapshot is asked on
// $JS.API.STREAM.SNAPSHOT.<stream> with a deliver_subject; the server
// sends the snapshot there in chunks, each with a reply subject under
// $JS.SNAPSHOT.ACK.<stream> that the client answers to open the window for
// more (flow control), and ends with an empty message (status 204 when
// whole, 408 or 500 when not). A restore is asked on
// $JS.API.STREAM.RESTORE.<stream> with the configuration and state; the
// server answers with a subject under $JS.SNAPSHOT.RESTORE.<stream> to
// which the client sends the chunks as requests, and an empty request
// last, answered with the restored stream's info or an error.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/nats-io/nuid"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Errors of backups.
var (
	// ErrIncomplete: the directory holds no manifest (a backup killed or
	// cancelled before its end), or a part it lists is missing.
	ErrIncomplete = errors.New("backup: incomplete")
	// ErrCorrupt: a part differs from the manifest (size or SHA-256), or
	// the manifest's signature does not verify with the key given.
	ErrCorrupt = errors.New("backup: does not match its manifest")
	// ErrSnapshot: the server refused or broke off a snapshot.
	ErrSnapshot = errors.New("backup: snapshot")
	// ErrRestore: the server refused or broke off a restore.
	ErrRestore = errors.New("backup: restore")
)

// Files of a backup directory.
const (
	// ManifestFile is written last; its absence marks a partial backup.
	ManifestFile = "manifest.json"
	// CheckpointFile is the newest signed checkpoint when the backup
	// began, as one exported-checkpoint line (an anchor for verify).
	CheckpointFile = "checkpoint.jsonl"
	partialSuffix  = ".partial"
)

// ManifestVersion is the version of Manifest.
const ManifestVersion = 1

// Parts are the streams a backup holds, in the order they are
// snapshotted: the intake and state first, QUARANTINE and its evidence
// after the checkpoint was read (so they cover it), AUDIT after them (so
// it holds the checkpoint) and LEDGER last (so every commit of an event
// the EVENTS snapshot holds is in it: a replay of the restored store finds
// it and recommits nothing).
func Parts() []string {
	// The mirrors' list (access.BackupStreams, in this order) with the
	// work queues, which the services' account's own snapshot holds too,
	// after the intake.
	out := []string{}
	for _, st := range access.BackupStreams() {
		out = append(out, st)
		if st == subjects.ReplaysStream {
			out = append(out, subjects.FailuresStream, subjects.AdvisoriesStream)
		}
	}
	return out
}

// Required are the parts a backup must hold (the others are absent when
// not provisioned).
var Required = map[string]bool{
	subjects.EventsStream: true, subjects.QuarantineStream: true, subjects.AuditStream: true, subjects.LedgerStream: true,
	subjects.BucketStream(subjects.IdempotencyBucket): true,
}

// Part is one stream of a backup.
type Part struct {
	// Stream is the stream's name (a bucket's is KV_<bucket>).
	Stream string `json:"stream"`
	// File is the snapshot's file name in the backup directory.
	File string `json:"file"`
	// FirstSeq, LastSeq and Msgs are the stream's state in the snapshot.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Msgs     uint64 `json:"msgs"`
	// Bytes is the snapshot file's size, SHA256 its hash (hex).
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Config and State are the stream's configuration and state as the
	// server gave them with the snapshot (the restore request's).
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
	// Consumers are the services' durable consumers of the stream and
	// their positions when the part was taken from a mirror (whose
	// snapshot holds none of them): Restore creates each and resets it to
	// the message after its acknowledgement floor.
	Consumers []Consumer `json:"consumers,omitempty"`
	// MirrorLag is how many messages the backup account's mirror was
	// behind its origin when its snapshot was taken (Options.Mirrors;
	// 0: caught up).
	MirrorLag uint64 `json:"mirror_lag,omitempty"`
}

// Manifest describes a whole backup.
type Manifest struct {
	Version int `json:"version"`
	// Started and Finished bound the backup.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Checkpoint is the newest checkpoint of AUDIT when the backup began
	// (with its AUDIT sequence): QUARANTINE's part covers it and AUDIT's
	// holds it. Nil when AUDIT held none.
	Checkpoint *api.ExportedCheckpoint `json:"checkpoint,omitempty"`
	// Parts are the streams, in the order taken.
	Parts []Part `json:"parts"`
	// Key and Signature: the audit key's nkeys public key and its
	// ed25519 signature (base64) of SignedBytes.
	Key       string `json:"key"`
	Signature string `json:"signature"`
}

// SignedBytes is what the signature covers: the manifest's JSON without
// its signature.
func (m Manifest) SignedBytes() []byte {
	m.Signature = ""
	b, _ := json.Marshal(m)
	return b
}

// Signer signs a manifest (an nkeys.KeyPair: the audit key).
type Signer interface {
	PublicKey() (string, error)
	Sign(input []byte) ([]byte, error)
}

// Options tune a backup.
type Options struct {
	// InboxPrefix is the connection's inbox prefix (the backup user's
	// own, access.InboxPrefix): every snapshot is delivered under it and
	// nowhere else. Default the connection's (nats.CustomInboxPrefix),
	// or nats.InboxPrefix's "_INBOX".
	InboxPrefix string
	// ChunkSize is the snapshot chunk size asked (default 256 KiB).
	ChunkSize int
	// Progress, when set, is told each part as it is written.
	Progress func(Part)
	// Mirrors takes the backup from the backup account's mirrors
	// (access.BackupAccount, EnsureMirrors) as its backup user: the parts
	// are access.BackupStreams, each taken once its mirror has caught up
	// (or CatchUp has passed: its lag then is in the manifest), and each
	// part's configuration is its origin's (OriginMetadata), so a restore
	// gives the services' streams back.
	Mirrors bool
	// CatchUp bounds the wait for each mirror to catch up (default 30 s).
	CatchUp time.Duration
}

// snapshotRequest is $JS.API.STREAM.SNAPSHOT's request.
type snapshotRequest struct {
	DeliverSubject string `json:"deliver_subject"`
	ChunkSize      int    `json:"chunk_size,omitempty"`
	WindowSize     int    `json:"window_size,omitempty"`
}

// apiError is a JetStream API error.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// snapshotReply is $JS.API.STREAM.SNAPSHOT's reply.
type snapshotReply struct {
	Error  *apiError       `json:"error,omitempty"`
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
	// Consumers are the services' durable consumers of the stream and
	// their positions when the part was taken from a mirror (whose
	// snapshot holds none of them): Restore creates each and resets it to
	// the message after its acknowledgement floor.
	Consumers []Consumer `json:"consumers,omitempty"`
	// MirrorLag is how many messages the backup account's mirror was
	// behind its origin when its snapshot was taken (Options.Mirrors;
	// 0: caught up).
	MirrorLag uint64 `json:"mirror_lag,omitempty"`
}

// streamState is the part of a stream's state a manifest lists.
type streamState struct {
	Msgs     uint64 `json:"messages"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// errStreamNotFound is JetStream's stream-not-found error code.
const errStreamNotFound = 10059

// Take writes a backup of every part into dir (created; it must not exist
// or be empty), signed with signer. The newest checkpoint is read from
// AUDIT first; the manifest is written last.
func Take(ctx context.Context, nc *nats.Conn, dir string, signer Signer, o Options) (Manifest, error) {
	if o.InboxPrefix == "" {
		o.InboxPrefix = nc.Opts.InboxPrefix // the connection's own (nats.CustomInboxPrefix)
	}
	if o.InboxPrefix == "" {
		o.InboxPrefix = nats.InboxPrefix[:len(nats.InboxPrefix)-1]
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = 256 << 10
	}
	if err := emptyDir(dir); err != nil {
		return Manifest{}, err
	}
	key, err := signer.PublicKey()
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: signing key: %w", err)
	}
	man := Manifest{Version: ManifestVersion, Started: time.Now().UTC(), Key: key}
	if o.CatchUp == 0 {
		o.CatchUp = 30 * time.Second
	}
	if o.Mirrors {
		// The newest checkpoint is AUDIT's mirror's once it caught up.
		if _, err := caughtUp(ctx, nc, subjects.AuditStream, o.CatchUp); err != nil {
			return man, err
		}
	}
	cp, err := newestCheckpoint(ctx, nc)
	if err != nil {
		return man, err
	}
	man.Checkpoint = cp
	for _, name := range Parts() {
		if o.Mirrors && !slices.Contains(access.BackupStreams(), name) {
			continue
		}
		var lag uint64
		if o.Mirrors {
			lag, err = caughtUp(ctx, nc, name, o.CatchUp)
			if errors.Is(err, errNotProvisioned) && !Required[name] {
				continue
			}
			if err != nil {
				return man, err
			}
		}
		var consumers []Consumer
		if o.Mirrors {
			// Before the snapshot: the mirror then holds at least every
			// message up to each floor.
			if consumers, err = consumerPositions(ctx, nc, name); err != nil {
				return man, err
			}
		}
		p, err := snapshot(ctx, nc, dir, name, o)
		if errors.Is(err, errNotProvisioned) && !Required[name] {
			continue
		}
		if err != nil {
			return man, err
		}
		if o.Mirrors {
			p.Consumers = consumers
			p.MirrorLag = lag
			if p.Config, err = originConfig(name, p.Config); err != nil {
				return man, err
			}
		}
		man.Parts = append(man.Parts, p)
		if o.Progress != nil {
			o.Progress(p)
		}
	}
	if cp != nil {
		if q, ok := man.part(subjects.QuarantineStream); !ok || q.LastSeq < cp.LastSeq {
			return man, fmt.Errorf("%w: QUARANTINE's snapshot ends before the checkpoint's sequence %d", ErrSnapshot, cp.LastSeq)
		}
		b, err := json.Marshal(cp)
		if err != nil {
			return man, err
		}
		if err := writeFile(filepath.Join(dir, CheckpointFile), append(b, '\n')); err != nil {
			return man, err
		}
	}
	man.Finished = time.Now().UTC()
	sig, err := signer.Sign(man.SignedBytes())
	if err != nil {
		return man, fmt.Errorf("backup: sign the manifest: %w", err)
	}
	man.Signature = base64.StdEncoding.EncodeToString(sig)
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return man, err
	}
	// Written last, whole or not at all (a rename), and synced with its
	// directory: its presence is what makes the backup whole.
	if err := writeFile(filepath.Join(dir, ManifestFile), append(b, '\n')); err != nil {
		return man, err
	}
	return man, nil
}

// part returns the part of stream name.
func (m Manifest) part(name string) (Part, bool) {
	for _, p := range m.Parts {
		if p.Stream == name {
			return p, true
		}
	}
	return Part{}, false
}

var errNotProvisioned = errors.New("backup: stream not provisioned")

// newestCheckpoint reads the last checkpoint of AUDIT (nil when none), by
// a direct get of the last message on its subject (the one read of a
// payload-free record the backup user may make).
func newestCheckpoint(ctx context.Context, nc *nats.Conn) (*api.ExportedCheckpoint, error) {
	m, err := nc.RequestWithContext(ctx, access.BackupCheckpointGet(), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("backup: read the newest checkpoint: no %s stream (or no direct get on it)", subjects.AuditStream)
	}
	if err != nil {
		return nil, fmt.Errorf("backup: read the newest checkpoint: %w", err)
	}
	if st := m.Header.Get("Status"); st == "404" {
		return nil, nil // no checkpoint yet
	} else if st != "" {
		return nil, fmt.Errorf("backup: read the newest checkpoint: status %s %s", st, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("backup: read the newest checkpoint: sequence %.40q", m.Header.Get(jetstream.SequenceHeader))
	}
	cp := &api.ExportedCheckpoint{AuditSeq: seq}
	if err := json.Unmarshal(m.Data, &cp.Checkpoint); err != nil {
		return nil, fmt.Errorf("backup: the newest checkpoint (AUDIT sequence %d) is unreadable: %w", seq, err)
	}
	return cp, nil
}

// snapshot writes the snapshot of stream name to dir/<name>.snap, through
// a .partial file renamed once the server said it was whole.
func snapshot(ctx context.Context, nc *nats.Conn, dir, name string, o Options) (Part, error) {
	p := Part{Stream: name, File: name + ".snap"}
	deliver := o.InboxPrefix + ".snapshot." + nuid.Next()
	sub, err := nc.SubscribeSync(deliver)
	if err != nil {
		return p, fmt.Errorf("%w: %s: %w", ErrSnapshot, name, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, 256<<20)
	body, _ := json.Marshal(snapshotRequest{DeliverSubject: deliver, ChunkSize: o.ChunkSize})
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.SNAPSHOT."+name, body)
	if err != nil {
		return p, fmt.Errorf("%w: %s: %w", ErrSnapshot, name, err)
	}
	var rep snapshotReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return p, fmt.Errorf("%w: %s: %w", ErrSnapshot, name, err)
	}
	if rep.Error != nil {
		if rep.Error.ErrCode == errStreamNotFound {
			return p, errNotProvisioned
		}
		return p, fmt.Errorf("%w: %s: %s (%d)", ErrSnapshot, name, rep.Error.Description, rep.Error.ErrCode)
	}
	p.Config, p.State = rep.Config, rep.State
	var st streamState
	if err := json.Unmarshal(rep.State, &st); err != nil {
		return p, fmt.Errorf("%w: %s: state: %w", ErrSnapshot, name, err)
	}
	p.FirstSeq, p.LastSeq, p.Msgs = st.FirstSeq, st.LastSeq, st.Msgs
	path := filepath.Join(dir, p.File)
	f, err := os.OpenFile(path+partialSuffix, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return p, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	for {
		c, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return p, fmt.Errorf("%w: %s: %w", ErrSnapshot, name, err)
		}
		if len(c.Data) == 0 {
			if st := c.Header.Get("Status"); st != "" && st != "204" {
				return p, fmt.Errorf("%w: %s: the server ended it: %s %s", ErrSnapshot, name, st, c.Header.Get("Description"))
			}
			break
		}
		n, err := w.Write(c.Data)
		if err != nil {
			return p, err
		}
		p.Bytes += int64(n)
		if c.Reply != "" {
			if err := c.Respond(nil); err != nil {
				return p, fmt.Errorf("%w: %s: ack: %w", ErrSnapshot, name, err)
			}
		}
	}
	if err := f.Sync(); err != nil {
		return p, err
	}
	if err := f.Close(); err != nil {
		return p, err
	}
	if err := os.Rename(path+partialSuffix, path); err != nil {
		return p, err
	}
	p.SHA256 = hex.EncodeToString(h.Sum(nil))
	return p, nil
}

// emptyDir creates dir, or accepts it empty.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(es) > 0 {
		return fmt.Errorf("backup: %s is not empty", dir)
	}
	return nil
}

// writeFile writes b to path through a temporary file renamed over it,
// synced with its directory.
func writeFile(path string, b []byte) error {
	tmp := path + partialSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// Open reads the manifest of the backup in dir and checks it: signed by
// pubKey (the audit key the caller trusts, never the manifest's), every
// part present with its size and SHA-256. A directory without a manifest
// is ErrIncomplete.
func Open(dir, pubKey string) (Manifest, error) {
	var man Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return man, fmt.Errorf("%w: %s has no %s (a backup killed or cancelled before its end)", ErrIncomplete, dir, ManifestFile)
	}
	if err != nil {
		return man, err
	}
	if err := json.Unmarshal(b, &man); err != nil {
		return man, fmt.Errorf("%w: manifest: %w", ErrCorrupt, err)
	}
	if man.Version != ManifestVersion {
		return man, fmt.Errorf("%w: manifest version %d", ErrCorrupt, man.Version)
	}
	if man.Key != pubKey {
		return man, fmt.Errorf("%w: signed by %.60q, not by the given key", ErrCorrupt, man.Key)
	}
	kp, err := nkeys.FromPublicKey(pubKey)
	if err != nil {
		return man, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	sig, err := base64.StdEncoding.DecodeString(man.Signature)
	if err != nil || kp.Verify(man.SignedBytes(), sig) != nil {
		return man, fmt.Errorf("%w: the manifest's signature does not verify", ErrCorrupt)
	}
	for _, name := range Parts() {
		if _, ok := man.part(name); !ok && Required[name] {
			return man, fmt.Errorf("%w: no part %s", ErrIncomplete, name)
		}
	}
	for _, p := range man.Parts {
		if filepath.Base(p.File) != p.File {
			return man, fmt.Errorf("%w: part file %.100q", ErrCorrupt, p.File)
		}
		sum, n, err := hashFile(filepath.Join(dir, p.File))
		if errors.Is(err, os.ErrNotExist) {
			return man, fmt.Errorf("%w: %s is missing", ErrIncomplete, p.File)
		}
		if err != nil {
			return man, err
		}
		if n != p.Bytes || sum != p.SHA256 {
			return man, fmt.Errorf("%w: %s has %d bytes, SHA-256 %s; the manifest says %d, %s", ErrCorrupt, p.File, n, sum, p.Bytes, p.SHA256)
		}
	}
	return man, nil
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// restoreReply is $JS.API.STREAM.RESTORE's reply, and the last chunk's.
type restoreReply struct {
	Error          *apiError       `json:"error,omitempty"`
	DeliverSubject string          `json:"deliver_subject"`
	State          json.RawMessage `json:"state"`
}

// Restore restores every part of the backup in dir (checked by Open with
// pubKey) into the server of nc, whose streams must not exist (an empty
// server: a restore never overwrites). The connection needs the rights to
// create streams (the break-glass admin: restoring is a disaster
// recovery act). Each stream gets its backed-up configuration back, WORM
// flags included.
func Restore(ctx context.Context, nc *nats.Conn, dir, pubKey string, progress func(Part)) (Manifest, error) {
	man, err := Open(dir, pubKey)
	if err != nil {
		return man, err
	}
	for _, p := range man.Parts {
		if err := restorePart(ctx, nc, dir, p); err != nil {
			return man, err
		}
		if err := restoreConsumers(ctx, nc, p); err != nil {
			return man, err
		}
		if progress != nil {
			progress(p)
		}
	}
	return man, nil
}

func restorePart(ctx context.Context, nc *nats.Conn, dir string, p Part) error {
	body, err := json.Marshal(map[string]json.RawMessage{"config": p.Config, "state": p.State})
	if err != nil {
		return err
	}
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.RESTORE."+p.Stream, body)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRestore, p.Stream, err)
	}
	var rep restoreReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRestore, p.Stream, err)
	}
	if rep.Error != nil {
		return fmt.Errorf("%w: %s: %s (%d)", ErrRestore, p.Stream, rep.Error.Description, rep.Error.ErrCode)
	}
	f, err := os.Open(filepath.Join(dir, p.File))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, 256<<10)
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			r, rerr := nc.RequestWithContext(ctx, rep.DeliverSubject, buf[:n])
			if rerr != nil {
				return fmt.Errorf("%w: %s: chunk: %w", ErrRestore, p.Stream, rerr)
			}
			if len(r.Data) > 0 {
				var e restoreReply
				if json.Unmarshal(r.Data, &e) == nil && e.Error != nil {
					return fmt.Errorf("%w: %s: %s (%d)", ErrRestore, p.Stream, e.Error.Description, e.Error.ErrCode)
				}
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	r, err := nc.RequestWithContext(ctx, rep.DeliverSubject, nil)
	if err != nil {
		return fmt.Errorf("%w: %s: end: %w", ErrRestore, p.Stream, err)
	}
	var end restoreReply
	if err := json.Unmarshal(r.Data, &end); err != nil {
		return fmt.Errorf("%w: %s: end: %w", ErrRestore, p.Stream, err)
	}
	if end.Error != nil {
		return fmt.Errorf("%w: %s: %s (%d)", ErrRestore, p.Stream, end.Error.Description, end.Error.ErrCode)
	}
	return nil
}
