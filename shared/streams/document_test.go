package streams_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

// document returns n bytes of EPCIS-like text, every byte's place
// recognisable ("Müller & Söhne <Großhandel>", 陈伟 and a running number).
func document(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `<ObjectEvent id="%08d"><bizLocation>Müller &amp; Söhne &lt;Großhandel&gt; "陈伟"</bizLocation></ObjectEvent>`+"\n", i)
	}
	return b.Bytes()[:n]
}

// name is the hex SHA-256 of data.
func name(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// documentsServer starts a server with the DOCUMENTS stream.
func documentsServer(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	srv := natstest.Start(tb)
	js := srv.JetStream(tb)
	if _, err := js.CreateStream(context.Background(), streams.Documents(streams.DefaultOptions())); err != nil {
		tb.Fatal(err)
	}
	return js
}

// putDocument stores data in DOCUMENTS under its SHA-256, as the validator
// does (streams.PutDocument), and returns the name.
func putDocument(tb testing.TB, js jetstream.JetStream, data []byte) string {
	tb.Helper()
	n := name(data)
	if _, err := streams.PutDocument(context.Background(), js, n, bytes.NewReader(data)); err != nil {
		tb.Fatal(err)
	}
	return n
}

// gatedReader reads r, but waits for gate to close once it has handed out
// after bytes: a second document is written meanwhile, so the chunks of
// the two interleave in the stream.
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
// chunks, for a document whose chunks are consecutive in the stream and
// one whose chunks interleave with another's (the manifest names runs of
// sequences), written from a reader whose reads are short.
func TestOpenDocumentAt(t *testing.T) {
	js := documentsServer(t)
	ctx := context.Background()
	const size = 1<<20 + 777 // 9 chunks of 128 KiB, the last short
	data := document(size)
	consecutive := putDocument(t, js, data)

	// Other bytes of the same size, their first 300 KiB written, then a
	// whole other document, then the rest, through one-byte-short reads.
	inter := append([]byte("interleaved "), data[:size-len("interleaved ")]...)
	other := document(200_000)
	g := &gatedReader{r: iotestHalfReader{bytes.NewReader(inter)}, after: 300 << 10, gate: make(chan struct{}), ready: make(chan struct{})}
	done := make(chan error)
	go func() {
		_, err := streams.PutDocument(ctx, js, name(inter), g)
		done <- err
	}()
	<-g.ready
	putDocument(t, js, other)
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m, err := streams.DocumentInfo(ctx, js, name(inter)); err != nil || len(m.Chunks) < 2 {
		t.Fatalf("the interleaved document's manifest: %+v, %v (want 2 runs or more)", m, err)
	}

	chunk := streams.DocumentChunkSize
	offsets := []int{0, 1, chunk - 1, chunk, chunk + 1, 3*chunk + 4242, 8 * chunk, size - 1, size}
	for _, doc := range [][]byte{data, inter} {
		n := name(doc)
		for _, off := range offsets {
			t.Run(fmt.Sprintf("%s at %d", n[:8], off), func(t *testing.T) {
				r, err := streams.OpenDocumentAt(ctx, js, n, int64(off))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(r)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, doc[off:]) {
					t.Errorf("%d bytes from %d differ from the document's %d", len(got), off, len(doc[off:]))
				}
			})
		}
	}
	r, err := streams.OpenDocument(ctx, js, consecutive)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the whole document: %d bytes, %v", len(got), err)
	}
	if _, err := streams.OpenDocumentAt(ctx, js, consecutive, size+1); err == nil || !strings.Contains(err.Error(), "beyond its end") {
		t.Errorf("an offset beyond the end: %v", err)
	}
}

// iotestHalfReader hands out at most half of what each read asks for.
type iotestHalfReader struct{ r io.Reader }

func (h iotestHalfReader) Read(p []byte) (int, error) { return h.r.Read(p[:(len(p)+1)/2]) }

// TestPutDocument: a document is kept once: a second put of the same
// bytes returns the first manifest, bytes that do not hash to the name
// are refused (no manifest), an empty document and a bad name.
func TestPutDocument(t *testing.T) {
	js := documentsServer(t)
	ctx := context.Background()
	data := document(300_000)
	first, err := streams.PutDocument(ctx, js, name(data), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	again, err := streams.PutDocument(ctx, js, name(data), bytes.NewReader(data))
	if err != nil || again.Upload != first.Upload || again.Size != int64(len(data)) {
		t.Errorf("a second put: %+v, %v; want the first manifest (upload %s)", again, err, first.Upload)
	}
	altered := bytes.Replace(data, []byte("00000042"), []byte("00000900"), 1)
	tests := []struct {
		name  string
		doc   string
		bytes []byte
		want  error
	}{
		{"altered bytes under another's name", name(data[:1000]), altered, streams.ErrDocumentCorrupt},
		{"a name that is no SHA-256", "Müller & Söhne", data, streams.ErrDocumentName},
		{"an upper-case name", strings.ToUpper(name(data[:5])), data[:5], streams.ErrDocumentName},
		{"empty", name(nil), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := streams.PutDocument(ctx, js, tt.doc, bytes.NewReader(tt.bytes))
			if !errors.Is(err, tt.want) && (tt.want != nil || err != nil) {
				t.Fatalf("put: %v, want %v", err, tt.want)
			}
			if tt.want != nil {
				if _, err := streams.DocumentInfo(ctx, js, tt.doc); err == nil {
					t.Error("a manifest was written")
				}
				return
			}
			r, err := streams.OpenDocument(ctx, js, tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, tt.bytes) {
				t.Errorf("read back %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestSecondManifestRefused: whoever publishes a second manifest under a
// kept document's name, with whatever headers, the server refuses it
// (10077), and the document reads as before.
func TestSecondManifestRefused(t *testing.T) {
	js := documentsServer(t)
	ctx := context.Background()
	data := document(200_000)
	n := putDocument(t, js, data)
	forged := map[string]any{"version": 1, "sha256": n, "size": 5, "chunk_size": 131072, "upload": "x", "chunks": [][2]uint64{{1, 1}}}
	body, _ := json.Marshal(forged)
	for _, hdr := range []map[string]string{nil, {"Nats-Rollup": "sub"}, {"Nats-Rollup": "all"}, {"Nats-Expected-Last-Subject-Sequence": "0"}} {
		m := &nats.Msg{Subject: streams.DocumentManifestSubject(n), Data: body, Header: nats.Header{}}
		for k, v := range hdr {
			m.Header.Set(k, v)
		}
		if _, err := js.PublishMsg(ctx, m); err == nil {
			t.Errorf("a second manifest with %v was stored", hdr)
		}
	}
	r, err := streams.OpenDocument(ctx, js, n)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, %v", len(got), err)
	}
}

// TestForgedManifests: a manifest DOCUMENTS holds for a document that
// never got one of its own (published straight to the manifest subject)
// is read as what it is: each fault named, never a hang nor a crash.
func TestForgedManifests(t *testing.T) {
	js := documentsServer(t)
	ctx := context.Background()
	real := document(300_000)
	realName := putDocument(t, js, real)
	realMan, err := streams.DocumentInfo(ctx, js, realName)
	if err != nil {
		t.Fatal(err)
	}
	// Chunks of a document of its own, for a forged manifest to name.
	victim := document(150_000)
	vn := name(victim)
	upload := "forgedupload"
	var seqs []uint64
	for i, c := range [][]byte{victim[:streams.DocumentChunkSize], victim[streams.DocumentChunkSize:]} {
		ack, err := js.Publish(ctx, streams.DocumentChunkSubject(vn, upload, i), c)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	altered := bytes.Replace(victim, []byte("00000001"), []byte("00000900"), 1)
	an := name(altered)
	manifest := func(sha string, size int, up string, runs [][2]uint64) []byte {
		b, _ := json.Marshal(map[string]any{"version": 1, "sha256": sha, "size": size, "chunk_size": streams.DocumentChunkSize, "upload": up, "chunks": runs})
		return b
	}
	tests := []struct {
		name  string
		doc   string
		data  []byte
		fault streams.DocumentFault
	}{
		{"garbage", name([]byte("g")), []byte(`{"sha256": <Müller & Söhne>`), streams.FaultManifestUnreadable},
		{"another document's name", name([]byte("n")), manifest(vn, len(victim), upload, [][2]uint64{{seqs[0], 2}}), streams.FaultManifestName},
		{"absent chunks", name([]byte("a")), manifest(name([]byte("a")), 1000, upload, [][2]uint64{{999_999, 1}}), streams.FaultChunkMissing},
		{"another document's chunks", an, manifest(an, len(victim), upload, [][2]uint64{{seqs[0], 2}}), streams.FaultChunkForeign},
		{"the real document's chunks, wrong count", name([]byte("c")), manifest(name([]byte("c")), 10, realMan.Upload, realMan.Chunks),
			streams.FaultManifestUnreadable},
		{"its own chunks, the wrong bytes", vn, nil, streams.FaultHash},
	}
	// The last row: a manifest under the victim's name, naming chunks of
	// its own upload on the victim's subjects that hold altered bytes.
	alteredUpload := "altered"
	var aseqs []uint64
	for i, c := range [][]byte{altered[:streams.DocumentChunkSize], altered[streams.DocumentChunkSize:]} {
		ack, err := js.Publish(ctx, streams.DocumentChunkSubject(vn, alteredUpload, i), c)
		if err != nil {
			t.Fatal(err)
		}
		aseqs = append(aseqs, ack.Sequence)
	}
	tests[len(tests)-1].data = manifest(vn, len(victim), alteredUpload, [][2]uint64{{aseqs[0], 1}, {aseqs[1], 1}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := js.Publish(ctx, streams.DocumentManifestSubject(tt.doc), tt.data); err != nil {
				t.Fatal(err)
			}
			_, err := readAll(ctx, js, tt.doc)
			var de *streams.DocumentError
			if !errors.As(err, &de) || de.Fault != tt.fault || !errors.Is(err, streams.ErrDocumentCorrupt) {
				t.Fatalf("read: %v, want fault %s", err, tt.fault)
			}
			if strings.Contains(err.Error(), "Müller") || strings.Contains(err.Error(), "ObjectEvent") {
				t.Errorf("the error carries the document's bytes: %v", err)
			}
		})
	}
	if got, err := readAll(ctx, js, realName); err != nil || !bytes.Equal(got, real) {
		t.Errorf("the real document: %d bytes, %v", len(got), err)
	}
}

// readAll reads the whole document name.
func readAll(ctx context.Context, js jetstream.JetStream, n string) ([]byte, error) {
	r, err := streams.OpenDocument(ctx, js, n)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// BenchmarkDocumentEventAtEnd reads 4 KiB at the end of a 32 MiB document:
// from the start (OpenDocument and a discard) and from the chunk holding
// the offset (OpenDocumentAt).
func BenchmarkDocumentEventAtEnd(b *testing.B) {
	js := documentsServer(b)
	ctx := context.Background()
	const size = 32 << 20
	data := document(size)
	n := putDocument(b, js, data)
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
			r, err := streams.OpenDocument(ctx, js, n)
			if err != nil {
				return nil, err
			}
			_, err = io.CopyN(io.Discard, r, off)
			return r, err
		})
	})
	b.Run("from its chunk", func(b *testing.B) {
		read(b, func() (io.Reader, error) { return streams.OpenDocumentAt(ctx, js, n, off) })
	})
}
