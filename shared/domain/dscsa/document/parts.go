package document

import (
	"encoding/json"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"regexp"
	"strconv"

	"github.com/deadletter/deadletter/shared/codes"
)

// A document larger than one message is published in parts (docs/adr,
// "EPCIS documents in parts"): PartSize bytes each, on the document
// subject, each with the headers envelope.DocumentUpload and
// envelope.DocumentPart ("<i>", from 1); then, once every part is
// stored, a manifest (envelope.DocumentManifest) naming the parts' EVENTS
// sequences in order, the document's size and SHA-256. The validator
// acknowledges the parts as they come and ingests the document when the
// manifest arrives, reading the parts back from EVENTS.

// Limits of a document published in parts.
const (
	// PartSize is the size of every part but the last: half of what
	// EVENTS takes in one message (2 MiB), leaving room for headers.
	PartSize = 1 << 20
	// MaxParts bounds the parts of one document (MaxSize).
	MaxParts = 1024
	// MaxSize bounds a document published in parts: 1 GiB.
	MaxSize = MaxParts * PartSize
)

// Manifest is the body of the message that completes a document
// published in parts.
type Manifest struct {
	// Upload names the upload: the envelope.DocumentUpload header of
	// every part (a token of 1 to 64 letters, digits, '-' or '_').
	Upload string `json:"upload"`
	// SHA256 is the lowercase hex SHA-256 of the whole document.
	SHA256 string `json:"sha256"`
	// Size is the document's length in bytes.
	Size int64 `json:"size"`
	// Parts are the EVENTS sequences of the parts, in document order.
	Parts []uint64 `json:"parts"`
}

var (
	uploadRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	shaRe    = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ParseManifest reads a manifest, refusing (MALFORMED_DOCUMENT) one that
// is not well-formed or out of bounds.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, codes.Errorf(dscsa.MalformedDocument, "document manifest is not well-formed JSON")
	}
	switch {
	case !uploadRe.MatchString(m.Upload):
		return nil, codes.Errorf(dscsa.MalformedDocument, "document manifest's upload is not a token")
	case !shaRe.MatchString(m.SHA256):
		return nil, codes.Errorf(dscsa.MalformedDocument, "document manifest's sha256 is not 64 lowercase hex digits")
	case len(m.Parts) == 0 || len(m.Parts) > MaxParts:
		return nil, codes.Errorf(dscsa.MalformedDocument, "document manifest names %d parts (1 to %d)", len(m.Parts), MaxParts)
	case m.Size <= 0 || m.Size > int64(len(m.Parts))*PartSize:
		return nil, codes.Errorf(dscsa.MalformedDocument, "document manifest's size does not fit its parts")
	}
	return &m, nil
}

// PartHeader is the envelope.DocumentPart header of part i (from 1).
func PartHeader(i int) string { return strconv.Itoa(i) }
