package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// errStopDocument ends a document scan that its consumer stopped.
var errStopDocument = errors.New("auditor: scan stopped")

// documentSource returns how to read the EPCIS document the EVENTS
// message m carries: the message itself, or, for the manifest of a
// document published in parts, the document the validator kept in
// DOCUMENTS. part reports a part of a document published in parts (its
// events are the manifest's). A nil source with no error: m is no
// document, or one reconciled as one message (a manifest that does not
// parse, or whose document is not kept yet: the validator quarantines the
// first, and has not ingested the second).
func (p *Reconciler) documentSource(ctx context.Context, m *jetstream.RawStreamMsg) (src document.Source, part bool, err error) {
	if !subjects.IsDocument(m.Subject, dscsa.Name) {
		return nil, false, nil
	}
	switch {
	case m.Header.Get(envelope.DocumentPart) != "":
		return nil, true, nil
	case m.Header.Get(envelope.DocumentManifest) != "":
		man, err := document.ParseManifest(m.Data)
		if err != nil {
			return nil, false, nil
		}
		if _, err := streams.DocumentInfo(ctx, p.cfg.JS, man.SHA256); errors.Is(err, streams.ErrDocumentNotFound) {
			return nil, false, nil
		} else if err != nil {
			return nil, false, fmt.Errorf("auditor: %w", err)
		}
		return func() (io.Reader, error) { return streams.OpenDocument(ctx, p.cfg.JS, man.SHA256) }, false, nil
	}
	return document.Bytes(m.Data), false, nil
}

// documentEvents calls fn with each event of the document the EVENTS
// message m carries, named as the validator names it (its bizStep's
// subject under the document's publisher), with m's sequence and its
// position; a document part once, as a part. handled is false when m is
// reconciled as one message: no document, or one that does not parse (the
// validator quarantines it whole, named by its bytes). fn returning false
// stops the scan.
func (p *Reconciler) documentEvents(ctx context.Context, m *jetstream.RawStreamMsg, fn func(event) bool) (handled bool, err error) {
	src, part, err := p.documentSource(ctx, m)
	if err != nil {
		return true, err
	}
	base := api.ReconcileEvent{Seq: m.Sequence, Subject: m.Subject, Received: m.Time.UTC()}
	if part {
		fn(event{ReconcileEvent: base, part: true})
		return true, nil
	}
	if src == nil {
		return false, nil
	}
	publisher := subjects.PublisherOf(m.Subject)
	emitted := 0
	_, err = document.ScanSource(src, func(ev document.Event) error {
		e := event{ReconcileEvent: base, data: bytes.Clone(ev.Data)}
		i := ev.Index
		e.Subject, e.DocumentIndex = document.EventSubject(publisher, ev.Data), &i
		emitted++
		if !fn(e) {
			return errStopDocument
		}
		return nil
	})
	switch {
	case err == nil, errors.Is(err, errStopDocument):
		return true, nil
	case emitted == 0 && codes.Of(err) == dscsa.MalformedDocument:
		return false, nil
	}
	return true, fmt.Errorf("auditor: read the document of EVENTS %d: %w", m.Sequence, err)
}

// docEntry is what the LEDGER entry of one event of a document must hold:
// the event's canonical hash (idempotency.CanonicalHash) and its LEDGER
// subject (its key).
type docEntry struct {
	hash, subject string
}

// docEntries remembers, for the LEDGER walk, the events of the last few
// documents read (by EVENTS sequence), so that the entries of a document's
// events, stored together, cost one read of the document.
type docEntries struct {
	mu    sync.Mutex
	byDoc map[uint64][]docEntry
	order []uint64
}

// docEntriesKept bounds the documents remembered.
const docEntriesKept = 4

// entriesOf returns the entries of the events of the document the EVENTS
// message ev carries (nil when it is none or does not parse).
func (p *Reconciler) entriesOf(ctx context.Context, c *docEntries, ev *jetstream.RawStreamMsg) ([]docEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if got, ok := c.byDoc[ev.Sequence]; ok {
		return got, nil
	}
	var out []docEntry
	if _, err := p.documentEvents(ctx, ev, func(e event) bool {
		d := docEntry{hash: idempotency.CanonicalHash(e.data)}
		if env, err := p.cfg.Gate.Check(e.Subject, e.data); err == nil {
			d.subject = subjects.Ledger(env.Domain, env.IdempotencyKey)
		}
		out = append(out, d)
		return true
	}); err != nil {
		return nil, err
	}
	if c.byDoc == nil {
		c.byDoc = map[uint64][]docEntry{}
	}
	if len(c.order) == docEntriesKept {
		delete(c.byDoc, c.order[0])
		c.order = c.order[1:]
	}
	c.byDoc[ev.Sequence], c.order = out, append(c.order, ev.Sequence)
	return out, nil
}

// checkDocumentEntry returns why the LEDGER entry m, whose source is the
// document message ev, is unsourced, or "": the entry names its position
// in the document (envelope.DocumentIndex), and the event there has the
// entry's content and key.
func (p *Reconciler) checkDocumentEntry(ctx context.Context, c *docEntries, m, ev *jetstream.RawStreamMsg, hash string) (string, error) {
	i, err := strconv.Atoi(m.Header.Get(envelope.DocumentIndex))
	if err != nil || i < 0 {
		return api.UnsourcedContentMismatch, nil
	}
	entries, err := p.entriesOf(ctx, c, ev)
	if err != nil {
		return "", err
	}
	if i >= len(entries) || entries[i].hash != hash {
		return api.UnsourcedContentMismatch, nil
	}
	if entries[i].subject != m.Subject {
		return api.UnsourcedKeyMismatch, nil
	}
	return "", nil
}
