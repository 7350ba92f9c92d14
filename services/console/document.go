package console

import (
	"encoding/json"
	"fmt"
	"time"
)

// docRef is the provenance of an event read from a document (an EPCIS
// document of many events): the optional "document" object that a
// document-derived event's record and audit.get's answer carry (the
// shared contract of the ingest of documents). Every member is text from
// a partner's document: shown only through html/template (escaped).
type docRef struct {
	ID       string    `json:"id"`
	SHA256   string    `json:"sha256"`
	Format   string    `json:"format"`
	Index    int       `json:"index"`
	Count    int       `json:"count"`
	Sender   string    `json:"sender"`
	Receiver string    `json:"receiver"`
	Created  time.Time `json:"created"`
	Stream   string    `json:"stream"`
	Seq      uint64    `json:"seq"`
	Offset   int64     `json:"offset"`
	Length   int64     `json:"length"`
}

// Position is the event's place in its document: "event 4,812 of
// 10,000" (of an unknown number when Count is 0).
func (d *docRef) Position() string {
	if d.Count > 0 {
		return fmt.Sprintf("event %s of %s", thousands(d.Index+1), thousands(d.Count))
	}
	return fmt.Sprintf("event %s (of a document whose size is not known)", thousands(d.Index+1))
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
