package sample

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/gate"
)

// DocumentSender and DocumentReceiver are the SBDH identifiers of the
// documents Document builds.
const (
	DocumentSender   = "urn:epc:id:sgln:0614141.00777.0"
	DocumentReceiver = "Pharmacie Saint-Étienne & Müller <Großhandel>"
)

// Document returns an EPCIS 2.0 JSON document (with a Standard Business
// Document Header naming DocumentSender and DocumentReceiver, and the
// instance identifier id) of n DSCSA events: valid ones (the DSCSA examples in
// turn, each given its own identity number first+i: Unique), except at the positions in bad,
// which hold invalid DSCSA examples (distinct bytes each). It is built
// event by event into one buffer.
func (s *Set) Document(id string, first, n int, bad map[int]bool) ([]byte, error) {
	var valid, invalid []Event
	prefix := "events." + dscsa.Name + "."
	for _, e := range s.valid {
		if strings.HasPrefix(e.Subject, prefix) {
			valid = append(valid, e)
		}
	}
	for _, e := range s.invalid {
		if strings.HasPrefix(e.Subject, prefix) {
			invalid = append(invalid, e)
		}
	}
	if len(valid) == 0 || len(invalid) == 0 {
		return nil, fmt.Errorf("sample: no %s examples", dscsa.Name)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"@context":["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"],"type":"EPCISDocument","schemaVersion":"2.0",`+
		`"creationDate":"2024-05-01T08:00:00Z","epcisHeader":{"sbdh:StandardBusinessDocumentHeader":{"sbdh:HeaderVersion":"1.0",`+
		`"sbdh:Sender":{"sbdh:Identifier":%q},"sbdh:Receiver":{"sbdh:Identifier":%q},`+
		`"sbdh:DocumentIdentification":{"sbdh:InstanceIdentifier":%q}}},"epcisBody":{"eventList":[`, DocumentSender, DocumentReceiver, id)
	nbad := 0
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		if bad[i] {
			e := invalid[nbad%len(invalid)]
			b.Write(e.Data)
			b.Write(bytes.Repeat([]byte(" "), first+nbad/len(invalid)))
			nbad++
			continue
		}
		t := valid[i%len(valid)]
		doc, err := gate.Decode(t.Data)
		if err != nil {
			return nil, err
		}
		Unique(doc, t.Subject, first+i)
		ev, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		b.Write(ev)
	}
	b.WriteString("]}}\n")
	return b.Bytes(), nil
}
