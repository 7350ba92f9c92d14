package auditor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestDocumentPageWithoutQuarantinedEvents: a document none of whose
// events was quarantined (the live view knows none of it) still has its
// page: audit.list by its SHA-256 finds it in DOCUMENTS and its message in
// EVENTS, whole or the manifest of one sent in parts, among other
// documents' messages, and lists its events by position with their
// outcomes (pending here: no validator runs); a SHA-256
// DOCUMENTS does not keep has none.
func TestDocumentPageWithoutQuarantinedEvents(t *testing.T) {
	e := newEnv(t)
	doc := func(id, note string) []byte {
		return []byte(`{"@context":["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"],"type":"EPCISDocument","schemaVersion":"2.0",` +
			`"creationDate":"2026-03-02T09:00:00Z","id":"` + id + `","epcisBody":{"eventList":[` +
			`{"type":"ObjectEvent","eventTime":"2026-03-02T08:00:00-05:00","eventTimeZoneOffset":"-05:00","epcList":["urn:epc:id:sscc:0312345.0390000001"],` +
			`"action":"OBSERVE","bizStep":"shipping","disposition":"in_transit","example:note":"` + note + `"},` +
			`{"type":"ObjectEvent","eventTime":"2026-03-02T08:00:05-05:00","eventTimeZoneOffset":"-05:00","epcList":["urn:epc:id:sscc:0312345.0390000002"],` +
			`"action":"OBSERVE","bizStep":"shipping","disposition":"in_transit"}]}}`)
	}
	whole := doc("DESADV-1 Müller & Söhne <Großhandel>", "陈伟药房 \\\"Filiale 3\\\"")
	parts := doc("DESADV-2 O'Brien & Co.", strings.Repeat("é<&>陈伟 ", 90_000)) // more than a message's MiB
	other := doc("DESADV-3 another partner", "Pharmacie Saint-Étienne")
	sha := func(b []byte) string {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	ctx := t.Context()
	send := func(subject string, b []byte) {
		t.Helper()
		if _, err := upload.Publish(ctx, e.js, subject, bytes.NewReader(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	send(subjects.Event("dscsa", subjects.DocumentType), other)
	send(subjects.Event("dscsa", subjects.DocumentType), whole)
	send(subjects.Published("publisher-0312345", "dscsa", subjects.DocumentType), parts)
	send(subjects.Published("publisher-0312345", "dscsa", subjects.DocumentType), other)
	// The validator keeps each document it reads in DOCUMENTS.
	for _, b := range [][]byte{whole, parts, other} {
		if _, err := streams.PutDocument(ctx, e.js, sha(b), bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	e.startAuditor(t, testConfig(), nil)

	for _, tc := range []struct {
		name string
		data []byte
		id   string
	}{
		{"whole", whole, "DESADV-1 Müller & Söhne <Großhandel>"},
		{"in parts", parts, "DESADV-2 O'Brien & Co."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l api.ListReply
			request(t, e.nc, api.AuditList, api.ListRequest{Document: sha(tc.data)}, &l)
			d := l.Document
			if d == nil {
				t.Fatal("no document page")
			}
			if d.Document.SHA256 != sha(tc.data) || d.Document.ID != tc.id || d.Document.Format != "json" || d.Document.Events != 2 || len(d.Events) != 2 {
				t.Fatalf("%+v with %d events, want %q's 2", d.Document, len(d.Events), tc.id)
			}
			// No validator ran: each event is pending, in its place.
			for i, ev := range d.Events {
				if ev.Index != i || ev.Outcome != api.ReconcilePending || ev.ErrorCode != "" {
					t.Errorf("event %+v at %d, want pending", ev, i)
				}
			}
		})
	}
	t.Run("not kept", func(t *testing.T) {
		var l api.ListReply
		request(t, e.nc, api.AuditList, api.ListRequest{Document: strings.Repeat("0b", 32)}, &l)
		if l.Document != nil {
			t.Fatalf("%+v, want none", l.Document)
		}
	})
}
