package console

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/deadletter/deadletter/shared/envelope"
)

// docRef is the provenance of an event read from a document (an EPCIS
// document of many events): envelope.Document, as the record and
// audit.get's answer carry it (its Position and Original are the words
// dlqctl show uses too). Every member is text from a partner's document:
// shown only through html/template (escaped).
type docRef struct {
	envelope.Document
}

// CreatedAt is the document's creation date as a time (zero when it
// gave none or it does not parse).
func (d *docRef) CreatedAt() time.Time {
	t, err := time.Parse(time.RFC3339Nano, d.Created)
	if err != nil {
		return time.Time{}
	}
	return t
}

// thousands writes n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// getReply is audit.get's answer with the document's provenance, when
// the answer carries it.
type getReply struct {
	Document *docRef `json:"document,omitempty"`
	State    struct {
		Document *docRef `json:"document,omitempty"`
	} `json:"state"`
}

// documentOf finds the provenance in audit.get's raw answer: the answer's
// own "document", its state's, or its first record's.
func documentOf(raw []byte, firstRecord json.RawMessage) *docRef {
	var g getReply
	if json.Unmarshal(raw, &g) == nil {
		if g.Document != nil && g.Document.ID != "" {
			return g.Document
		}
		if g.State.Document != nil && g.State.Document.ID != "" {
			return g.State.Document
		}
	}
	var rec struct {
		Document *docRef `json:"document,omitempty"`
	}
	if len(firstRecord) > 0 && json.Unmarshal(firstRecord, &rec) == nil && rec.Document != nil && rec.Document.ID != "" {
		return rec.Document
	}
	return nil
}
