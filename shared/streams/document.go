package streams

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DOCUMENTS is a write-once stream (see Documents), not an object store:
// an object store's metadata needs rollups, which would let anyone allowed
// to write it erase every document with one message. A document is kept
// under the hex SHA-256 of its bytes (its name) as
//
//	documents.<sha256>.chunk.<upload>.<i>   chunk i (from 0) of one upload
//	documents.<sha256>.manifest             the manifest: one, ever
//
// Every chunk holds DocumentChunkSize bytes but the last. The stream holds
// one message per subject and refuses a second (ErrCodeMaxMsgsPerSubject),
// so a document's manifest, once written, is the only one there will be.
// The manifest names the upload and the stream sequences of its chunks, so
// a read never depends on which chunks came first: the chunks of an upload
// that never got its manifest (a writer that died, a second writer that
// lost the race) are harmless leftovers, read by nobody.
const (
	// DocumentsStream is the name of the DOCUMENTS stream.
	DocumentsStream = "DOCUMENTS"
	// DocumentsAll covers every subject of DOCUMENTS.
	DocumentsAll = "documents.>"
	// DocumentManifests covers every manifest subject of DOCUMENTS.
	DocumentManifests = "documents.*.manifest"
	// DocumentChunkSize is the size of every chunk of a document but its
	// last.
	DocumentChunkSize = 128 << 10
	// DocumentManifestVersion is the version of DocumentManifest.
	DocumentManifestVersion = 1
)

// DocumentManifestSubject is the subject of the manifest of the document
// whose hex SHA-256 is sha.
func DocumentManifestSubject(sha string) string { return "documents." + sha + ".manifest" }

// DocumentChunkSubject is the subject of chunk i of upload of the document
// whose hex SHA-256 is sha.
func DocumentChunkSubject(sha, upload string, i int) string {
	return "documents." + sha + ".chunk." + upload + "." + strconv.Itoa(i)
}

// DocumentManifest describes a document kept in DOCUMENTS: its size and
// SHA-256, the upload whose chunks hold it and where they are.
type DocumentManifest struct {
	// Version is DocumentManifestVersion.
	Version int `json:"version"`
	// SHA256 is the hex SHA-256 of the document's bytes, its name.
	SHA256 string `json:"sha256"`
	// Size is the document's length in bytes.
	Size int64 `json:"size"`
	// ChunkSize is the length of every chunk but the last.
	ChunkSize int64 `json:"chunk_size"`
	// Upload names the upload whose chunks hold the document (the
	// <upload> token of their subjects).
	Upload string `json:"upload"`
	// Chunks are the stream sequences of the chunks, in order, as runs of
	// consecutive sequences: each [first sequence, count].
	Chunks [][2]uint64 `json:"chunks"`
	// Created is when the manifest was written (RFC 3339, UTC).
	Created string `json:"created"`
}

// chunkCount is how many chunks a document of m.Size bytes has.
func (m *DocumentManifest) chunkCount() int64 {
	if m.Size == 0 {
		return 0
	}
	return (m.Size + m.ChunkSize - 1) / m.ChunkSize
}

// chunkLen is the length chunk i must have.
func (m *DocumentManifest) chunkLen(i int64) int64 {
	if i == m.chunkCount()-1 {
		return m.Size - i*m.ChunkSize
	}
	return m.ChunkSize
}

// seq returns the stream sequence of chunk i.
func (m *DocumentManifest) seq(i int64) uint64 {
	for _, r := range m.Chunks {
		if uint64(i) < r[1] {
			return r[0] + uint64(i)
		}
		i -= int64(r[1])
	}
	return 0
}

// Errors of a document read or write.
var (
	// ErrDocumentNotFound: DOCUMENTS holds no manifest of that name.
	ErrDocumentNotFound = errors.New("streams: no such document in DOCUMENTS")
	// ErrDocumentName: a name that is not a hex SHA-256.
	ErrDocumentName = errors.New("streams: a document's name is its lower-case hex SHA-256")
	// ErrDocumentCorrupt: what DOCUMENTS holds under a name is not the
	// document it names (the fault says how: DocumentError).
	ErrDocumentCorrupt = errors.New("streams: document corrupt")
)

// DocumentFault names what is wrong with a document kept in DOCUMENTS.
type DocumentFault string

// The faults of a document.
const (
	// FaultManifestUnreadable: the manifest is not a manifest (not JSON,
	// another version, an impossible size or chunk size, runs that do not
	// count the document's chunks).
	FaultManifestUnreadable DocumentFault = "manifest_unreadable"
	// FaultManifestName: the manifest names another document than its
	// subject does, or its subject is not a hex SHA-256.
	FaultManifestName DocumentFault = "manifest_name"
	// FaultChunkMissing: a sequence the manifest names holds no message.
	FaultChunkMissing DocumentFault = "chunk_missing"
	// FaultChunkForeign: a sequence the manifest names holds a message
	// that is not that chunk of the manifest's upload of this document.
	FaultChunkForeign DocumentFault = "chunk_foreign"
	// FaultChunkSize: a chunk is not the length the manifest implies.
	FaultChunkSize DocumentFault = "chunk_size"
	// FaultHash: the chunks' bytes do not hash to the document's name.
	FaultHash DocumentFault = "hash_mismatch"
)

// DocumentError is a document whose stored form is wrong: Fault says how.
// It matches ErrDocumentCorrupt.
type DocumentError struct {
	// SHA256 is the document's name (as the manifest's subject gives it).
	SHA256 string
	// Fault is what is wrong.
	Fault DocumentFault
	// Detail says where (sequences, lengths; never the document's bytes).
	Detail string
}

func (e *DocumentError) Error() string {
	return fmt.Sprintf("streams: document %.64s: %s: %s", e.SHA256, e.Fault, e.Detail)
}

// Is makes a DocumentError match ErrDocumentCorrupt.
func (e *DocumentError) Is(target error) bool { return target == ErrDocumentCorrupt }

func corrupt(sha string, f DocumentFault, format string, a ...any) error {
	return &DocumentError{SHA256: sha, Fault: f, Detail: fmt.Sprintf(format, a...)}
}

// ValidDocumentName reports whether name is a lower-case hex SHA-256.
func ValidDocumentName(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	for _, c := range name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseDocumentManifest parses and checks the manifest data stored on
// the manifest subject of the document sha: a DocumentError when it is
// not one.
func ParseDocumentManifest(sha string, data []byte) (*DocumentManifest, error) {
	if !ValidDocumentName(sha) {
		return nil, corrupt(sha, FaultManifestName, "the manifest's subject does not name a SHA-256")
	}
	var m DocumentManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, corrupt(sha, FaultManifestUnreadable, "%d bytes that are no manifest", len(data))
	}
	if m.SHA256 != sha {
		return nil, corrupt(sha, FaultManifestName, "the manifest names document %.64q", m.SHA256)
	}
	if m.Version != DocumentManifestVersion || m.Size < 0 || m.ChunkSize <= 0 || m.ChunkSize > 8<<20 || len(m.Upload) == 0 ||
		strings.ContainsAny(m.Upload, ".*> \t\r\n") {
		return nil, corrupt(sha, FaultManifestUnreadable, "version %d, size %d, chunk size %d, upload of %d bytes", m.Version, m.Size,
			m.ChunkSize, len(m.Upload))
	}
	var n uint64
	for _, r := range m.Chunks {
		if r[0] == 0 || r[1] == 0 || r[1] > 1<<40 {
			return nil, corrupt(sha, FaultManifestUnreadable, "a run of chunks [%d, %d]", r[0], r[1])
		}
		n += r[1]
	}
	if n != uint64(m.chunkCount()) {
		return nil, corrupt(sha, FaultManifestUnreadable, "%d chunks named for %d bytes in chunks of %d", n, m.Size, m.ChunkSize)
	}
	return &m, nil
}

// DocumentInfo returns the manifest of the document name: ErrDocumentNotFound
// when there is none, a DocumentError when it is not a manifest of that
// document. It reads the manifest by direct get.
func DocumentInfo(ctx context.Context, js jetstream.JetStream, name string) (*DocumentManifest, error) {
	if !ValidDocumentName(name) {
		return nil, fmt.Errorf("%w: %.80q", ErrDocumentName, name)
	}
	var data []byte
	found := false
	if _, err := DirectGet(ctx, js, DocumentsStream, DirectRequest{LastFor: DocumentManifestSubject(name)}, func(m *jetstream.RawStreamMsg) error {
		data, found = m.Data, true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("streams: document %s: %w", name, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", ErrDocumentNotFound, name)
	}
	return ParseDocumentManifest(name, data)
}

// PutDocument writes r into DOCUMENTS as the document name (the hex
// SHA-256 of r's bytes): its chunks, each DocumentChunkSize bytes but the
// last, then, once the bytes are seen to hash to name, its manifest. A
// document kept already (this or another writer's manifest is there) is
// not written again: its manifest is returned. Bytes that do not hash to
// name are never given a manifest (a DocumentError, FaultHash); the chunks
// written are leftovers nobody reads.
func PutDocument(ctx context.Context, js jetstream.JetStream, name string, r io.Reader) (*DocumentManifest, error) {
	if m, err := DocumentInfo(ctx, js, name); err == nil || !errors.Is(err, ErrDocumentNotFound) {
		return m, err
	}
	var token [12]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, err
	}
	m := &DocumentManifest{Version: DocumentManifestVersion, SHA256: name, ChunkSize: DocumentChunkSize, Upload: hex.EncodeToString(token[:])}
	h := sha256.New()
	if err := writeChunks(ctx, js, m, h, r); err != nil {
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != name {
		return nil, corrupt(name, FaultHash, "%d bytes written hash to %s", m.Size, got)
	}
	m.Created = time.Now().UTC().Format(time.RFC3339Nano)
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if _, err := js.Publish(ctx, DocumentManifestSubject(name), data); err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == ErrCodeMaxMsgsPerSubject {
			return DocumentInfo(ctx, js, name) // another writer's manifest came first
		}
		return nil, fmt.Errorf("streams: document %s: manifest: %w", name, err)
	}
	return m, nil
}

// putWindow is how many chunks PutDocument has in flight at once.
const putWindow = 16

// writeChunks publishes r's bytes as m's chunks, hashing them into h, and
// records their sequences and the size in m.
func writeChunks(ctx context.Context, js jetstream.JetStream, m *DocumentManifest, h hash.Hash, r io.Reader) error {
	var pending []jetstream.PubAckFuture
	settle := func(f jetstream.PubAckFuture) error {
		select {
		case ack := <-f.Ok():
			if n := len(m.Chunks); n > 0 && m.Chunks[n-1][0]+m.Chunks[n-1][1] == ack.Sequence {
				m.Chunks[n-1][1]++
			} else {
				m.Chunks = append(m.Chunks, [2]uint64{ack.Sequence, 1})
			}
			return nil
		case err := <-f.Err():
			return fmt.Errorf("streams: document %s: chunk: %w", m.SHA256, err)
		case <-ctx.Done():
			return fmt.Errorf("streams: document %s: chunk: %w", m.SHA256, ctx.Err())
		}
	}
	for i := 0; ; i++ {
		buf := make([]byte, m.ChunkSize)
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			m.Size += int64(n)
			msg := &nats.Msg{Subject: DocumentChunkSubject(m.SHA256, m.Upload, i), Data: buf[:n]}
			f, perr := js.PublishMsgAsync(msg)
			if perr != nil {
				return fmt.Errorf("streams: document %s: chunk: %w", m.SHA256, perr)
			}
			pending = append(pending, f)
			if len(pending) >= putWindow {
				if err := settle(pending[0]); err != nil {
					return err
				}
				pending = pending[1:]
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("streams: document %s: read: %w", m.SHA256, err)
		}
	}
	for _, f := range pending {
		if err := settle(f); err != nil {
			return err
		}
	}
	return nil
}

// OpenDocument returns a reader of the whole document name, which reads its
// chunks in order by direct get, one chunk in memory at a time, checks
// each (the manifest's upload and index, its length) and, at the end,
// that the bytes hash to name: a read that does not end in io.EOF ended
// in an error, a DocumentError when DOCUMENTS holds something else than
// the document.
func OpenDocument(ctx context.Context, js jetstream.JetStream, name string) (io.Reader, error) {
	m, err := DocumentInfo(ctx, js, name)
	if err != nil {
		return nil, err
	}
	return &chunkReader{ctx: ctx, js: js, m: m, hash: sha256.New()}, nil
}

// OpenDocumentAt returns a reader of the document name from byte offset
// on: an event's original bytes in a large document (audit.get, the EPCIS
// export's originals). It starts at the chunk holding offset (the
// manifest names every chunk's sequence): two direct gets, whatever the
// offset. Each chunk is checked as OpenDocument checks it; the whole
// document's hash is not (OpenDocument reads everything).
func OpenDocumentAt(ctx context.Context, js jetstream.JetStream, name string, offset int64) (io.Reader, error) {
	if offset < 0 {
		return nil, fmt.Errorf("streams: document %s: negative offset %d", name, offset)
	}
	m, err := DocumentInfo(ctx, js, name)
	if err != nil {
		return nil, err
	}
	if offset > m.Size {
		return nil, fmt.Errorf("streams: document %s: offset beyond its end: %d of %d bytes", name, offset, m.Size)
	}
	r := &chunkReader{ctx: ctx, js: js, m: m, next: offset / m.ChunkSize}
	if r.next < m.chunkCount() {
		if err := r.fill(); err != nil {
			return nil, err
		}
		r.buf = r.buf[offset-(r.next-1)*m.ChunkSize:]
	}
	return r, nil
}

// chunkReader reads a document's chunks in order.
type chunkReader struct {
	ctx  context.Context
	js   jetstream.JetStream
	m    *DocumentManifest
	next int64     // the next chunk to read
	hash hash.Hash // nil: not checked (a read from an offset)
	buf  []byte
}

// fill reads chunk r.next into r.buf, checking it.
func (r *chunkReader) fill() error {
	i, m := r.next, r.m
	seq := m.seq(i)
	var got *jetstream.RawStreamMsg
	if _, err := DirectGet(r.ctx, r.js, DocumentsStream, DirectRequest{Seq: seq}, func(raw *jetstream.RawStreamMsg) error {
		got = raw
		return nil
	}); err != nil {
		return fmt.Errorf("streams: document %s: chunk %d: %w", m.SHA256, i, err)
	}
	switch {
	case got == nil:
		return corrupt(m.SHA256, FaultChunkMissing, "chunk %d of %d at sequence %d", i, m.chunkCount(), seq)
	case got.Sequence != seq || got.Subject != DocumentChunkSubject(m.SHA256, m.Upload, int(i)):
		return corrupt(m.SHA256, FaultChunkForeign, "chunk %d of %d: sequence %d holds %.120q", i, m.chunkCount(), seq, got.Subject)
	case int64(len(got.Data)) != m.chunkLen(i):
		return corrupt(m.SHA256, FaultChunkSize, "chunk %d of %d at sequence %d: %d bytes, want %d", i, m.chunkCount(), seq, len(got.Data),
			m.chunkLen(i))
	}
	r.next, r.buf = i+1, got.Data
	return nil
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.next >= r.m.chunkCount() {
			if r.hash != nil {
				if got := hex.EncodeToString(r.hash.Sum(nil)); got != r.m.SHA256 {
					return 0, corrupt(r.m.SHA256, FaultHash, "its %d bytes hash to %s", r.m.Size, got)
				}
				r.hash = nil
			}
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
		if r.hash != nil {
			r.hash.Write(r.buf)
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
