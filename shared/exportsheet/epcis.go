package exportsheet

import (
	"bufio"
	"encoding/json"
	"io"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
)

// EPCISContext is the JSON-LD context of the EPCIS documents EPCISBuilder
// writes.
const EPCISContext = "https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"

// EPCISBuilder collects the DSCSA events of exported chains, to write them
// as one EPCIS 2.0 JSON document (WriteEPCIS) that GS1's EPCIS 2.0 JSON
// Schema accepts: a quarantined shipment sent back to its trading partner
// after review. Each event is its chain's effective payload (the latest
// correction, else the original) in the forms EPCIS 2.0 JSON requires: an
// event read from EPCIS 1.2 XML has its CBV 1.2 URNs
// (urn:epcglobal:cbv:bizstep:shipping, disp:, btt:, sdt:, er:) written as
// the bare CBV words (shipping, in_transit, po, owning_party,
// incorrect_data), sensor types as GS1 web vocabulary words (Temperature),
// XML attribute text that is a number or boolean as one; nothing else
// changes, and an event already in those forms is written byte for byte
// as stored. An event that came from a document carries the document's
// @context (spliced in by the reader), one published alone its own. A
// chain of another domain, or whose payload is no JSON event object (a
// whole document that could not be read, a malformed event), is left out
// and counted in Skipped; an event that breaks a rule of the EPCIS 2.0
// JSON Schema even so (a misspelled bizStep, an identifier that is no URI)
// is left out and listed in Refused, with the code of what fails.
type EPCISBuilder struct {
	events [][]byte
	conv   *epcis20
	// Originals are the original events of the chains written, in order:
	// what the partner sent, for the export's originals beside the
	// document.
	Originals []Original
	// Skipped counts the chains left out as no DSCSA event.
	Skipped int
	// Refused are the DSCSA events left out because they cannot be
	// written as EPCIS 2.0 JSON, in the order added.
	Refused []Refusal
}

// Refusal is a chain whose event EPCISBuilder left out of the document:
// Err wraps ErrNotEPCIS20, carries the code of what fails (codes.Of) and
// names the member, never its value.
type Refusal struct {
	DLQID string
	Err   error
}

// Original is the original of one exported DSCSA chain: record 0's
// payload, byte for byte as stored, and, for an event read from an EPCIS
// document, that document's provenance (its exact original bytes, in XML
// when the document was, are in DOCUMENTS: audit.get gives them with a
// payload read, api.GetReply.DocumentBytes).
type Original struct {
	DLQID    string
	Payload  []byte
	Document *envelope.Document
}

// Add adds one chain's event.
func (b *EPCISBuilder) Add(c api.ExportChain) {
	if c.Domain != dscsa.Name {
		b.Skipped++
		return
	}
	var recs []record.Record
	for _, er := range c.Records {
		r, err := record.Parse(er.Record)
		if err != nil {
			continue // verify-export reports it
		}
		recs = append(recs, r)
	}
	st, _ := record.Fold(recs)
	if st.Payload == nil {
		b.Skipped++
		return
	}
	data, err := st.Payload.Bytes()
	if err != nil {
		b.Skipped++
		return
	}
	doc, err := gate.Decode(data)
	if err != nil {
		b.Skipped++
		return
	}
	if t, _ := doc["type"].(string); t == "" || t == "EPCISDocument" || t == "EPCISQueryDocument" {
		b.Skipped++
		return
	}
	if b.conv == nil {
		if b.conv, err = newEPCIS20(); err != nil {
			b.Refused = append(b.Refused, Refusal{DLQID: c.DLQID, Err: codes.Wrap(codes.Internal, err, "the EPCIS 2.0 rules cannot be read")})
			return
		}
	}
	ev, err := b.conv.convert(data)
	if err != nil {
		b.Refused = append(b.Refused, Refusal{DLQID: c.DLQID, Err: err})
		return
	}
	b.events = append(b.events, ev)
	o := Original{DLQID: c.DLQID, Document: st.Document}
	if st.OriginalPayload != nil {
		o.Payload, _ = st.OriginalPayload.Bytes()
	}
	b.Originals = append(b.Originals, o)
}

// Events is the number of events collected.
func (b *EPCISBuilder) Events() int { return len(b.events) }

// WriteEPCIS writes the collected events as one EPCIS 2.0 JSON
// EPCISDocument created at created: @context, type, schemaVersion 2.0,
// creationDate and the events in epcisBody.eventList.
func (b *EPCISBuilder) WriteEPCIS(w io.Writer, created time.Time) error {
	bw := bufio.NewWriter(w)
	head, err := json.Marshal(map[string]any{
		"@context": []string{EPCISContext}, "type": "EPCISDocument", "schemaVersion": "2.0",
		"creationDate": created.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return err
	}
	bw.Write(head[:len(head)-1])
	bw.WriteString(`,"epcisBody":{"eventList":[`)
	for i, ev := range b.events {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n")
		bw.Write(ev)
	}
	bw.WriteString("\n]}}\n")
	return bw.Flush()
}
