package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// Errors of sealing and seal verification.
var (
	// ErrSealMismatch: the stored audit_hash is not the hash of the record.
	ErrSealMismatch = errors.New("record: seal mismatch")
	// ErrNoAuditHash: the stored record has no audit_hash member.
	ErrNoAuditHash = errors.New("record: no audit_hash")
	// ErrUnsealed: Marshal was given a record that Seal has not sealed.
	ErrUnsealed = errors.New("record: not sealed")
	// ErrNotUTC: a time of the record is not in UTC.
	ErrNotUTC = errors.New("record: time not in UTC")
)

// Seal sets r.AuditHash to the lowercase hex SHA-256 of the RFC 8785
// canonical JSON of r without its audit_hash member (see the package doc).
// Every time of r must be in UTC (ErrNotUTC) and every integer within
// ±(2^53−1) (ErrUnsafeNumber). Seal the record after its last change; on
// error r is unchanged.
func Seal(r *Record) error {
	if err := checkUTC(*r); err != nil {
		return err
	}
	c := *r
	c.AuditHash = ""
	raw, err := encode(c)
	if err != nil {
		return err
	}
	s, err := readSealed(raw)
	if err != nil {
		return fmt.Errorf("record: seal: %w", err)
	}
	r.AuditHash = s.hash
	return nil
}

// SealMarshal seals r (as Seal) and returns the bytes to store (as
// Marshal), encoding and canonicalizing it once: audit_hash is the last
// member of a record and a hex string, so the stored bytes are the
// unsealed encoding with the hash written into its empty audit_hash.
func SealMarshal(r *Record) ([]byte, error) {
	if err := checkUTC(*r); err != nil {
		return nil, err
	}
	c := *r
	c.AuditHash = ""
	raw, err := encode(c)
	if err != nil {
		return nil, err
	}
	s, err := readSealed(raw)
	if err != nil {
		return nil, fmt.Errorf("record: seal: %w", err)
	}
	if !bytes.HasSuffix(raw, emptyAuditHash) {
		return nil, errors.New("record: seal: audit_hash is not the last member")
	}
	out := make([]byte, 0, len(raw)+len(s.hash))
	out = append(out, raw[:len(raw)-2]...)
	out = append(out, s.hash...)
	out = append(out, raw[len(raw)-2:]...)
	r.AuditHash = s.hash
	return out, nil
}

// emptyAuditHash ends the encoding of a record without its seal.
var emptyAuditHash = []byte(`,"audit_hash":""}`)

// Marshal returns the bytes to store for the sealed record r: its JSON
// (members in Record's field order, no HTML escaping). It fails with
// ErrUnsealed when r has no AuditHash and ErrSealMismatch when r changed
// after Seal.
func Marshal(r Record) ([]byte, error) {
	if r.AuditHash == "" {
		return nil, ErrUnsealed
	}
	raw, err := encode(r)
	if err != nil {
		return nil, err
	}
	if err := VerifySeal(raw); err != nil {
		return nil, fmt.Errorf("record: marshal: %w", err)
	}
	return raw, nil
}

// VerifySeal checks the stored record raw against its own audit_hash,
// working on the bytes alone (no Go types): parse, drop the top-level
// audit_hash member, canonicalize with RFC 8785, SHA-256. Members unknown
// to this version are covered too. It returns ErrSealMismatch,
// ErrNoAuditHash, or a parse error (ErrInvalidJSON, ErrNotObject,
// ErrUnsafeNumber).
func VerifySeal(raw []byte) error {
	s, err := readSealed(raw)
	if err != nil {
		return err
	}
	return s.verify()
}

// verify compares the stored hash with the computed one.
func (s sealed) verify() error {
	if !s.hasStored {
		return ErrNoAuditHash
	}
	if s.stored != s.hash {
		return fmt.Errorf("%w: stored %q, computed %s", ErrSealMismatch, truncate(s.stored, 64), s.hash)
	}
	return nil
}

// Parse verifies the seal of the stored record raw and decodes it. Members
// unknown to this version are covered by the seal but not decoded.
func Parse(raw []byte) (Record, error) {
	if err := VerifySeal(raw); err != nil {
		return Record{}, err
	}
	var r Record
	if err := Unmarshal(raw, &r); err != nil {
		return Record{}, err
	}
	return r, nil
}

// Unmarshal decodes the stored record raw into r without checking its
// seal (Parse checks it). Members unknown to this version are skipped. It
// decodes with go-json-experiment/json, several times faster than
// encoding/json on records: names match exactly, as Marshal writes them.
func Unmarshal(raw []byte, r *Record) error {
	if err := jsonv2.Unmarshal(raw, r); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidJSON, reasonOf(err))
	}
	return nil
}

// encode writes r as JSON without HTML escaping (so "<" stays readable in
// the stored bytes) and without the encoder's trailing newline.
func encode(r Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("record: encode: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkUTC requires every time of r to have a zero UTC offset, so that it
// marshals with "Z" as the package doc promises.
func checkUTC(r Record) error {
	if !isUTC(r.FirstSeen) {
		return fmt.Errorf("%w: first_seen", ErrNotUTC)
	}
	if !isUTC(r.QuarantinedAt) {
		return fmt.Errorf("%w: quarantined_at", ErrNotUTC)
	}
	if r.EventTime != nil && !isUTC(*r.EventTime) {
		return fmt.Errorf("%w: event_time", ErrNotUTC)
	}
	for i, a := range r.Attempts {
		if !isUTC(a.At) {
			return fmt.Errorf("%w: attempts[%d].at", ErrNotUTC, i)
		}
	}
	if g := r.Signature; g != nil && (!isUTC(g.RequestedAt) || !isUTC(g.SignedAt)) {
		return fmt.Errorf("%w: signature", ErrNotUTC)
	}
	if h := r.Hold; h != nil && !isUTC(h.At) {
		return fmt.Errorf("%w: hold.at", ErrNotUTC)
	}
	return nil
}

// isUTC reports whether t's offset from UTC is zero.
func isUTC(t time.Time) bool {
	_, offset := t.Zone()
	return offset == 0
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
