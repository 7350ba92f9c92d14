package envelope

import (
	"fmt"
	"strconv"
)

// Position is the event's place in its document, as people read it:
// "event 4,812 of 10,000" (of a document whose size is not known when
// Count is 0).
func (d Document) Position() string {
	if d.Count > 0 {
		return "event " + thousands(d.Index+1) + " of " + thousands(d.Count)
	}
	return "event " + thousands(d.Index+1) + " (of a document whose size is not known)"
}

// Original says where the event's exact original bytes are: the byte
// range of the document kept in the DOCUMENTS object store under its
// SHA-256.
func (d Document) Original() string {
	return fmt.Sprintf("DOCUMENTS object %s, bytes %d to %d", d.SHA256, d.Offset, d.Offset+d.Length)
}

// thousands writes n with comma separators (n >= 0).
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
