package streams

import (
	"context"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/subjects"
)

// OpenDocument returns a reader of the object name (an EPCIS document's
// hex SHA-256) of the DOCUMENTS object store, which reads its chunks in
// order by direct get, one chunk in memory at a time: what the validator
// ingests a document from and the auditor reconciles it from, without a
// consumer.
func OpenDocument(ctx context.Context, js jetstream.JetStream, name string) (io.Reader, error) {
	r, _, err := openDocument(ctx, js, name)
	return r, err
}

// openDocument is OpenDocument, with the object's info.
func openDocument(ctx context.Context, js jetstream.JetStream, name string) (*chunkReader, *jetstream.ObjectInfo, error) {
	obs, err := js.ObjectStore(ctx, subjects.DocumentsBucket)
	if err != nil {
		return nil, nil, fmt.Errorf("streams: %s: %w", subjects.DocumentsBucket, err)
	}
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		return nil, nil, fmt.Errorf("streams: document %s: %w", name, err)
	}
	st, err := js.Stream(ctx, subjects.ObjectStream(subjects.DocumentsBucket))
	if err != nil {
		return nil, nil, fmt.Errorf("streams: %s: %w", subjects.ObjectStream(subjects.DocumentsBucket), err)
	}
	return &chunkReader{ctx: ctx, st: st, subject: "$O." + subjects.DocumentsBucket + ".C." + info.NUID, left: info.Chunks, seq: 1}, info, nil
}

// DocumentChunks is the metadata key of a DOCUMENTS object written by
// PutDocument, whose value ChunksUniform says every chunk but the last is
// full: the object store makes a chunk of each read of the writer's
// reader, so only then does a byte offset name its chunk.
const (
	DocumentChunks = "deadletter_chunks"
	ChunksUniform  = "uniform"
)

// PutDocument writes r into the DOCUMENTS object store obs under name,
// every chunk full but the last (DocumentChunks), so that OpenDocumentAt
// can start at the chunk holding an offset.
func PutDocument(ctx context.Context, obs jetstream.ObjectStore, name string, r io.Reader) (*jetstream.ObjectInfo, error) {
	return obs.Put(ctx, jetstream.ObjectMeta{Name: name, Metadata: map[string]string{DocumentChunks: ChunksUniform}}, fullReads{r})
}

// fullReads reads as io.ReadFull does: each read fills its buffer unless
// the reader ends.
type fullReads struct{ r io.Reader }

func (f fullReads) Read(p []byte) (int, error) {
	n, err := io.ReadFull(f.r, p)
	if err == io.ErrUnexpectedEOF {
		err = nil // the last, short read; the next one gives io.EOF
	}
	return n, err
}

// OpenDocumentAt returns a reader of the object name of the DOCUMENTS
// object store from byte offset on: an event's original bytes in a large
// document (audit.get, the EPCIS export's originals). For an object
// written by PutDocument whose chunks are consecutive in the stream
// (written by one writer alone) it starts at the chunk holding offset,
// two lookups instead of a read of everything before offset; otherwise it
// reads and discards up to offset.
func OpenDocumentAt(ctx context.Context, js jetstream.JetStream, name string, offset int64) (io.Reader, error) {
	if offset < 0 {
		return nil, fmt.Errorf("streams: document %s: negative offset %d", name, offset)
	}
	r, info, err := openDocument(ctx, js, name)
	if err != nil {
		return nil, err
	}
	if info.Metadata[DocumentChunks] == ChunksUniform && r.left > 1 && offset > 0 {
		first, ferr := r.st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(r.subject))
		last, lerr := r.st.GetLastMsgForSubject(ctx, r.subject)
		size := int64(0)
		if ferr == nil {
			size = int64(len(first.Data))
		}
		if lerr == nil && size > 0 && last.Sequence-first.Sequence+1 == uint64(r.left) &&
			uint64(size)*uint64(r.left-1) < info.Size && info.Size <= uint64(size)*uint64(r.left) {
			// Consecutive, and every chunk but the last holds size
			// bytes: chunk k is at first+k.
			k := min(offset/size, int64(r.left)-1)
			r.seq, r.left = first.Sequence+uint64(k), r.left-uint32(k)
			offset -= k * size
		}
	}
	if _, err := io.CopyN(io.Discard, r, offset); err != nil {
		return nil, fmt.Errorf("streams: document %s: offset beyond its end: %w", name, err)
	}
	return r, nil
}

// chunkReader reads an object's chunks in order.
type chunkReader struct {
	ctx     context.Context
	st      jetstream.Stream
	subject string
	left    uint32 // chunks not read yet
	seq     uint64 // where the next chunk is looked for
	buf     []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.left == 0 {
			return 0, io.EOF
		}
		raw, err := r.st.GetMsg(r.ctx, r.seq, jetstream.WithGetMsgSubject(r.subject))
		if err != nil {
			return 0, fmt.Errorf("streams: document chunk: %w", err)
		}
		r.seq, r.left, r.buf = raw.Sequence+1, r.left-1, raw.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
