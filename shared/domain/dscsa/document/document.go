// Package document reads an EPCIS document, as trading partners send
// them, into its events: an EPCISDocument (or EPCISQueryDocument) in the
// EPCIS 2.0 JSON / JSON-LD binding, or in the XML binding of EPCIS 1.2
// (namespace urn:epcglobal:epcis:xsd:1) or 2.0 (urn:epcglobal:epcis:xsd:2),
// which it maps to the EPCIS 2.0 JSON form so that the same validation gate
// checks every event.
//
// Each event is returned as the bytes of one JSON object: for a JSON
// document the event's own bytes, verbatim, with the document's @context
// spliced in front when the event has none of its own (so that its
// namespace prefixes, and its event hash ID, are the document's); for an
// XML document the mapped event (see readXML), with an @context declaring
// the namespaces of its extensions under their XML prefixes.
//
// The reader is as strict as the gate: a document that is not UTF-8, not
// well-formed, has a DTD (<!DOCTYPE>: no entity is ever expanded), nests
// deeper than MaxDepth, holds more than MaxEvents events or is not an EPCIS
// document is refused whole with MALFORMED_DOCUMENT, its detail naming the
// fault by position, never by content.
package document

import (
	"bytes"
	"unicode/utf8"

	"github.com/deadletter/deadletter/shared/codes"
)

// Limits of one document.
const (
	// MaxDepth bounds element / value nesting.
	MaxDepth = 32
	// MaxEvents bounds the events of one document.
	MaxEvents = 100_000
)

// Formats.
const (
	FormatJSON = "json"
	FormatXML  = "xml"
)

// Document is a read EPCIS document.
type Document struct {
	// Format is FormatJSON or FormatXML.
	Format string
	// Events are the document's events in document order, each one JSON
	// object.
	Events [][]byte
}

// Read reads an EPCIS document in either binding: one that begins (after
// white space and a byte-order mark) with '<' is XML, anything else JSON.
func Read(data []byte) (*Document, error) {
	if !utf8.Valid(data) {
		return nil, codes.Errorf(codes.MalformedDocument, "document is not valid UTF-8")
	}
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '<' {
		events, err := readXML(trimmed)
		if err != nil {
			return nil, err
		}
		return &Document{Format: FormatXML, Events: events}, nil
	}
	events, err := readJSON(data)
	if err != nil {
		return nil, err
	}
	return &Document{Format: FormatJSON, Events: events}, nil
}
