package shipment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// creation is the document's creation date: an hour after its last event.
func (g *gen) creation() string {
	return g.at.Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
}

// eventTime writes an event's time as EPCIS documents do, with its
// offset (or without one: a planted mistake).
func eventTime(ev *event) (at, offset string) {
	if ev.noOffset {
		return ev.at.Format("2006-01-02T15:04:05.000"), ""
	}
	return ev.at.Format("2006-01-02T15:04:05.000-07:00"), ev.at.Format("-07:00")
}

// location is a party's place in the master data.
type location struct {
	id                   string
	name, street, city   string
	postal, state, count string
}

var locations = []location{
	{mfrPlant.sgln(), mfrName, "Königstraße 12", "Köln", "50667", "NW", "DE"},
	{mfrDock.sgln(), mfrName + " – Versand <Tor 4>", "Königstraße 14", "Köln", "50667", "NW", "DE"},
	{distDC.sgln(), distName, `1 "Harbor" Way & Dock 7`, "Newark", "07114", "NJ", "US"},
	{shopStore.sgln(), shopName, "南京路 88号", "上海", "200001", "SH", "CN"},
}

// ---- EPCIS 1.2 XML

func xmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

func (g *gen) writeXML(b *bytes.Buffer) {
	c := g.cfg
	fmt.Fprintf(b, `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<epcis:EPCISDocument xmlns:epcis="urn:epcglobal:epcis:xsd:1" xmlns:sbdh="http://www.unece.org/cefact/namespaces/StandardBusinessDocumentHeader" xmlns:cbvmda="urn:epcglobal:cbv:mda" xmlns:example="https://ns.example.com/epcis/" schemaVersion="1.2" creationDate="%s">
  <EPCISHeader>
    <sbdh:StandardBusinessDocumentHeader>
      <sbdh:HeaderVersion>1.0</sbdh:HeaderVersion>
      <sbdh:Sender>
        <sbdh:Identifier Authority="GS1">%s</sbdh:Identifier>
        <sbdh:ContactInformation>
          <sbdh:Contact>%s</sbdh:Contact>
          <sbdh:EmailAddress>edi@mueller-soehne.example</sbdh:EmailAddress>
        </sbdh:ContactInformation>
      </sbdh:Sender>
      <sbdh:Receiver>
        <sbdh:Identifier Authority="GS1">%s</sbdh:Identifier>
        <sbdh:ContactInformation>
          <sbdh:Contact>%s</sbdh:Contact>
        </sbdh:ContactInformation>
      </sbdh:Receiver>
      <sbdh:DocumentIdentification>
        <sbdh:Standard>EPCglobal</sbdh:Standard>
        <sbdh:TypeVersion>1.0</sbdh:TypeVersion>
        <sbdh:InstanceIdentifier>%s</sbdh:InstanceIdentifier>
        <sbdh:Type>Events</sbdh:Type>
        <sbdh:CreationDateAndTime>%s</sbdh:CreationDateAndTime>
      </sbdh:DocumentIdentification>
    </sbdh:StandardBusinessDocumentHeader>
    <extension>
      <EPCISMasterData>
        <VocabularyList>
          <Vocabulary type="urn:epcglobal:epcis:vtype:BusinessLocation">
            <VocabularyElementList>
`, g.creation(), mfrPlant.number(), xmlText(mfrName), distParty.number(), xmlText(distName), xmlText(c.ID), g.creation())
	for _, l := range locations {
		fmt.Fprintf(b, "              <VocabularyElement id=\"%s\">\n", l.id)
		for _, a := range [][2]string{{"name", l.name}, {"streetAddressOne", l.street}, {"city", l.city}, {"state", l.state}, {"postalCode", l.postal}, {"countryCode", l.count}} {
			fmt.Fprintf(b, "                <attribute id=\"urn:epcglobal:cbv:mda#%s\">%s</attribute>\n", a[0], xmlText(a[1]))
		}
		b.WriteString("              </VocabularyElement>\n")
	}
	b.WriteString(`            </VocabularyElementList>
          </Vocabulary>
        </VocabularyList>
      </EPCISMasterData>
    </extension>
  </EPCISHeader>
  <EPCISBody>
    <EventList>
`)
	for _, ev := range g.events {
		writeXMLEvent(b, ev)
	}
	b.WriteString("    </EventList>\n  </EPCISBody>\n</epcis:EPCISDocument>\n")
}

func xmlEPCs(b *bytes.Buffer, tag string, epcs []epc) {
	fmt.Fprintf(b, "        <%s>\n", tag)
	for _, e := range epcs {
		fmt.Fprintf(b, "          <epc>%s</epc>\n", xmlText(e.urn()))
	}
	fmt.Fprintf(b, "        </%s>\n", tag)
}

func bizStepURN(ev *event) string {
	if ev.rawStep != "" {
		return ev.rawStep
	}
	return "urn:epcglobal:cbv:bizstep:" + ev.bizStep
}

func readPointOf(ev *event) string {
	if ev.readRaw != "" {
		return ev.readRaw
	}
	return ev.read.sgln()
}

func writeXMLEvent(b *bytes.Buffer, ev *event) {
	indent := "      "
	if ev.typ == "TransformationEvent" { // EPCIS 1.2: inside an extension
		b.WriteString("      <extension>\n")
	}
	fmt.Fprintf(b, "%s<%s>\n", indent, ev.typ)
	at, off := eventTime(ev)
	fmt.Fprintf(b, "        <eventTime>%s</eventTime>\n", at)
	if off != "" {
		fmt.Fprintf(b, "        <eventTimeZoneOffset>%s</eventTimeZoneOffset>\n", off)
	}
	if ev.typ != "TransformationEvent" {
		fmt.Fprintf(b, "        <baseExtension>\n          <eventID>%s</eventID>\n        </baseExtension>\n", ev.id)
	}
	switch ev.typ {
	case "AggregationEvent":
		fmt.Fprintf(b, "        <parentID>%s</parentID>\n", xmlText(ev.parent.urn()))
		xmlEPCs(b, "childEPCs", ev.epcs)
	case "ObjectEvent":
		xmlEPCs(b, "epcList", ev.epcs)
	case "TransformationEvent":
		fmt.Fprintf(b, "        <baseExtension>\n          <eventID>%s</eventID>\n        </baseExtension>\n", ev.id)
		xmlEPCs(b, "inputEPCList", ev.inputs)
		xmlEPCs(b, "outputEPCList", ev.outputs)
	}
	if ev.typ != "TransformationEvent" {
		fmt.Fprintf(b, "        <action>%s</action>\n", ev.action)
	}
	fmt.Fprintf(b, "        <bizStep>%s</bizStep>\n", xmlText(bizStepURN(ev)))
	fmt.Fprintf(b, "        <disposition>urn:epcglobal:cbv:disp:%s</disposition>\n", ev.disp)
	fmt.Fprintf(b, "        <readPoint>\n          <id>%s</id>\n        </readPoint>\n", xmlText(readPointOf(ev)))
	fmt.Fprintf(b, "        <bizLocation>\n          <id>%s</id>\n        </bizLocation>\n", ev.biz.sgln())
	if ev.shipping {
		fmt.Fprintf(b, `        <bizTransactionList>
          <bizTransaction type="urn:epcglobal:cbv:btt:po">urn:epcglobal:cbv:bt:%s:%s</bizTransaction>
          <bizTransaction type="urn:epcglobal:cbv:btt:desadv">urn:epcglobal:cbv:bt:%s:%s</bizTransaction>
        </bizTransactionList>
        <extension>
          <sourceList>
            <source type="urn:epcglobal:cbv:sdt:owning_party">%s</source>
            <source type="urn:epcglobal:cbv:sdt:location">%s</source>
          </sourceList>
          <destinationList>
            <destination type="urn:epcglobal:cbv:sdt:owning_party">%s</destination>
            <destination type="urn:epcglobal:cbv:sdt:location">%s</destination>
          </destinationList>
        </extension>
        <example:consignee>%s</example:consignee>
`, distParty.number(), ev.po, mfrPlant.number(), ev.desadv, mfrPlant.sgln(), mfrDock.sgln(), distParty.sgln(), distDC.sgln(), xmlText(distName))
	}
	if ev.lot != "" || ev.expiry != "" {
		ilmd := "        <extension>\n          <ilmd>\n"
		if ev.typ == "TransformationEvent" {
			ilmd = "        <ilmd>\n"
		}
		b.WriteString(ilmd)
		if ev.lot != "" {
			fmt.Fprintf(b, "            <cbvmda:lotNumber>%s</cbvmda:lotNumber>\n", xmlText(ev.lot))
		}
		if ev.expiry != "" {
			fmt.Fprintf(b, "            <cbvmda:itemExpirationDate>%s</cbvmda:itemExpirationDate>\n", ev.expiry)
		}
		if ev.typ == "TransformationEvent" {
			b.WriteString("        </ilmd>\n")
		} else {
			b.WriteString("          </ilmd>\n        </extension>\n")
		}
	}
	fmt.Fprintf(b, "%s</%s>\n", indent, ev.typ)
	if ev.typ == "TransformationEvent" {
		b.WriteString("      </extension>\n")
	}
}

// ---- EPCIS 2.0 JSON-LD

// jsonText is s as a JSON string, written as people write it: & < >
// and non-ASCII as they are.
func jsonText(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func (g *gen) writeJSON(b *bytes.Buffer) {
	fmt.Fprintf(b, `{
  "@context": [
    "https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld",
    {"example": "https://ns.example.com/epcis/"}
  ],
  "type": "EPCISDocument",
  "schemaVersion": "2.0",
  "creationDate": %q,
  "id": %s,
  "epcisHeader": {
    "epcisMasterData": {
      "vocabularyList": [
        {
          "type": "urn:epcglobal:epcis:vtype:BusinessLocation",
          "vocabularyElementList": [
`, g.creation(), jsonText(g.cfg.ID))
	for i, l := range locations {
		fmt.Fprintf(b, "            {\"id\": %q, \"attributes\": [", l.id)
		for j, a := range [][2]string{{"name", l.name}, {"streetAddressOne", l.street}, {"city", l.city}, {"state", l.state}, {"postalCode", l.postal}, {"countryCode", l.count}} {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "{\"id\": \"urn:epcglobal:cbv:mda#%s\", \"attribute\": %s}", a[0], jsonText(a[1]))
		}
		b.WriteString("]}")
		if i < len(locations)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(`          ]
        }
      ]
    }
  },
  "epcisBody": {
    "eventList": [
`)
	for i, ev := range g.events {
		writeJSONEvent(b, ev)
		if i < len(g.events)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("    ]\n  }\n}\n")
}

func jsonEPCs(epcs []epc) string {
	parts := make([]string, len(epcs))
	for i, e := range epcs {
		parts[i] = jsonText(e.dl())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func writeJSONEvent(b *bytes.Buffer, ev *event) {
	at, off := eventTime(ev)
	fmt.Fprintf(b, "      {\n        \"type\": %q,\n        \"eventID\": %q,\n        \"eventTime\": %q,\n", ev.typ, ev.id, at)
	if off != "" {
		fmt.Fprintf(b, "        \"eventTimeZoneOffset\": %q,\n", off)
	}
	switch ev.typ {
	case "AggregationEvent":
		fmt.Fprintf(b, "        \"parentID\": %s,\n        \"childEPCs\": %s,\n", jsonText(ev.parent.dl()), jsonEPCs(ev.epcs))
	case "ObjectEvent":
		fmt.Fprintf(b, "        \"epcList\": %s,\n", jsonEPCs(ev.epcs))
	case "TransformationEvent":
		fmt.Fprintf(b, "        \"inputEPCList\": %s,\n        \"outputEPCList\": %s,\n", jsonEPCs(ev.inputs), jsonEPCs(ev.outputs))
	}
	if ev.typ != "TransformationEvent" {
		fmt.Fprintf(b, "        \"action\": %q,\n", ev.action)
	}
	step := ev.bizStep
	if ev.rawStep != "" {
		step = ev.rawStep
	}
	fmt.Fprintf(b, "        \"bizStep\": %s,\n        \"disposition\": %q,\n", jsonText(step), ev.disp)
	fmt.Fprintf(b, "        \"readPoint\": {\"id\": %s},\n        \"bizLocation\": {\"id\": %q}", jsonText(readPointOf(ev)), ev.biz.sgln())
	if ev.shipping {
		fmt.Fprintf(b, `,
        "bizTransactionList": [
          {"type": "po", "bizTransaction": "urn:epcglobal:cbv:bt:%s:%s"},
          {"type": "desadv", "bizTransaction": "urn:epcglobal:cbv:bt:%s:%s"}
        ],
        "sourceList": [
          {"type": "owning_party", "source": %q},
          {"type": "location", "source": %q}
        ],
        "destinationList": [
          {"type": "owning_party", "destination": %q},
          {"type": "location", "destination": %q}
        ],
        "example:consignee": %s`, distParty.number(), ev.po, mfrPlant.number(), ev.desadv, mfrPlant.pgln(), mfrDock.sgln(), distParty.pgln(), distDC.sgln(), jsonText(distName))
	}
	if ev.lot != "" || ev.expiry != "" {
		b.WriteString(",\n        \"ilmd\": {")
		sep := ""
		if ev.lot != "" {
			fmt.Fprintf(b, "\"cbvmda:lotNumber\": %s", jsonText(ev.lot))
			sep = ", "
		}
		if ev.expiry != "" {
			fmt.Fprintf(b, "%s\"cbvmda:itemExpirationDate\": %q", sep, ev.expiry)
		}
		b.WriteString("}")
	}
	b.WriteString("\n      }")
}
