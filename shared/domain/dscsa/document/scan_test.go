package document_test

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
)

// TestScanProvenance: every event of the shipment documents comes with its
// index and the offset and length of its exact original bytes, and the
// document's identity (SHA-256, SBDH sender, receiver, instance id,
// creation date).
func TestScanProvenance(t *testing.T) {
	created := time.Date(2024, 3, 12, 14, 20, 0, 0, time.UTC)
	tests := []struct {
		name, file, format string
		sender, receiver   string
		id                 string
	}{
		{"JSON", "shipment.json", document.FormatJSON, "urn:epc:id:pgln:0614141.00000", "", ""},
		{"EPCIS 1.2 XML", "shipment-1.2.xml", document.FormatXML, "0614141000005", "", ""},
		{"EPCIS 2.0 XML", "shipment-2.0.xml", document.FormatXML, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			var evs []document.Event
			info, err := document.Scan(data, func(ev document.Event) error {
				evs = append(evs, ev)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if info.Format != tt.format || info.Count != 7 || len(evs) != 7 || len(info.SHA256) != 64 {
				t.Fatalf("info %+v, %d events", info, len(evs))
			}
			if tt.sender != "" && info.Sender != tt.sender {
				t.Errorf("sender %q, want %q", info.Sender, tt.sender)
			}
			if !info.Created.Equal(created) {
				t.Errorf("created %v, want %v", info.Created, created)
			}
			checkOffsets(t, data, info.Format, evs)
		})
	}
}

// checkOffsets: each event's bytes are where its offset says, in order.
func checkOffsets(t *testing.T, data []byte, format string, evs []document.Event) {
	t.Helper()
	end := 0
	for i, ev := range evs {
		if ev.Index != i || ev.Offset < end || ev.Length <= 0 || ev.Offset+ev.Length > len(data) {
			t.Fatalf("event %d: index %d offset %d length %d (previous end %d, document %d bytes)", i, ev.Index, ev.Offset, ev.Length, end, len(data))
		}
		end = ev.Offset + ev.Length
		orig := data[ev.Offset:end]
		switch format {
		case document.FormatJSON:
			if orig[0] == '{' && !bytes.HasSuffix(ev.Data, bytes.TrimLeft(orig[1:], " \t\r\n")) || orig[0] != '{' && !bytes.Equal(orig, ev.Data) {
				t.Errorf("event %d: original bytes %q are not the event's %q", i, orig, ev.Data)
			}
		case document.FormatXML:
			if orig[0] != '<' || orig[len(orig)-1] != '>' {
				t.Errorf("event %d: original bytes %q are not an element", i, orig)
			}
		}
	}
}

// TestScanHeader: the identity the SBDH gives, in each binding, with the
// trade's text (escaped in XML) read back as text.
func TestScanHeader(t *testing.T) {
	const sender, receiver = "urn:epc:id:pgln:4012345.00000", "Müller & Söhne <Großhandel>"
	xmlDoc := `<?xml version="1.0" encoding="UTF-8"?>
<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:2" xmlns:sbdh="http://www.unece.org/cefact/namespaces/StandardBusinessDocumentHeader" creationDate="2024-05-01T10:00:00+02:00">
 <EPCISHeader><sbdh:StandardBusinessDocumentHeader>
  <sbdh:Sender><sbdh:Identifier Authority="SGLN">` + sender + `</sbdh:Identifier></sbdh:Sender>
  <sbdh:Receiver><sbdh:Identifier Authority="SGLN">Müller &amp; Söhne &lt;Großhandel&gt;</sbdh:Identifier></sbdh:Receiver>
  <sbdh:DocumentIdentification><sbdh:InstanceIdentifier>SHIP-4812 "Pharmacie Saint-Étienne"</sbdh:InstanceIdentifier>
   <sbdh:CreationDateAndTime>2024-05-02T00:00:00Z</sbdh:CreationDateAndTime></sbdh:DocumentIdentification>
 </sbdh:StandardBusinessDocumentHeader></EPCISHeader>
 <EPCISBody><EventList><ObjectEvent><action>ADD</action></ObjectEvent><extension><TransformationEvent/></extension></EventList></EPCISBody>
</epcis:EPCISDocument>`
	jsonDoc := `{"type":"EPCISDocument","creationDate":"2024-05-01T08:00:00Z","epcisHeader":{"sbdh:StandardBusinessDocumentHeader":{
	  "sbdh:Sender":[{"sbdh:Identifier":{"@Authority":"SGLN","#text":"` + sender + `"}}],
	  "sbdh:Receiver":{"sbdh:Identifier":"Müller & Söhne <Großhandel>"},
	  "sbdh:DocumentIdentification":{"sbdh:InstanceIdentifier":"SHIP-4812 \"Pharmacie Saint-Étienne\""}}},
	 "epcisBody":{"eventList":[{"type":"ObjectEvent"}, 7]}}`
	for _, tt := range []struct{ name, doc string }{{"XML", xmlDoc}, {"JSON", jsonDoc}} {
		t.Run(tt.name, func(t *testing.T) {
			var evs []document.Event
			info, err := document.Scan([]byte(tt.doc), func(ev document.Event) error { evs = append(evs, ev); return nil })
			if err != nil {
				t.Fatal(err)
			}
			want := document.Info{Format: strings.ToLower(tt.name), SHA256: info.SHA256, ID: `SHIP-4812 "Pharmacie Saint-Étienne"`, Sender: sender, Receiver: receiver,
				Created: time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC), Count: 2}
			if *info != want {
				t.Errorf("info\n %+v\nwant\n %+v", *info, want)
			}
			checkOffsets(t, []byte(tt.doc), info.Format, evs)
		})
	}
}

// TestScanRefusesBeforeEvents: a document broken after its first events
// hands none over; an error of the callback stops the scan and is
// returned as it is.
func TestScanRefusesBeforeEvents(t *testing.T) {
	var events strings.Builder
	for i := range 50 {
		fmt.Fprintf(&events, `{"type":"ObjectEvent","eventID":"urn:uuid:%d"},`, i)
	}
	broken := `{"type":"EPCISDocument","epcisBody":{"eventList":[` + events.String() + `{"type":`
	called := 0
	if _, err := document.Scan([]byte(broken), func(document.Event) error { called++; return nil }); codes.Of(err) != dscsa.MalformedDocument || called != 0 {
		t.Fatalf("err %v, %d events handed over", err, called)
	}
	whole := `{"type":"EPCISDocument","epcisBody":{"eventList":[` + strings.TrimSuffix(events.String(), ",") + `]}}`
	stop := errors.New("stop")
	called = 0
	if _, err := document.Scan([]byte(whole), func(document.Event) error { called++; return stop }); !errors.Is(err, stop) || called != 1 {
		t.Fatalf("err %v after %d events", err, called)
	}
}

// TestScanSourceStreams: a document read as a stream in small pieces
// gives the same identity and events as in memory; bytes that are not
// UTF-8, split across reads, are refused as such.
func TestScanSourceStreams(t *testing.T) {
	for _, file := range []string{"shipment.json", "shipment-1.2.xml", "shipment-2.0.xml"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			data = append([]byte("\xef\xbb\xbf \n"), data...)
			if !bytes.HasPrefix(bytes.TrimSpace(data[3:]), []byte("<")) {
				data = data[3:] // JSON has no byte-order mark
			}
			want, err := document.Read(data)
			if err != nil {
				t.Fatal(err)
			}
			var got []document.Event
			info, err := document.ScanSource(oneByte(data), func(ev document.Event) error { got = append(got, ev); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if info.SHA256 != want.SHA256 || info.Count != len(want.Events) || len(got) != len(want.Events) {
				t.Fatalf("streamed %+v, %d events; in memory %+v", info, len(got), want.Info)
			}
			for i := range got {
				if !bytes.Equal(got[i].Data, want.Events[i]) {
					t.Errorf("event %d differs", i)
				}
			}
			checkOffsets(t, data, info.Format, got)
		})
	}
	bad := []byte("{\"type\":\"EPCISDocument\",\"x\":\"M\xc3\xbcller \xe2\x82\"}")
	if _, err := document.ScanSource(oneByte(bad), func(document.Event) error { return nil }); codes.DetailOf(err) != "document is not valid UTF-8" {
		t.Errorf("split invalid UTF-8: %v", err)
	}
}

// oneByte is a Source that reads one byte at a time.
func oneByte(data []byte) document.Source {
	return func() (io.Reader, error) { return iotest.OneByteReader(bytes.NewReader(data)), nil }
}
