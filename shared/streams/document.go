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
	obs, err := js.ObjectStore(ctx, subjects.DocumentsBucket)
	if err != nil {
		return nil, fmt.Errorf("streams: %s: %w", subjects.DocumentsBucket, err)
	}
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("streams: document %s: %w", name, err)
	}
	st, err := js.Stream(ctx, subjects.ObjectStream(subjects.DocumentsBucket))
	if err != nil {
		return nil, fmt.Errorf("streams: %s: %w", subjects.ObjectStream(subjects.DocumentsBucket), err)
	}
	return &chunkReader{ctx: ctx, st: st, subject: "$O." + subjects.DocumentsBucket + ".C." + info.NUID, left: info.Chunks, seq: 1}, nil
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
