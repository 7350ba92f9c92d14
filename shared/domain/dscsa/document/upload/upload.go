// Package upload publishes an EPCIS document to EVENTS as the validator
// ingests it: in one message when it fits in document.PartSize, else in
// parts and a manifest (package document, Manifest), reading the document
// as a stream.
package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
)

// ErrTooLarge: the document is larger than document.MaxSize.
var ErrTooLarge = errors.New("upload: document larger than the largest document published in parts")

// Result says how a document was published.
type Result struct {
	// Seq is the EVENTS sequence of the message the validator ingests the
	// document from: the document itself, or its manifest.
	Seq uint64
	// Parts is the number of parts (0: one message).
	Parts int
	// Size and SHA256 are the document's length and hex SHA-256.
	Size   int64
	SHA256 string
}

// Publish publishes the document read from r on subject (the document
// subject, subjects.Event(dscsa.Name, subjects.DocumentType)), holding one
// part in memory. progress, when set, is called after each part with the
// bytes sent so far.
func Publish(ctx context.Context, js jetstream.JetStream, subject string, r io.Reader, progress func(sent int64)) (Result, error) {
	first := make([]byte, document.PartSize+1)
	n, err := io.ReadFull(r, first)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		sum := sha256.Sum256(first[:n])
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: first[:n]})
		if err != nil {
			return Result{}, fmt.Errorf("upload: %w", err)
		}
		if progress != nil {
			progress(int64(n))
		}
		return Result{Seq: ack.Sequence, Size: int64(n), SHA256: hex.EncodeToString(sum[:])}, nil
	case err != nil:
		return Result{}, fmt.Errorf("upload: %w", err)
	}
	// In parts, each published as it is read: one part in memory.
	man := document.Manifest{Upload: nuid.Next()}
	h := sha256.New()
	part := first[:document.PartSize]
	carry := first[document.PartSize:n]
	for {
		if len(man.Parts) == document.MaxParts {
			return Result{}, ErrTooLarge
		}
		m := nats.NewMsg(subject)
		m.Data = part
		m.Header.Set(envelope.DocumentUpload, man.Upload)
		m.Header.Set(envelope.DocumentPart, document.PartHeader(len(man.Parts)+1))
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			return Result{}, fmt.Errorf("upload: part %d: %w", len(man.Parts)+1, err)
		}
		man.Parts = append(man.Parts, ack.Sequence)
		h.Write(part)
		man.Size += int64(len(part))
		if progress != nil {
			progress(man.Size)
		}
		next := make([]byte, document.PartSize)
		k := copy(next, carry)
		carry = nil
		m2, err := io.ReadFull(r, next[k:])
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if k+m2 == 0 {
				break
			}
			part = next[:k+m2]
			continue
		}
		if err != nil {
			return Result{}, fmt.Errorf("upload: %w", err)
		}
		part = next
	}
	man.SHA256 = hex.EncodeToString(h.Sum(nil))
	body, err := json.Marshal(man)
	if err != nil {
		return Result{}, err
	}
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(envelope.DocumentUpload, man.Upload)
	m.Header.Set(envelope.DocumentManifest, "1")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return Result{}, fmt.Errorf("upload: manifest: %w", err)
	}
	return Result{Seq: ack.Sequence, Parts: len(man.Parts), Size: man.Size, SHA256: man.SHA256}, nil
}
