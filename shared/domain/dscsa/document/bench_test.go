package document_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/gate"
)

// copies is the events of each benchmark document.
const copies = 100

// replicate returns the document in file with its event at index repeated
// copies times in place of its event list's contents, and that event as
// the gate sees it.
func replicate(b *testing.B, file string, index int) ([]byte, []byte) {
	b.Helper()
	data, err := os.ReadFile("testdata/" + file)
	if err != nil {
		b.Fatal(err)
	}
	var evs []document.Event
	info, err := document.Scan(data, func(ev document.Event) error { evs = append(evs, ev); return nil })
	if err != nil {
		b.Fatal(err)
	}
	sep := []byte("\n")
	if info.Format == document.FormatJSON {
		sep = []byte(",\n")
	}
	one := data[evs[index].Offset : evs[index].Offset+evs[index].Length]
	last := evs[len(evs)-1]
	var doc bytes.Buffer
	doc.Write(data[:evs[0].Offset])
	doc.Write(bytes.Join(bytes.SplitN(bytes.Repeat(append(bytes.Clone(one), 0), copies), []byte{0}, copies+1)[:copies], sep))
	doc.Write(data[last.Offset+last.Length:])
	return doc.Bytes(), evs[index].Data
}

// BenchmarkGate is the gate's cost per DSCSA event: "event" the gate alone
// on one event published by itself (before documents), "document" an
// event read from a document of 100 (the reader's share, XML's mapping
// included) and checked (after). ns/event and allocs/event are per event.
func BenchmarkGate(b *testing.B) {
	g, err := gate.New(0)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		index      int
	}{
		{"ObjectEvent/JSON", "shipment.json", 0},
		{"ObjectEvent/XML", "shipment-1.2.xml", 0},
		{"AggregationEvent/JSON", "shipment.json", 1},
		{"AggregationEvent/XML", "shipment-1.2.xml", 1},
	} {
		doc, ev := replicate(b, tc.file, tc.index)
		subject := eventSubjectOf(b, ev)
		b.Run(tc.name+"/event", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Check(subject, ev); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/document", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if _, err := document.Scan(doc, func(e document.Event) error {
					n++
					_, err := g.Check(subject, e.Data)
					return err
				}); err != nil || n != copies {
					b.Fatalf("%d events: %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*copies), "ns/event")
		})
	}
}

func eventSubjectOf(b *testing.B, ev []byte) string {
	b.Helper()
	m, err := gate.Decode(ev)
	if err != nil {
		b.Fatal(err)
	}
	typ, err := (dscsa.Checker{}).EventType(m)
	if err != nil {
		b.Fatal(err)
	}
	return "events.dscsa." + typ
}
