package idempotency

import (
	"io/fs"
	"os"
	"testing"

	"github.com/deadletter/deadletter/schemas"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

// dscsaExtension is a DSCSA ObjectEvent as a trading partner writes one,
// with an extension of its own namespace, a quantity with a trailing zero,
// a time with microseconds and the values people write.
const dscsaExtension = `{
  "@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld", {"example": "https://ns.example.com/epcis/"}],
  "type": "ObjectEvent",
  "eventID": "urn:uuid:7d1c0e52-9a4b-4c61-b2f8-3e5d7a9c1b04",
  "eventTime": "2026-11-03T10:15:00.123456+01:00",
  "eventTimeZoneOffset": "+01:00",
  "epcList": ["urn:epc:id:sgtin:0614141.107346.2018", "https://id.gs1.org/01/00614141107346/21/2019"],
  "action": "OBSERVE",
  "bizStep": "shipping",
  "disposition": "in_transit",
  "readPoint": {"id": "urn:epc:id:sgln:0614141.00777.0"},
  "bizLocation": {"id": "urn:epc:id:sgln:0614141.00888.0"},
  "quantityList": [{"epcClass": "urn:epc:class:lgtin:0614141.107346.L%3C2%3E", "quantity": 12.50, "uom": "KGM"}],
  "example:shipper": {"example:name": "Müller & Söhne <Pharma> \"Großhandel\"", "example:contact": "陈伟"},
  "example:note": "  lot 007 & 008 — ‘Kühlkette’ > 2 °C  "
}`

// TestContentHashesPinned: the content hashes of a few events of each
// domain are those stored stores hold in IDEMPOTENCY and LEDGER, byte for
// byte, whoever derives them (the identity is a hook of domain.Spec since
// issue #41; it was a switch on DSCSA's identity in this package).
//
// How the values were made: on main at 03e6078 (before the hook), a
// throwaway test in this package printed, for each case, StoredIdentity,
// ContentHash, CheckedContentHash of the gate's envelope (the subject
// from the domain's EventType), eventhash.Digest(eventhash.LegacyID) for
// DSCSA, and HashMatches(dom, id, h, data) for the recorded identities
// "", "jcs", "cbv2-event-hash", "cbv2-event-hash+exact" and "sha256" (one
// group each, in that order) against the content hash, the canonical
// hash and the legacy digest (one digit each: 1 matches).
func TestContentHashesPinned(t *testing.T) {
	file := func(p string) []byte {
		t.Helper()
		b, err := fs.ReadFile(schemas.FS, "testdata/"+p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	xmlDoc, err := os.ReadFile("../domain/dscsa/document/testdata/shipment-2.0.xml")
	if err != nil {
		t.Fatal(err)
	}
	xml, err := document.Read(xmlDoc)
	if err != nil || len(xml.Events) < 2 {
		t.Fatalf("the XML document: %v", err)
	}
	const (
		jcsMatches   = "110 110 000 000 000"
		exactMatches = "010 010 001 100 000"
		// Bytes no JSON object: the canonical hash in the domain's identity.
		notObjectMatches = "110 110 000 110 000"
	)
	tests := []struct {
		name, dom string
		data      []byte
		// stored is StoredIdentity(dom); content ContentHash; checked
		// CheckedContentHash ("": the gate refuses the event); legacy the
		// digest of the legacy event hash ID; matches the HashMatches
		// matrix.
		stored, content, checked, legacy, matches string
	}{
		{"pharmacy Schedule II dispense, Müller & Söhne, 陈伟", "pharmacy", file("pharmacy/valid/dispense-schedule-ii-with-drug-name.json"),
			"", "d1d25fae57db52efb0e6f9d84fa8bac7d9921ca5ad2be069aa3ada997ebd4f22", "d1d25fae57db52efb0e6f9d84fa8bac7d9921ca5ad2be069aa3ada997ebd4f22", "", jcsMatches},
		{"pharmacy Schedule III adjustment", "pharmacy", file("pharmacy/valid/adjust-negative-schedule-iii.json"),
			"", "18f2e18da0483f6a474f2bd5cfbf716dd28a16de6a1a20de359ed6a37cc12d27", "18f2e18da0483f6a474f2bd5cfbf716dd28a16de6a1a20de359ed6a37cc12d27", "", jcsMatches},
		{"dscsa shipping, compact IRIs and a quantity", "dscsa", file("dscsa/valid/shipping-compact-iri-and-quantity.json"),
			"cbv2-event-hash+exact", "d028366c2a6fb02ecefc761d4de10a7705e1102214e50f1bb2425c969fed7fea", "d028366c2a6fb02ecefc761d4de10a7705e1102214e50f1bb2425c969fed7fea", "4983cd70a78c36cb2ef08280caadec48fb7bd8d02fa3bb1591f80a4121a4d951", exactMatches},
		{"dscsa receiving with an error declaration", "dscsa", file("dscsa/valid/receiving-error-declaration.json"),
			"cbv2-event-hash+exact", "9fb2025c7c12161d886afd2b6f2b1260d627feeed1d4a21b250737f81e9ce3f7", "9fb2025c7c12161d886afd2b6f2b1260d627feeed1d4a21b250737f81e9ce3f7", "79d242ed09ca38d2b50ca1517fa76115c7c57c0a0aaa6a4c8245deefc9980663", exactMatches},
		{"dscsa unpacking at an SGLN extension, microseconds", "dscsa", file("dscsa/valid/unpacking-sgln-extension.json"),
			"cbv2-event-hash+exact", "cc542d9cd548e3c65b326d767de1b82b925590f00550a9979ff0be8ba32250e8", "cc542d9cd548e3c65b326d767de1b82b925590f00550a9979ff0be8ba32250e8", "9938d3d8ad0ccdd57ec898bb3ce9bac5d582ed1ff910eb8a1e8933ba43fc190d", exactMatches},
		{"dscsa shipping without @context or eventID", "dscsa", file("dscsa/valid/shipping-without-context-and-eventid.json"),
			"cbv2-event-hash+exact", "e2019dd7b6a4a279ac9f084e387e99e2c1a679438ff77540e0fb07176ee0c4c0", "e2019dd7b6a4a279ac9f084e387e99e2c1a679438ff77540e0fb07176ee0c4c0", "843565b9ac407f18c6cfd39286852c7b5911699704d19a5958ddd38e9a9209f2", exactMatches},
		{"dscsa first event of an EPCIS 2.0 XML document", "dscsa", xml.Events[0],
			"cbv2-event-hash+exact", "b1c7ea850af9bc3eec5977eabb65cc4823975dfa1380ea4310c365dd32b95c03", "b1c7ea850af9bc3eec5977eabb65cc4823975dfa1380ea4310c365dd32b95c03", "8710eb74bd81dffb4b0cc829c55b7d9616804ebd3cec4edb64724b79feb7ce50", exactMatches},
		{"dscsa last event of an EPCIS 2.0 XML document", "dscsa", xml.Events[len(xml.Events)-1],
			"cbv2-event-hash+exact", "b7952b8e1d72352234019e324db1d8443b92c6ce0f14a889b89153812077a3be", "b7952b8e1d72352234019e324db1d8443b92c6ce0f14a889b89153812077a3be", "78f2911c915d954f344b9f90e8fc312895a9191e44a86759ae49fa4f721c6d1f", exactMatches},
		{"dscsa event with an extension naming Müller & Söhne and 陈伟", "dscsa", []byte(dscsaExtension),
			"cbv2-event-hash+exact", "8670cb74f92637613e3814f46b497cddebb4e786d07cc46afd53009cebc51647", "8670cb74f92637613e3814f46b497cddebb4e786d07cc46afd53009cebc51647", "e0a2d47860e7bea0ca8d014c539843e33013e81eabe141b5c7a5bcb70a2bfa6f", exactMatches},
		{"fsma receiving by GLN", "fsma", file("fsma/valid/receiving-gln.json"),
			"", "2a97ab6fe110a8f69ce56b63689d4127a342258ba8cd174a283989f0540264f7", "2a97ab6fe110a8f69ce56b63689d4127a342258ba8cd174a283989f0540264f7", "", jcsMatches},
		{"fsma transformation of three inputs", "fsma", file("fsma/valid/transformation-three-inputs.json"),
			"", "c624904a7bbd5fa64ad7ee106822e9ad54dd23eee12674f934bef518e253809a", "c624904a7bbd5fa64ad7ee106822e9ad54dd23eee12674f934bef518e253809a", "", jcsMatches},
		{"dscsa bytes that are no JSON", "dscsa", []byte(`{"eventID": "urn:uuid:3f4e5d6c-7b8a-4998-a7b6-c5d4e3f2a1b0", "note": "Müller & Söhne <`),
			"cbv2-event-hash+exact", "1527c4d5409465dd08e478e1f3d9e0bb4d79c19e30bdc87e00a634f6029c2305", "", "", notObjectMatches},
		{"dscsa a JSON array", "dscsa", []byte(`["Müller & Söhne", "陈伟", "<&>\""]`),
			"cbv2-event-hash+exact", "40f8b35e5fe04a9d38e5b33ecff0709fa7adc074d25fed103c40ddffd7c0dd39", "", "", notObjectMatches},
		{"an event of no registered domain", "nosuchdomain", file("pharmacy/valid/dispense-schedule-ii-with-drug-name.json"),
			"", "d1d25fae57db52efb0e6f9d84fa8bac7d9921ca5ad2be069aa3ada997ebd4f22", "", "", jcsMatches},
	}
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StoredIdentity(tt.dom); got != tt.stored {
				t.Errorf("StoredIdentity = %q, want %q", got, tt.stored)
			}
			if got := ContentHash(tt.dom, tt.data); got != tt.content {
				t.Errorf("ContentHash = %s, want %s", got, tt.content)
			}
			checked := ""
			if spec, ok := registry.Lookup(tt.dom); ok {
				if doc, err := gate.Decode(tt.data); err == nil {
					if et, err := spec.Checker.EventType(doc); err == nil {
						if env, err := g.Check(subjects.Event(tt.dom, et), tt.data); err == nil {
							checked = CheckedContentHash(env, tt.data)
						}
					}
				}
			}
			if checked != tt.checked {
				t.Errorf("CheckedContentHash = %q, want %q", checked, tt.checked)
			}
			legacy := ""
			if doc, err := gate.Decode(tt.data); err == nil && tt.dom == "dscsa" {
				legacy, _ = eventhash.Digest(eventhash.LegacyID(doc, nil))
			}
			if legacy != tt.legacy {
				t.Errorf("legacy digest = %q, want %q", legacy, tt.legacy)
			}
			if got := matchMatrix(tt.dom, tt.data, legacy); got != tt.matches {
				t.Errorf("HashMatches matrix = %q, want %q", got, tt.matches)
			}
		})
	}
}

// matchMatrix is HashMatches(dom, id, h, data) for the recorded
// identities "", "jcs", "cbv2-event-hash", "cbv2-event-hash+exact" and
// "sha256" (groups) and the hashes ContentHash, CanonicalHash and legacy
// (digits, 1: matches).
func matchMatrix(dom string, data []byte, legacy string) string {
	m := ""
	for i, id := range []string{"", "jcs", "cbv2-event-hash", "cbv2-event-hash+exact", "sha256"} {
		if i > 0 {
			m += " "
		}
		for _, h := range []string{ContentHash(dom, data), CanonicalHash(data), legacy} {
			if HashMatches(dom, id, h, data) {
				m += "1"
			} else {
				m += "0"
			}
		}
	}
	return m
}
