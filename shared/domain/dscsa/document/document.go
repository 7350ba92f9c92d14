// Package document reads an EPCIS document, as trading partners send
// them, into its events: an EPCISDocument (or EPCISQueryDocument) in the
// EPCIS 2.0 JSON / JSON-LD binding, or in the XML binding of EPCIS 1.2
// (namespace urn:epcglobal:epcis:xsd:1) or 2.0 (urn:epcglobal:epcis:xsd:2),
// which it maps to the EPCIS 2.0 JSON form so that the same validation gate
// checks every event.
//
// Scan streams: it checks the whole document first (a pass that holds no
// event), then hands the events to a callback one at a time, each with its
// position and the offset and length of its exact original bytes in the
// document, so that memory is bounded by one event, not by the document's
// event count. Read collects them (tests, small documents).
//
// Each event is handed over as the bytes of one JSON object: for a JSON
// document the event's own bytes, verbatim, with the document's @context
// spliced in front when the event has none of its own (so that its
// namespace prefixes, and its event hash ID, are the document's); for an
// XML document the mapped event (see mapper), with an @context declaring
// the namespaces of its extensions under their XML prefixes.
//
// The reader is as strict as the gate: a document that is not UTF-8, not
// well-formed, has a document type declaration that could declare
// anything (an internal subset, a SYSTEM or PUBLIC identifier, an ENTITY:
// no entity is ever expanded; a bare "<!DOCTYPE name>" before the root, as
// GS1's examples carry, declares nothing and is read), nests deeper than
// MaxDepth, holds more than MaxEvents events or is not an EPCIS document
// is refused whole with MALFORMED_DOCUMENT, its detail naming the fault by
// position, never by content; Scan refuses it before it hands over any
// event. An event the gate will refuse (a type the domain does not take,
// a duplicate member name) is not the document's fault: it is handed
// over, for the gate to code that event alone.
package document

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"io"
	"time"
	"unicode/utf8"

	"github.com/deadletter/deadletter/shared/codes"
)

// Limits of one document.
const (
	// MaxDepth bounds element / value nesting.
	MaxDepth = 32
	// MaxEvents bounds the events of one document.
	MaxEvents = 100_000
	// maxHeaderText bounds one header value kept (an identifier, a date).
	maxHeaderText = 256
)

// Formats.
const (
	FormatJSON = "json"
	FormatXML  = "xml"
)

// Info is a document's identity: its bytes' hash and what its header
// (the EPCIS document's own members, and a Standard Business Document
// Header when present) says of it. The header values are the document's
// text: never log them.
type Info struct {
	// Format is FormatJSON or FormatXML.
	Format string
	// SHA256 is the lowercase hex SHA-256 of the document's bytes.
	SHA256 string
	// ID is the SBDH's DocumentIdentification/InstanceIdentifier, else a
	// JSON document's "id"; "" when the document names none.
	ID string
	// Sender and Receiver are the SBDH's first Sender/Identifier and
	// Receiver/Identifier; "" when absent.
	Sender, Receiver string
	// Created is the document's creationDate, else the SBDH's
	// CreationDateAndTime, in UTC (zero when absent or not a date).
	Created time.Time
	// Count is the number of events in the document.
	Count int
}

// Event is one event of a document.
type Event struct {
	// Index is the event's 0-based position in the document.
	Index int
	// Offset and Length locate the event's exact original bytes in the
	// document: for JSON its value, for XML its element from '<' to the
	// end tag's '>'.
	Offset, Length int
	// Data is the event as one JSON object (see the package doc). It is
	// the callee's to keep.
	Data []byte
}

// Document is a read EPCIS document.
type Document struct {
	// Info is the document's identity.
	Info
	// Events are the document's events in document order, each one JSON
	// object.
	Events [][]byte
}

// Read reads a whole EPCIS document (Scan, with every event collected).
func Read(data []byte) (*Document, error) {
	doc := &Document{}
	info, err := Scan(data, func(ev Event) error {
		doc.Events = append(doc.Events, ev.Data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	doc.Info = *info
	return doc, nil
}

// Source opens a document's bytes from the start; Scan opens it twice
// (once per pass), so that a document larger than memory (kept in an
// object store) is read as a stream. A reader that is an io.Closer is
// closed after its pass.
type Source func() (io.Reader, error)

// Bytes is the Source of a document in memory.
func Bytes(data []byte) Source {
	return func() (io.Reader, error) { return bytes.NewReader(data), nil }
}

// Identify checks a whole document and returns its identity without
// handing over any event: the first pass of Scan.
func Identify(data []byte) (*Info, error) {
	info, _, err := check(Bytes(data))
	return info, err
}

// IdentifySource is Identify of a document read from src.
func IdentifySource(src Source) (*Info, error) {
	info, _, err := check(src)
	return info, err
}

// Scan reads an EPCIS document in either binding: one that begins (after
// white space and a byte-order mark) with '<' is XML, anything else JSON.
// It checks the whole document first; a document it refuses
// (MALFORMED_DOCUMENT) has handed no event to fn. It then calls fn for
// each event in document order, and stops at the first error fn returns,
// which it returns as it is.
func Scan(data []byte, fn func(Event) error) (*Info, error) { return ScanSource(Bytes(data), fn) }

// ScanSource is Scan of a document read from src, as a stream: it holds
// one event at a time, never the document.
func ScanSource(src Source, fn func(Event) error) (*Info, error) { return ScanSourceWith(src, nil, fn) }

// ScanSourceWith is ScanSource that calls begin, when set, with the
// document's identity once the first pass accepted it and before the first
// event: an error with begin never called is the document's refusal.
func ScanSourceWith(src Source, begin func(*Info), fn func(Event) error) (*Info, error) {
	c, err := Check(src)
	if err != nil {
		return nil, err
	}
	if begin != nil {
		begin(c.Info)
	}
	if err := c.Scan(fn); err != nil {
		return nil, err
	}
	return c.Info, nil
}

// Checked is a document the first pass accepted (Check): its identity,
// and what the second pass (Scan) needs, so that a document is read once
// to check and once to hand its events over, never checked twice.
type Checked struct {
	// Info is the document's identity.
	Info  *Info
	src   Source
	state any
}

// Check is the first pass over src: it refuses a malformed document
// (MALFORMED_DOCUMENT) and returns the checked document.
func Check(src Source) (*Checked, error) {
	info, state, err := check(src)
	if err != nil {
		return nil, err
	}
	return &Checked{Info: info, src: src, state: state}, nil
}

// Scan is the second pass: it calls fn for each event in document order
// and stops at the first error fn returns, which it returns as it is.
func (c *Checked) Scan(fn func(Event) error) error {
	r, err := c.src()
	if err != nil {
		return err
	}
	defer closeReader(r)
	if c.Info.Format == FormatXML {
		return scanXML(r, c.state.(*xmlState), fn)
	}
	return scanJSON(r, c.state.(*jsonState), fn)
}

// errNotUTF8 is what the reader of a pass fails with on bytes that are
// not UTF-8.
var errNotUTF8 = codes.Errorf(dscsa.MalformedDocument, "document is not valid UTF-8")

// check is the first pass: it refuses a malformed document and returns
// its identity (its bytes' SHA-256 computed on the way) and what the
// second pass needs.
func check(src Source) (*Info, any, error) {
	r, err := src()
	if err != nil {
		return nil, nil, err
	}
	defer closeReader(r)
	h := sha256.New()
	u := &utf8Reader{r: io.TeeReader(r, h)}
	br := bufio.NewReaderSize(u, 64<<10)
	info := &Info{}
	skip, isXML := leading(br)
	var st any
	if isXML {
		info.Format = FormatXML
		_, _ = br.Discard(skip)
		st, err = checkXML(br, skip, info)
	} else {
		info.Format = FormatJSON
		st, err = checkJSON(br, info)
	}
	if err == nil {
		// Every byte hashed and checked, whatever the parser left.
		_, err = io.Copy(io.Discard, br)
	}
	switch {
	case u.bad:
		return nil, nil, errNotUTF8
	case err != nil:
		return nil, nil, err
	}
	info.SHA256 = hex.EncodeToString(h.Sum(nil))
	return info, st, nil
}

// closeReader closes a Source's reader when it is an io.Closer.
func closeReader(r io.Reader) {
	if c, ok := r.(io.Closer); ok {
		_ = c.Close()
	}
}

// leading returns the length of the byte-order mark and white space a
// document begins with, and whether '<' follows (XML).
func leading(br *bufio.Reader) (int, bool) {
	for n := 64; ; n *= 2 {
		b, err := br.Peek(n)
		t := bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), " \t\r\n")
		if len(t) > 0 {
			return len(b) - len(t), t[0] == '<'
		}
		if err != nil || n >= br.Size() {
			return 0, false
		}
	}
}

// utf8Reader fails (bad) on bytes that are not UTF-8, across reads.
type utf8Reader struct {
	r       io.Reader
	pending []byte // an incomplete rune at the end of the last read
	bad     bool
}

func (u *utf8Reader) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	buf := append(u.pending, p[:n]...)
	cut := len(buf)
	for i := 1; i <= utf8.UTFMax && i <= len(buf); i++ {
		if utf8.RuneStart(buf[len(buf)-i]) {
			if !utf8.FullRune(buf[len(buf)-i:]) {
				cut = len(buf) - i
			}
			break
		}
	}
	if !utf8.Valid(buf[:cut]) || errors.Is(err, io.EOF) && cut < len(buf) {
		u.bad = true
		return 0, errNotUTF8
	}
	u.pending = append(u.pending[:0], buf[cut:]...)
	return n, err
}

// headerText bounds and trims one header value.
func headerText(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if len(s) > maxHeaderText {
		s = s[:maxHeaderText]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// headerTime parses a header's date-time (RFC 3339), zero when it is none.
func headerTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, headerText(s))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
