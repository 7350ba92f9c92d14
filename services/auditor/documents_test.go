package auditor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestVerifyDocuments: audit.verify re-hashes every EPCIS document kept
// in DOCUMENTS and checks that the document each record names is there.
// The admin (no permissions, a break-glass credential) overwriting or
// deleting an object, or a record naming a document never kept, is a
// document problem; an intact store verifies.
func TestVerifyDocuments(t *testing.T) {
	doc := []byte(`{"type":"EPCISDocument","schemaVersion":"2.0","sender":"Müller & Söhne <Großhandel>",` +
		`"receiver":"Pharmacie Saint-Étienne","epcisBody":{"eventList":[{"type":"ObjectEvent","bizStep":"shipping",` +
		`"epcList":["urn:epc:id:sgtin:0614141.107346.2017"],"note":"` + string(bytes.Repeat([]byte("é<&>\""), 40_000)) + `"}]}}`)
	sum := sha256.Sum256(doc)
	sha := hex.EncodeToString(sum[:])
	altered := bytes.Replace(doc, []byte("Saint-Étienne"), []byte("Saint-Etienne"), 1)
	for _, tc := range []struct {
		name   string
		kept   bool // the validator kept the document
		tamper func(t *testing.T, obs jetstream.ObjectStore)
		want   int // document problems
	}{
		{name: "intact", kept: true},
		{name: "overwritten by the admin", kept: true, want: 1, tamper: func(t *testing.T, obs jetstream.ObjectStore) {
			if _, err := obs.PutBytes(t.Context(), sha, altered); err != nil {
				t.Fatal(err)
			}
		}},
		// The deleted object, and the record that names it.
		{name: "deleted by the admin", kept: true, want: 2, tamper: func(t *testing.T, obs jetstream.ObjectStore) {
			if err := obs.Delete(t.Context(), sha); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "never kept", want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			obs, err := e.js.ObjectStore(t.Context(), subjects.DocumentsBucket)
			if err != nil {
				t.Fatal(err)
			}
			if tc.kept {
				if _, err := obs.PutBytes(t.Context(), sha, doc); err != nil {
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
			if tc.tamper != nil {
				tc.tamper(t, obs)
			}
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
			}
			if got != tc.want || rep.ProblemCount != tc.want || rep.OK != (tc.want == 0) {
				t.Fatalf("%d document problems of %d, OK %v; want %d: %+v", got, rep.ProblemCount, rep.OK, tc.want, rep.Problems)
			}
			if rep.Documents == nil || rep.Documents.Named != 1 {
				t.Fatalf("documents %+v, want the one the record names checked", rep.Documents)
			}
			if tc.kept && tc.name != "deleted by the admin" && (rep.Documents.Objects != 1 || rep.Documents.Bytes == 0) {
				t.Fatalf("documents %+v, want the one object re-hashed", rep.Documents)
			}
		})
	}
}
