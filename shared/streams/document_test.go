package streams_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

// document returns n bytes of EPCIS-like text, every byte's place
// recognisable ("Müller & Söhne <Großhandel>" and a running number).
func document(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `<ObjectEvent id="%08d"><bizLocation>Müller &amp; Söhne &lt;Großhandel&gt;</bizLocation></ObjectEvent>`+"\n", i)
	}
	return b.Bytes()[:n]
}

// putDocument stores data in DOCUMENTS under its SHA-256, as the validator
// does (streams.PutDocument), and returns the name.
func putDocument(tb testing.TB, obs jetstream.ObjectStore, data io.Reader, sum []byte) string {
	tb.Helper()
	name := hex.EncodeToString(sum)
	if _, err := streams.PutDocument(context.Background(), obs, name, data); err != nil {
		tb.Fatal(err)
	}
	return name
}

// oneShortRead fills each read but the third, which gets 1,000 bytes: the
// object store makes a chunk of each read, so the third chunk is short
// and the others full (the sizes alone do not give it away).
type oneShortRead struct {
	r     io.Reader
	reads int
}

func (o *oneShortRead) Read(p []byte) (int, error) {
	o.reads++
	if o.reads == 3 {
		p = p[:min(len(p), 1000)]
	}
	n, err := io.ReadFull(o.r, p)
	if err == io.ErrUnexpectedEOF {
		err = nil
	}
	return n, err
}

// gatedReader reads r, but waits for gate to close once it has handed out
// after bytes: a second object is written meanwhile, so the chunks of the
// two interleave in the stream.
type gatedReader struct {
	r     io.Reader
	after int
	read  int
	gate  chan struct{}
	ready chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.read >= g.after && g.gate != nil {
		close(g.ready)
		<-g.gate
		g.gate = nil
	}
	if g.gate != nil && g.read+len(p) > g.after {
		p = p[:g.after-g.read]
	}
	n, err := g.r.Read(p)
	g.read += n
	return n, err
}

// TestOpenDocumentAt: a reader from an offset gives the bytes a read from
// the start gives past that offset, at chunk boundaries and inside
// chunks, for a document whose chunks are consecutive in the stream (the
// seek), one whose chunks interleave with another's and one written in
// chunks of other sizes (both read from the start).
func TestOpenDocumentAt(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	obs, err := js.CreateObjectStore(ctx, streams.Documents(streams.DefaultOptions()))
	if err != nil {
		t.Fatal(err)
	}
	const size = 1<<20 + 777 // 9 chunks of 128 KiB, the last short
	data := document(size)
	sum := sha256.Sum256(data)
	consecutive := putDocument(t, obs, bytes.NewReader(data), sum[:])

	// The same bytes again (another name), its first 300 KiB written, then
	// a whole other document, then the rest.
	other := document(200_000)
	osum := sha256.Sum256(other)
	g := &gatedReader{r: bytes.NewReader(data), after: 300 << 10, gate: make(chan struct{}), ready: make(chan struct{})}
	isum := sha256.Sum256(append([]byte("interleaved "), data...))
	done := make(chan string)
	go func() { done <- putDocument(t, obs, g, isum[:]) }()
	<-g.ready
	putDocument(t, obs, bytes.NewReader(other), osum[:])
	close(g.gate)
	interleaved := <-done

	// The same bytes written by the object store's own Put, as before
	// PutDocument, from a reader with one short read: a short chunk
	// inside, and no DocumentChunks mark.
	rsum := sha256.Sum256(append([]byte("one short read "), data...))
	irregular := hex.EncodeToString(rsum[:])
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: irregular}, &oneShortRead{r: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}

	chunk := 128 << 10
	offsets := []int{0, 1, chunk - 1, chunk, chunk + 1, 3*chunk + 4242, 8 * chunk, size - 1, size}
	for _, name := range []string{consecutive, interleaved, irregular} {
		for _, off := range offsets {
			t.Run(fmt.Sprintf("%s at %d", name[:8], off), func(t *testing.T) {
				r, err := streams.OpenDocumentAt(ctx, js, name, int64(off))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(r)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data[off:]) {
					t.Errorf("%d bytes from %d differ from the document's %d", len(got), off, len(data[off:]))
				}
			})
		}
	}
	if _, err := streams.OpenDocumentAt(ctx, js, consecutive, size+1); err == nil || !strings.Contains(err.Error(), "beyond its end") {
		t.Errorf("an offset beyond the end: %v", err)
	}
}

// BenchmarkDocumentEventAtEnd reads 4 KiB at the end of a 32 MiB document:
// from the start (OpenDocument and a discard, as before OpenDocumentAt)
// and from the chunk holding the offset.
func BenchmarkDocumentEventAtEnd(b *testing.B) {
	srv := natstest.Start(b)
	js := srv.JetStream(b)
	ctx := context.Background()
	obs, err := js.CreateObjectStore(ctx, streams.Documents(streams.DefaultOptions()))
	if err != nil {
		b.Fatal(err)
	}
	const size = 32 << 20
	data := document(size)
	sum := sha256.Sum256(data)
	name := putDocument(b, obs, bytes.NewReader(data), sum[:])
	off := int64(size - 4096)
	want := data[off:]
	read := func(b *testing.B, open func() (io.Reader, error)) {
		for b.Loop() {
			r, err := open()
			if err != nil {
				b.Fatal(err)
			}
			got := make([]byte, 4096)
			if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, want) {
				b.Fatalf("read %v", err)
			}
		}
	}
	b.Run("from the start", func(b *testing.B) {
		read(b, func() (io.Reader, error) {
			r, err := streams.OpenDocument(ctx, js, name)
			if err != nil {
				return nil, err
			}
			_, err = io.CopyN(io.Discard, r, off)
			return r, err
		})
	})
	b.Run("from its chunk", func(b *testing.B) {
		read(b, func() (io.Reader, error) { return streams.OpenDocumentAt(ctx, js, name, off) })
	})
}
