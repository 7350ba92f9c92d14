package auditor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
)

// TestVerifyDocuments: audit.verify reads every EPCIS document kept in
// DOCUMENTS whole and checks that the document each record names is
// there. DOCUMENTS is write-once (no overwrite, no delete, one manifest
// per document, whoever writes), so what is left to forge is a manifest
// written before the real one, or chunks and a manifest of a document
// nobody kept: each forged input is one problem per document (and one for
// the record naming it when its manifest is absent or unreadable), its
// fault named, and verify goes on with the rest, never failing as a whole.
func TestVerifyDocuments(t *testing.T) {
	doc := []byte(`{"type":"EPCISDocument","schemaVersion":"2.0","sender":"Müller & Söhne <Großhandel>",` +
		`"receiver":"Pharmacie Saint-Étienne","epcisBody":{"eventList":[{"type":"ObjectEvent","bizStep":"shipping",` +
		`"epcList":["urn:epc:id:sgtin:0614141.107346.2017"],"note":"` + string(bytes.Repeat([]byte("é<&>\"陈伟"), 40_000)) + `"}]}}`)
	sum := sha256.Sum256(doc)
	sha := hex.EncodeToString(sum[:])
	altered := bytes.Replace(doc, []byte("Saint-Étienne"), []byte("Saint-Etienne"), 1)
	other := []byte(`{"type":"EPCISDocument","note":"another partner's document, Müller & Söhne"}`)
	osum := sha256.Sum256(other)
	otherSHA := hex.EncodeToString(osum[:])
	manifest := func(name string, size int, upload string, runs [][2]uint64) []byte {
		b, _ := json.Marshal(map[string]any{"version": 1, "sha256": name, "size": size, "chunk_size": streams.DocumentChunkSize,
			"upload": upload, "chunks": runs})
		return b
	}
	// chunks publishes b as chunks of upload under name's subjects and
	// returns their sequences as one run.
	chunks := func(t *testing.T, js jetstream.JetStream, name, upload string, b []byte) [][2]uint64 {
		var runs [][2]uint64
		for i := 0; len(b) > 0; i++ {
			n := min(len(b), streams.DocumentChunkSize)
			ack, err := js.Publish(t.Context(), streams.DocumentChunkSubject(name, upload, i), b[:n])
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, [2]uint64{ack.Sequence, 1})
			b = b[n:]
		}
		return runs
	}
	forge := func(t *testing.T, js jetstream.JetStream, name string, data []byte) {
		if _, err := js.Publish(t.Context(), streams.DocumentManifestSubject(name), data); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		kept    bool // the validator kept the document
		tamper  func(t *testing.T, js jetstream.JetStream)
		want    int    // document problems
		fault   string // named in every problem
		objects int    // documents read whole and right
	}{
		{name: "intact", kept: true, objects: 1},
		{name: "never kept", want: 1},
		{name: "a garbage manifest under its name", want: 2, fault: "manifest_unreadable", tamper: func(t *testing.T, js jetstream.JetStream) {
			forge(t, js, sha, []byte(`{"sha256": <Müller & Söhne>`))
		}},
		{name: "a manifest naming absent chunks", want: 1, fault: "chunk_missing", tamper: func(t *testing.T, js jetstream.JetStream) {
			forge(t, js, sha, manifest(sha, len(doc), "forged", [][2]uint64{{900_000, uint64((len(doc) + streams.DocumentChunkSize - 1) / streams.DocumentChunkSize)}}))
		}},
		{name: "a manifest naming another document's chunks", want: 1, fault: "chunk_foreign", tamper: func(t *testing.T, js jetstream.JetStream) {
			forge(t, js, sha, manifest(sha, len(doc), "forged", chunks(t, js, otherSHA, "forged", append(other, altered...))))
		}},
		// The chunks are the name's own, the bytes altered (quantity 500 → 900).
		{name: "altered bytes under its name", want: 1, fault: "hash_mismatch", tamper: func(t *testing.T, js jetstream.JetStream) {
			forge(t, js, sha, manifest(sha, len(altered), "forged", chunks(t, js, sha, "forged", altered)))
		}},
		// E2: the real document kept, and forged manifests of documents
		// nobody named beside it: each reported, the real one read.
		{name: "forged manifests beside a kept document", kept: true, want: 3, objects: 1, tamper: func(t *testing.T, js jetstream.JetStream) {
			forge(t, js, otherSHA, manifest(otherSHA, len(other), "forged", [][2]uint64{{1, 1}}))
			forge(t, js, hex.EncodeToString(make([]byte, 32)), []byte("null"))
			forge(t, js, "Müller-Söhne", manifest("Müller-Söhne", 5, "x", [][2]uint64{{1, 1}}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.tamper != nil {
				tc.tamper(t, e.js)
			}
			if tc.kept {
				if _, err := streams.PutDocument(t.Context(), e.js, sha, bytes.NewReader(doc)); err != nil {
					t.Fatal(err)
				}
			}
			r := first(t, fixture{id: fmt.Sprintf("dscsa_%032d", 1), domain: dscsa.Name, class: record.ClassValidation,
				code: dscsa.InvalidGTIN, firstSeen: t0, quarantined: t0})
			r.Document = &envelope.Document{ID: "urn:uuid:6d1d8e0c-Müller & Söhne", SHA256: sha, Format: "json", Count: 1,
				Offset: 120, Length: len(doc) - 123}
			r.AuditHash = ""
			if err := record.Seal(&r); err != nil {
				t.Fatal(err)
			}
			e.publish(t, r)
			a := e.startAuditor(t, testConfig(), nil)
			rep, err := a.Verify(t.Context(), api.VerifyRequest{})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, p := range rep.Problems {
				if p.Kind == api.ProblemDocument {
					got++
				}
				if tc.fault != "" && !strings.Contains(p.Detail, tc.fault) && !strings.Contains(p.Detail, "its manifest is wrong") {
					t.Errorf("a problem that does not name the fault %s: %s", tc.fault, p.Detail)
				}
				if strings.Contains(p.Detail, "Saint-") {
					t.Errorf("a problem carries the document's bytes: %s", p.Detail)
				}
			}
			if got != tc.want || rep.ProblemCount != tc.want || rep.OK != (tc.want == 0) {
				t.Fatalf("%d document problems of %d, OK %v; want %d: %+v", got, rep.ProblemCount, rep.OK, tc.want, rep.Problems)
			}
			if rep.Documents == nil || rep.Documents.Named != 1 || rep.Documents.Objects != tc.objects {
				t.Fatalf("documents %+v, want the one the record names checked, %d read whole", rep.Documents, tc.objects)
			}
		})
	}
}
