package auditor

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// TestGroupsByDocument: audit.groups by document gives one group per
// EPCIS document that quarantined events were read from (its id, sender,
// receiver, event count), counting its events open and resolved and by
// code, with open samples; events not read from a document are left out;
// the fingerprint grouping is unchanged.
func TestGroupsByDocument(t *testing.T) {
	e := newEnv(t)
	docA := &envelope.Document{ID: "urn:uuid:SHIP-4812 \"Müller & Söhne <Großhandel>\"", SHA256: strings.Repeat("ab", 32), Format: "xml", Count: 10000,
		Sender: "urn:epc:id:sgln:4012345.00000.0", Receiver: "Pharmacie Saint-Étienne & Fils", Created: "2026-03-14T15:42:10Z", Stream: "EVENTS", Seq: 9}
	docB := &envelope.Document{ID: strings.Repeat("cd", 32), SHA256: strings.Repeat("cd", 32), Format: "json", Count: 3, Stream: "EVENTS", Seq: 10}
	store := func(n int, doc *envelope.Document, index int, code codes.Code, resolve bool) string {
		f := fixture{id: "dscsa_" + strings.Repeat("0", 31) + string(rune('a'+n)), domain: "dscsa", class: record.ClassValidation, code: code,
			party: "urn:epc:id:sgln:4012345.00000.0", firstSeen: t0.Add(time.Duration(n) * time.Minute), quarantined: t0.Add(time.Duration(n) * time.Minute)}
		r := record.FromFailure(record.Failure{Class: f.class, Code: f.code, Detail: "rule failed", Domain: f.domain,
			Subject: "events.dscsa.document", Stream: "EVENTS", Seq: uint64(n + 1), Deliveries: 1, Published: f.firstSeen, Payload: []byte(`{}`),
			Envelope: &envelope.Envelope{Domain: "dscsa", EventType: "shipping", IdempotencyKey: f.id, PartyID: f.party, Document: docAt(doc, index)},
			FailedAt: f.quarantined}, f.quarantined)
		if err := record.Seal(&r); err != nil {
			t.Fatal(err)
		}
		e.publish(t, r)
		if resolve {
			e.publish(t, next(t, r, record.KindResolved, f.quarantined.Add(time.Second)))
		}
		return r.DLQID
	}
	a1 := store(0, docA, 4811, codes.SchemaValidation, false)
	a2 := store(1, docA, 17, "INVALID_GTIN", false)
	store(2, docA, 18, "INVALID_GTIN", true)
	b1 := store(3, docB, 0, codes.SchemaValidation, false)
	store(4, nil, 0, codes.SchemaValidation, false) // not from a document
	e.startAuditor(t, testConfig(), nil)

	var rep api.GroupsReply
	request(t, e.nc, api.AuditGroups, api.GroupsRequest{By: api.GroupByDocument}, &rep)
	if len(rep.Groups) != 2 {
		t.Fatalf("%d groups, want 2: %+v", len(rep.Groups), rep.Groups)
	}
	ga, gb := rep.Groups[0], rep.Groups[1]
	for _, tc := range []struct {
		name              string
		g                 api.Group
		doc               *envelope.Document
		total, open       int
		byCode            map[string]int
		samples           []string
		firstSeen, lastOf time.Time
	}{
		{"the document of three", ga, docA, 3, 2, map[string]int{string(codes.SchemaValidation): 1, "INVALID_GTIN": 2}, []string{a2, a1}, t0, t0.Add(2 * time.Minute)},
		{"the document of one", gb, docB, 1, 1, map[string]int{string(codes.SchemaValidation): 1}, []string{b1}, t0.Add(3 * time.Minute), t0.Add(3 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			d := g.Document
			if d == nil || d.ID != tc.doc.ID || d.SHA256 != tc.doc.SHA256 || d.Sender != tc.doc.Sender || d.Receiver != tc.doc.Receiver ||
				d.Events != tc.doc.Count || d.Created != tc.doc.Created || d.Format != tc.doc.Format {
				t.Errorf("document %+v, want %+v", d, tc.doc)
			}
			if g.Fingerprint != "document:"+tc.doc.SHA256 || g.Domain != "dscsa" || g.Total != tc.total || g.Open != tc.open || !maps.Equal(g.ByCode, tc.byCode) {
				t.Errorf("group %+v", g)
			}
			if strings.Join(g.Samples, ",") != strings.Join(tc.samples, ",") || !g.FirstSeen.Equal(tc.firstSeen) || !g.LastSeen.Equal(tc.lastOf) {
				t.Errorf("samples %v, first %v, last %v", g.Samples, g.FirstSeen, g.LastSeen)
			}
		})
	}
	t.Run("other domain", func(t *testing.T) {
		var rep api.GroupsReply
		request(t, e.nc, api.AuditGroups, api.GroupsRequest{By: api.GroupByDocument, Domain: "pharmacy"}, &rep)
		if len(rep.Groups) != 0 {
			t.Errorf("%+v", rep.Groups)
		}
	})
	t.Run("by fingerprint unchanged", func(t *testing.T) {
		var rep api.GroupsReply
		request(t, e.nc, api.AuditGroups, api.GroupsRequest{}, &rep)
		total := 0
		for _, g := range rep.Groups {
			total += g.Total
			if g.Document != nil || g.ByCode != nil {
				t.Errorf("a fingerprint group with a document: %+v", g)
			}
		}
		if total != 5 {
			t.Errorf("%d events in the fingerprint groups, want 5", total)
		}
	})
}

// docAt is doc with the event's index (nil stays nil).
func docAt(doc *envelope.Document, index int) *envelope.Document {
	if doc == nil {
		return nil
	}
	d := *doc
	d.Index, d.Offset, d.Length = index, 100*index, 90
	return &d
}
