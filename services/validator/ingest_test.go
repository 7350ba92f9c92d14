package validator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/sample"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// docPublisher is the publisher token documents are published under.
const docPublisher = "grosshandel-mueller"

// docSubject is where docPublisher's document is stored.
var docSubject = subjects.Published(docPublisher, dscsa.Name, subjects.DocumentType)

func readShipment(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("../../shared/domain/dscsa/document/testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// waitSettled polls until the validator's consumer has nothing pending or
// unacknowledged: the document message was acknowledged.
func waitSettled(tb testing.TB, js jetstream.JetStream) {
	tb.Helper()
	natstest.CheckFor(tb, 60*time.Second, 50*time.Millisecond, func() error {
		c, err := js.Consumer(context.Background(), subjects.EventsStream, subjects.ValidatorConsumer)
		if err != nil {
			return err
		}
		info, err := c.Info(context.Background())
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("%d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// documentObject reads a document's bytes back from DOCUMENTS.
func documentObject(tb testing.TB, js jetstream.JetStream, sha string) []byte {
	tb.Helper()
	r, err := streams.OpenDocument(context.Background(), js, sha)
	if err != nil {
		tb.Fatalf("document %s: %v", sha, err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		tb.Fatalf("document %s: %v", sha, err)
	}
	return b
}

// ledgerAll reads every LEDGER message.
func ledgerAll(tb testing.TB, js jetstream.JetStream) []*jetstream.RawStreamMsg {
	tb.Helper()
	s, err := js.Stream(context.Background(), subjects.LedgerStream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestIngestDocument: a shipment document (JSON, EPCIS 1.2 XML) published
// as one message: six events committed once each, the bad one (index 4)
// reported on its own with the document's provenance, the document kept
// verbatim in DOCUMENTS where each event's offset and length find its
// original bytes, the message acknowledged. The same document published
// again doubles nothing.
func TestIngestDocument(t *testing.T) {
	for _, tc := range []struct{ name, file, format string }{
		{"JSON", "shipment.json", document.FormatJSON},
		{"EPCIS 1.2 XML", "shipment-1.2.xml", document.FormatXML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			js := srv.JetStream(t)
			startValidator(t, srv, testConfig(), nil)
			data := readShipment(t, tc.file)
			info, err := document.Identify(data)
			if err != nil {
				t.Fatal(err)
			}
			seq := publish(t, js, docSubject, data, "")
			waitMsgs(t, js, subjects.LedgerStream, 6)
			waitMsgs(t, js, subjects.FailuresStream, 1)
			waitSettled(t, js)
			stored := documentObject(t, js, info.SHA256)
			if !bytes.Equal(stored, data) {
				t.Fatal("DOCUMENTS does not hold the document's bytes")
			}
			for _, m := range ledgerAll(t, js) {
				idx, _ := strconv.Atoi(m.Header.Get(envelope.DocumentIndex))
				off, _ := strconv.Atoi(m.Header.Get(envelope.DocumentOffset))
				n, _ := strconv.Atoi(m.Header.Get(envelope.DocumentLength))
				if m.Header.Get(envelope.DocumentSHA256) != info.SHA256 || idx == 4 || n == 0 || off+n > len(stored) ||
					m.Header.Get(envelope.Publisher) != docPublisher || m.Header.Get(envelope.SourceSeq) != strconv.FormatUint(seq, 10) {
					t.Errorf("LEDGER %d: headers %v", m.Sequence, m.Header)
				}
			}
			fs := failures(t, js)
			f := fs[0]
			d := f.Envelope.Document
			if f.Code != dscsa.InvalidParentID || f.Class != record.ClassValidation || d == nil || f.Seq != seq ||
				f.Subject != subjects.Published(docPublisher, dscsa.Name, "receiving") {
				t.Fatalf("failure %s %s on %s, envelope %+v", f.Code, f.Class, f.Subject, f.Envelope)
			}
			want := envelope.Document{ID: info.SHA256, SHA256: info.SHA256, Format: tc.format, Index: 4, Count: 7, Sender: info.Sender,
				Created: "2024-03-12T14:20:00Z", Stream: subjects.EventsStream, Seq: seq, Offset: d.Offset, Length: d.Length}
			if *d != want || d.Length == 0 {
				t.Errorf("document provenance\n %+v\nwant\n %+v", *d, want)
			}
			orig := stored[d.Offset : d.Offset+d.Length]
			if tc.format == document.FormatJSON && !bytes.HasSuffix(f.Payload, bytes.TrimLeft(orig[1:], " \n")) ||
				tc.format == document.FormatXML && !bytes.HasPrefix(orig, []byte("<AggregationEvent>")) {
				t.Errorf("original bytes %q, payload %q", orig, f.Payload)
			}
			r := record.FromFailure(f, time.Now())
			if r.Document == nil || r.Publisher != docPublisher || r.DLQID == "" {
				t.Errorf("record %+v", r)
			}

			// The same document again: every event a duplicate, its
			// failure report de-duplicated.
			publish(t, js, docSubject, data, "")
			waitSettled(t, js)
			if n := streamMsgs(t, js, subjects.LedgerStream); n != 6 {
				t.Errorf("LEDGER %d after the copy", n)
			}
			if n := streamMsgs(t, js, subjects.FailuresStream); n != 1 {
				t.Errorf("FAILURES %d after the copy", n)
			}
		})
	}
}

// TestIngestPartialFailure: one bad event of 1,000 (a document of one
// message; EVENTS takes messages up to 2 MiB): all others committed, the
// bad one reported alone, by its index.
func TestIngestPartialFailure(t *testing.T) {
	n, bad := 1_000, 481
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	data, err := set.Document("SHIP-4812 \"Müller & Söhne <Großhandel>\"", 0, n, map[int]bool{bad: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	startValidator(t, srv, testConfig(), nil)
	publish(t, js, docSubject, data, "")
	waitMsgs(t, js, subjects.FailuresStream, 1)
	waitMsgs(t, js, subjects.LedgerStream, uint64(n-1))
	waitSettled(t, js)
	f := failures(t, js)[0]
	if d := f.Envelope.Document; d == nil || d.Index != bad || d.Count != n || d.ID != "SHIP-4812 \"Müller & Söhne <Großhandel>\"" ||
		d.Sender != sample.DocumentSender || d.Receiver != sample.DocumentReceiver {
		t.Errorf("failure's document %+v", d)
	}
}

// TestIngestMalformed: a document that cannot be read is reported whole,
// its bytes verbatim, with MALFORMED_DOCUMENT; nothing is committed.
func TestIngestMalformed(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	startValidator(t, srv, testConfig(), nil)
	shipment := readShipment(t, "shipment.json")
	tests := []struct {
		name string
		doc  []byte
	}{
		{"truncated JSON", shipment[:len(shipment)/2]},
		{"XML with a DTD", []byte(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "Müller &amp; Söhne">]><epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1"/>`)},
		{"not a document", []byte(`{"type":"ObjectEvent","action":"ADD"}`)},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seq := publish(t, js, docSubject, tc.doc, "")
			waitMsgs(t, js, subjects.FailuresStream, uint64(i+1))
			f := failures(t, js)[i]
			if f.Code != dscsa.MalformedDocument || !bytes.Equal(f.Payload, tc.doc) || f.Seq != seq || f.Subject != docSubject {
				t.Errorf("failure %s on %s seq %d, payload verbatim %v", f.Code, f.Subject, f.Seq, bytes.Equal(f.Payload, tc.doc))
			}
		})
	}
	waitSettled(t, js)
	if n := streamMsgs(t, js, subjects.LedgerStream); n != 0 {
		t.Errorf("LEDGER %d", n)
	}
}

// TestIngestPartyPerEvent: the publisher's party rules apply to each
// event of a document: the events of a party it may not publish for are
// quarantined PARTY_NOT_AUTHORIZED, the others commit.
func TestIngestPartyPerEvent(t *testing.T) {
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	data, err := set.Document("SHIP-PARTY", 0, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := document.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	parties := make([]string, n)
	for i, ev := range doc.Events {
		env, err := g.Check(document.EventSubject("", ev), ev)
		if err != nil {
			t.Fatal(err)
		}
		parties[i] = env.PartyID
	}
	allowed := parties[0]
	wantRefused := 0
	for _, p := range parties {
		if p != allowed {
			wantRefused++
		}
	}
	if wantRefused == 0 || wantRefused == n {
		t.Fatalf("the sample has %d of %d events of other parties", wantRefused, n)
	}
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	cfg := testConfig()
	cfg.Publishers = access.Publishers{docPublisher: {dscsa.Name: {allowed}}}
	startValidator(t, srv, cfg, nil)
	publish(t, js, docSubject, data, "")
	waitMsgs(t, js, subjects.FailuresStream, uint64(wantRefused))
	waitMsgs(t, js, subjects.LedgerStream, uint64(n-wantRefused))
	waitSettled(t, js)
	for _, f := range failures(t, js) {
		if f.Code != codes.PartyNotAuthorized || f.Envelope == nil || f.Envelope.Document == nil || parties[f.Envelope.Document.Index] == allowed {
			t.Errorf("failure %s, envelope %+v", f.Code, f.Envelope)
		}
	}
}

// TestIngestDocumentInParts: a document of 10,000 events (about 12 MB,
// more than EVENTS takes in one message) published in parts and a
// manifest: one bad event, 9,999 committed, 1 reported with the first
// part's sequence as the document's, the document kept whole in DOCUMENTS.
func TestIngestDocumentInParts(t *testing.T) {
	const n, bad = 10_000, 4_811
	set, err := sample.Load()
	if err != nil {
		t.Fatal(err)
	}
	data, err := set.Document("SHIP-PARTS", 20_000, n, map[int]bool{bad: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	startValidator(t, srv, testConfig(), nil)
	res, err := upload.Publish(context.Background(), js, docSubject, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Parts < 2 {
		t.Fatalf("%d parts", res.Parts)
	}
	waitMsgs(t, js, subjects.FailuresStream, 1)
	waitMsgs(t, js, subjects.LedgerStream, n-1)
	waitSettled(t, js)
	f := failures(t, js)[0]
	d := f.Envelope.Document
	if d == nil || d.Index != bad || d.Count != n || d.SHA256 != res.SHA256 || d.Seq != res.Seq-uint64(res.Parts) {
		t.Fatalf("failure's document %+v (upload %+v)", d, res)
	}
	stored := documentObject(t, js, res.SHA256)
	if !bytes.Equal(stored, data) {
		t.Fatal("DOCUMENTS does not hold the document")
	}
	if orig := stored[d.Offset : d.Offset+d.Length]; !bytes.HasSuffix(f.Payload, bytes.TrimLeft(orig[1:], " \n")) {
		t.Errorf("original bytes %q, payload %q", orig, f.Payload)
	}
}

// TestIngestManifestRefused: a manifest whose parts do not make the
// document it names is quarantined whole (the manifest), and nothing is
// committed: a part of another publisher, a part missing, a SHA-256 or
// size that does not match, a manifest that is no manifest.
func TestIngestManifestRefused(t *testing.T) {
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	startValidator(t, srv, testConfig(), nil)
	data := readShipment(t, "shipment.json")
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	part := func(subject, upload string, i int, b []byte) uint64 {
		m := nats.NewMsg(subject)
		m.Data = b
		m.Header.Set(envelope.DocumentUpload, upload)
		m.Header.Set(envelope.DocumentPart, document.PartHeader(i))
		ack, err := js.PublishMsg(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	half := len(data) / 2
	other := subjects.Published("mallory", dscsa.Name, subjects.DocumentType)
	tests := []struct {
		name string
		man  func() document.Manifest
		body []byte
	}{
		{"a part of another publisher", func() document.Manifest {
			return document.Manifest{Upload: "u1", SHA256: sha, Size: int64(len(data)), Parts: []uint64{part(docSubject, "u1", 1, data[:half]), part(other, "u1", 2, data[half:])}}
		}, nil},
		{"a part missing", func() document.Manifest {
			return document.Manifest{Upload: "u2", SHA256: sha, Size: int64(len(data)), Parts: []uint64{part(docSubject, "u2", 1, data[:half]), 999_999}}
		}, nil},
		{"parts out of order", func() document.Manifest {
			a, b := part(docSubject, "u3", 1, data[:half]), part(docSubject, "u3", 2, data[half:])
			return document.Manifest{Upload: "u3", SHA256: sha, Size: int64(len(data)), Parts: []uint64{b, a}}
		}, nil},
		{"another upload's part", func() document.Manifest {
			return document.Manifest{Upload: "u4", SHA256: sha, Size: int64(len(data)), Parts: []uint64{part(docSubject, "u4", 1, data[:half]), part(docSubject, "u5", 2, data[half:])}}
		}, nil},
		{"SHA-256 not the parts'", func() document.Manifest {
			return document.Manifest{Upload: "u6", SHA256: strings.Repeat("0", 64), Size: int64(len(data)), Parts: []uint64{part(docSubject, "u6", 1, data[:half]), part(docSubject, "u6", 2, data[half:])}}
		}, nil},
		{"not a manifest", nil, []byte(`{"upload":"Müller & Söhne <Großhandel>","parts":[]}`)},
		{"parts of a malformed document", func() document.Manifest {
			broken := data[:len(data)-40]
			bsum := sha256.Sum256(broken)
			return document.Manifest{Upload: "u7", SHA256: hex.EncodeToString(bsum[:]), Size: int64(len(broken)),
				Parts: []uint64{part(docSubject, "u7", 1, broken[:half]), part(docSubject, "u7", 2, broken[half:])}}
		}, nil},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.man != nil {
				man := tc.man()
				body, _ = json.Marshal(man)
			}
			m := nats.NewMsg(docSubject)
			m.Data = body
			m.Header.Set(envelope.DocumentManifest, "1")
			if _, err := js.PublishMsg(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			waitMsgs(t, js, subjects.FailuresStream, uint64(i+1))
			f := failures(t, js)[i]
			if f.Code != dscsa.MalformedDocument || !bytes.Equal(f.Payload, body) {
				t.Errorf("failure %s %q, payload verbatim %v", f.Code, f.Detail, bytes.Equal(f.Payload, body))
			}
			if tc.name == "parts of a malformed document" {
				// Assembled and kept: the record names it.
				var man document.Manifest
				_ = json.Unmarshal(body, &man)
				if d := f.Envelope.Document; d == nil || d.SHA256 != man.SHA256 || d.Length != int(man.Size) ||
					!bytes.Equal(documentObject(t, js, man.SHA256), data[:len(data)-40]) {
					t.Errorf("failure's document %+v", d)
				}
			}
		})
	}
	waitSettled(t, js)
	if n := streamMsgs(t, js, subjects.LedgerStream); n != 0 {
		t.Errorf("LEDGER %d", n)
	}
}
