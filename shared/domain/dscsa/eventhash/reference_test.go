package eventhash_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/eventhash"
)

// decode reads JSON with numbers as json.Number, as the gate does.
func decode(tb testing.TB, data []byte) map[string]any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		tb.Fatal(err)
	}
	return doc
}

// eventList returns a document's events (an EPCISDocument's eventList, a
// query document's resultsBody.eventList, or a single event).
func eventList(doc map[string]any) []any {
	body, _ := doc["epcisBody"].(map[string]any)
	if l, ok := body["eventList"].([]any); ok {
		return l
	}
	if qr, ok := body["queryResults"].(map[string]any); ok {
		rb, _ := qr["resultsBody"].(map[string]any)
		l, _ := rb["eventList"].([]any)
		return l
	}
	if e, ok := body["event"]; ok {
		return []any{e}
	}
	return nil
}

// knownDeviations are the published vectors this package does not
// reproduce, with the reason (the reference implementation's behaviour
// differs from the standard's text there, or the feature is outside what
// a DSCSA event carries).
var knownDeviations = map[string]string{
	// The reference implementation drops the fields a document lists in
	// a repository-specific "ignoreFields" member; CBV 2.0 has no such
	// rule, and a single event carries no document to list them.
	"epcisDocHavingEventWithIgnoreFields":      "repository-specific ignoreFields (not in CBV 2.0)",
	"epcisQueryDocHavingEventWithIgnoreFields": "repository-specific ignoreFields (not in CBV 2.0)",
}

// TestReferenceVectors: the ID of every event of the published example
// documents equals the hash the algorithm's authors published for it.
func TestReferenceVectors(t *testing.T) {
	files, err := filepath.Glob("testdata/reference/*.jsonld")
	if err != nil || len(files) < 15 {
		t.Fatalf("%d example files (%v)", len(files), err)
	}
	matched := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonld")
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(f, ".jsonld") + ".hashes")
			if err != nil {
				t.Fatalf("no expected hashes: %v", err)
			}
			wantIDs := strings.Fields(string(want))
			var wantPre []string
			if b, err := os.ReadFile(strings.TrimSuffix(f, ".jsonld") + ".prehashes"); err == nil {
				wantPre = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			doc := decode(t, data)
			events := eventList(doc)
			if len(events) != len(wantIDs) {
				t.Fatalf("%d events, %d expected hashes", len(events), len(wantIDs))
			}
			for i, e := range events {
				ev, _ := e.(map[string]any)
				got := eventhash.ID(ev, doc["@context"])
				if got == wantIDs[i] {
					matched++
					continue
				}
				if why, ok := knownDeviations[name]; ok {
					t.Logf("event %d: known deviation: %s", i, why)
					continue
				}
				pre := eventhash.PreHash(ev, doc["@context"])
				if i < len(wantPre) {
					t.Errorf("event %d: ID %s, want %s\n got pre-hash %s\nwant pre-hash %s", i, got, wantIDs[i], pre, wantPre[i])
				} else {
					t.Errorf("event %d: ID %s, want %s\n got pre-hash %s", i, got, wantIDs[i], pre)
				}
			}
		})
	}
	t.Logf("%d published event hash IDs reproduced", matched)
}

// TestDifferential: every event of documents written for this test as the
// trade sends them (a distributor's shipment in JSON with commissioning,
// packing, shipping, receiving, sensor data, a transformation, an
// association and a transaction; a wholesaler's EPCIS 2.0 XML with sensor
// attributes, xsi:type and xsi:nil; a pharmacy's EPCIS 1.2 XML with an
// SBDH, a bare DOCTYPE and extension wrappers; a query result), read as the
// validator reads them (package document), has the event hash ID the
// reference implementation computes for it (testdata/differential/README.md
// says how the expected values were made).
func TestDifferential(t *testing.T) {
	files, err := filepath.Glob("testdata/differential/*")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		ext := filepath.Ext(f)
		if ext != ".jsonld" && ext != ".xml" {
			continue
		}
		base := strings.TrimSuffix(f, ext)
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, err := os.ReadFile(base + ".hashes")
			if err != nil {
				t.Fatalf("no expected hashes: %v", err)
			}
			wantIDs := strings.Fields(string(want))
			var wantPre []string
			if b, err := os.ReadFile(base + ".prehashes"); err == nil {
				wantPre = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := document.Read(data)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(doc.Events) != len(wantIDs) {
				t.Fatalf("%d events, %d expected hashes", len(doc.Events), len(wantIDs))
			}
			for i, raw := range doc.Events {
				total++
				ev := decode(t, raw)
				if got := eventhash.ID(ev, nil); got != wantIDs[i] {
					pre := ""
					if i < len(wantPre) {
						pre = wantPre[i]
					}
					t.Errorf("event %d: ID %s, want %s\n got pre-hash %s\nwant pre-hash %s", i, got, wantIDs[i], eventhash.PreHash(ev, nil), pre)
				}
			}
		})
	}
	if total < 15 {
		t.Fatalf("%d events compared, want the 15 of testdata/differential", total)
	}
}

func tryDecode(data []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, false
	}
	return doc, true
}
