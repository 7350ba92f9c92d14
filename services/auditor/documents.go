package auditor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// The live index knows a document by its quarantined events. A document
// none of whose events was quarantined (all committed, or duplicates) is
// found from DOCUMENTS instead: its manifest there says when the
// validator kept it, and its message in EVENTS was stored before that.

// documentLookbacks are how long before a document was kept in DOCUMENTS
// its EVENTS message is looked for, in turn (the validator's backlog then:
// seconds when it keeps up).
var documentLookbacks = []time.Duration{15 * time.Second, time.Hour}

// maxCleanDocuments bounds the documents without quarantined events whose
// message documentCache remembers.
const maxCleanDocuments = 1024

// documentCache remembers the EVENTS message of documents found from
// DOCUMENTS (a document's message never changes). The zero value is ready.
type documentCache struct {
	mu   sync.Mutex
	docs map[string]*docInfo
}

func (c *documentCache) get(sha string) *docInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.docs[sha]
}

func (c *documentCache) put(sha string, di *docInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.docs == nil || len(c.docs) >= maxCleanDocuments {
		c.docs = map[string]*docInfo{}
	}
	c.docs[sha] = di
}

// keptDocument returns what documentOutcomes needs of the document sha
// when no quarantined event names it: its identity (read from the bytes
// kept in DOCUMENTS), its EVENTS message (the manifest of one sent in
// parts) and when that was stored; nil when DOCUMENTS does not keep it or
// its message is not found.
func (s *Service) keptDocument(ctx context.Context, sha string) (*docInfo, error) {
	if di := s.docs.get(sha); di != nil {
		return di, nil
	}
	m, err := streams.DocumentInfo(ctx, s.js, sha)
	if errors.Is(err, streams.ErrDocumentNotFound) || errors.Is(err, streams.ErrDocumentName) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kept, err := time.Parse(time.RFC3339Nano, m.Created)
	if err != nil {
		return nil, nil
	}
	var msg *jetstream.RawStreamMsg
	for _, back := range documentLookbacks {
		for _, filter := range []string{subjects.Published("*", dscsa.Name, subjects.DocumentType), subjects.Event(dscsa.Name, subjects.DocumentType)} {
			if msg, err = s.documentMessage(ctx, filter, sha, kept.Add(-back), kept); msg != nil || err != nil {
				break
			}
		}
		if msg != nil || err != nil {
			break
		}
	}
	if msg == nil || err != nil {
		return nil, err
	}
	info, err := document.IdentifySource(func() (io.Reader, error) { return streams.OpenDocument(ctx, s.js, sha) })
	if err != nil {
		return nil, err
	}
	doc := api.GroupDocument{ID: info.ID, SHA256: sha, Format: info.Format, Events: info.Count, Sender: info.Sender, Receiver: info.Receiver}
	if doc.ID == "" {
		doc.ID = sha
	}
	if !info.Created.IsZero() {
		doc.Created = info.Created.UTC().Format(time.RFC3339)
	}
	di := &docInfo{doc: doc, domain: dscsa.Name, stream: subjects.EventsStream, seq: msg.Sequence, firstSeen: msg.Time, lastSeen: msg.Time}
	s.docs.put(sha, di)
	return di, nil
}

// documentMessage scans EVENTS on filter from since to a few seconds after
// kept for the message of the document sha: a whole document whose bytes
// hash to sha, or the manifest of one sent in parts naming it (parts are
// skipped).
func (s *Service) documentMessage(ctx context.Context, filter, sha string, since, kept time.Time) (*jetstream.RawStreamMsg, error) {
	from, found, err := seqAtTime(ctx, s.js, subjects.EventsStream, filter, since)
	if err != nil || !found {
		return nil, err
	}
	var out *jetstream.RawStreamMsg
	_, _, err = scan(ctx, s.js, subjects.EventsStream, filter, from, 0, func(m *jetstream.RawStreamMsg) bool {
		if m.Time.After(kept.Add(documentSlack)) {
			return false
		}
		switch {
		case m.Header.Get(envelope.DocumentManifest) != "":
			if mf, err := document.ParseManifest(m.Data); err == nil && mf.SHA256 == sha {
				out = m
			}
		case m.Header.Get(envelope.DocumentPart) != "":
		default:
			if sum := sha256.Sum256(m.Data); hex.EncodeToString(sum[:]) == sha {
				out = m
			}
		}
		return out == nil
	})
	return out, err
}
