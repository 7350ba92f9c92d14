package record

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Errors of payload decoding.
var (
	// ErrPayloadEncoding: the payload names an unknown encoding or its
	// base64 data does not decode.
	ErrPayloadEncoding = errors.New("record: bad payload encoding")
	// ErrPayloadDigest: the decoded bytes do not match the payload's
	// SHA256 or Size.
	ErrPayloadDigest = errors.New("record: payload digest mismatch")
)

// NewPayload preserves the bytes b: as text (Data is b itself) when b is
// valid UTF-8 and valid JSON, so that an inspector reads it as is, else as
// standard base64. SHA256 and Size describe b.
func NewPayload(b []byte) *Payload {
	sum := sha256.Sum256(b)
	p := &Payload{SHA256: hex.EncodeToString(sum[:]), Size: len(b)}
	if utf8.Valid(b) && json.Valid(b) {
		p.Encoding, p.Data = EncodingText, string(b)
	} else {
		p.Encoding, p.Data = EncodingBase64, base64.StdEncoding.EncodeToString(b)
	}
	return p
}

// Bytes returns the exact preserved bytes, after checking them against the
// payload's SHA256 and Size (ErrPayloadDigest). A nil payload is an
// ErrPayloadEncoding.
func (p *Payload) Bytes() ([]byte, error) {
	b, err := p.decode()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != p.SHA256 || len(b) != p.Size {
		return nil, fmt.Errorf("%w: sha256 %s size %d, recorded sha256 %.64s size %d",
			ErrPayloadDigest, got, len(b), p.SHA256, p.Size)
	}
	return b, nil
}

// decode undoes the payload's encoding.
func (p *Payload) decode() ([]byte, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no payload", ErrPayloadEncoding)
	}
	switch p.Encoding {
	case EncodingText:
		return []byte(p.Data), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(p.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: base64: %v", ErrPayloadEncoding, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: %.32q", ErrPayloadEncoding, p.Encoding)
}
