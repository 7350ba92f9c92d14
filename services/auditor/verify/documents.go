package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
)

// The EPCIS documents the validator ingested are kept verbatim in the
// write-once DOCUMENTS stream, each once under the hex SHA-256 of its
// bytes: chunks and one manifest (package streams, document.go). A record
// or LEDGER entry names an event's bytes by that SHA-256, offset and
// length. Verify checks both sides: every manifest's document is read
// whole and must hash to its name (a manifest naming absent or foreign
// chunks, garbage, altered bytes is found), and every document a
// QUARANTINE record names has a manifest. Each document that is wrong is
// one problem, its fault named (streams.DocumentFault), and verify goes
// on with the rest: no document, however forged, makes verify fail as a
// whole.

// namedCache bounds the documents whose presence verify remembers having
// checked (about 100 bytes each); one evicted is checked again when a
// record names it (a metadata read, never a wrong result).
const namedCache = 1 << 16

// metaWindow is how many manifests' places verify holds at once.
const metaWindow = 256

// documentMember is the one member of a record the document check reads.
var documentMember = []byte(`"document"`)

// docNames are the documents named by the records of a verification,
// checked once each (while cached).
type docNames = simplelru.LRU[string, struct{}]

func newDocNames() *docNames {
	c, err := simplelru.NewLRU[string, struct{}](namedCache, nil)
	if err != nil {
		panic(err)
	}
	return c
}

// docOf returns the SHA-256 of the document record raw names ("" when
// none).
func docOf(raw []byte) string {
	if !bytes.Contains(raw, documentMember) {
		return ""
	}
	var r struct {
		Document *struct {
			SHA256 string `json:"sha256"`
		} `json:"document"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Document == nil {
		return "" // an unparseable record is the chain check's
	}
	return r.Document.SHA256
}

// documentsNamed checks that the document each record of batch names has
// a manifest in DOCUMENTS (its bytes are checked by documents).
func (v *verifier) documentsNamed(ctx context.Context, batch []stored) error {
	for i := range batch {
		sha := docOf(batch[i].data)
		if sha == "" || v.docs.Contains(sha) {
			continue
		}
		v.docs.Add(sha, struct{}{})
		v.rep.Documents.Named++
		why := ""
		_, err := streams.DocumentInfo(ctx, v.p.cfg.JS, sha)
		var de *streams.DocumentError
		switch {
		case errors.Is(err, streams.ErrDocumentNotFound):
			why = "DOCUMENTS holds no manifest of that name"
		case errors.Is(err, streams.ErrDocumentName):
			why = "that is no SHA-256"
		case errors.As(err, &de):
			why = fmt.Sprintf("its manifest is wrong (%s)", de.Fault)
		case errors.Is(err, nats.ErrNoResponders):
			why = "the DOCUMENTS stream does not exist"
		case err != nil:
			return fmt.Errorf("auditor: %s: document %.64s: %w", streams.DocumentsStream, sha, err)
		}
		if why != "" {
			v.problem(api.VerifyProblem{Seq: batch[i].seq, Subject: batch[i].subject, DLQID: batch[i].link.DLQID, Kind: api.ProblemDocument,
				Detail: fmt.Sprintf("the record names document %.64q: %s", sha, why)})
		}
	}
	return nil
}

// documents reads every document of DOCUMENTS whole (streams.OpenDocument:
// each chunk the manifest names checked, then the SHA-256) and reports
// each one that is not what its name says, with its fault. It reads the
// manifests with batched direct gets (no consumer), metaWindow at a time,
// and each document chunk by chunk, one chunk in memory at a time. Only
// the store not answering stops it.
func (p *Verifier) documents(ctx context.Context, v *verifier) error {
	stream := streams.DocumentsStream
	st, err := p.cfg.JS.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // not provisioned: the records that name a document say so
	}
	if err != nil {
		return fmt.Errorf("auditor: %s: %w", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("auditor: %s: %w", stream, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	type manifest struct {
		seq     uint64
		subject string
	}
	for from := info.State.FirstSeq; ; {
		var mans []manifest
		next, _, err := read.Scan(ctx, p.cfg.JS, stream, streams.DocumentManifests, from, info.State.LastSeq,
			func(m *jetstream.RawStreamMsg) bool {
				mans = append(mans, manifest{m.Sequence, m.Subject})
				return len(mans) < metaWindow
			})
		if err != nil {
			return fmt.Errorf("auditor: read %s: %w", stream, err)
		}
		for _, m := range mans {
			if err := p.rehash(ctx, v, m.seq, m.subject); err != nil {
				return err
			}
		}
		if len(mans) < metaWindow || next > info.State.LastSeq {
			return nil
		}
		from = next
	}
}

// rehash reads the document whose manifest is at seq on subject whole and
// reports it when it is not the document its name says.
func (p *Verifier) rehash(ctx context.Context, v *verifier, seq uint64, subject string) error {
	sha := strings.TrimSuffix(strings.TrimPrefix(subject, "documents."), ".manifest")
	n, err := readDocument(ctx, p.cfg.JS, sha)
	var de *streams.DocumentError
	switch {
	case errors.As(err, &de):
		v.problem(api.VerifyProblem{Seq: seq, Subject: subject, Kind: api.ProblemDocument,
			Detail: fmt.Sprintf("document %.64q: %s: %s", sha, de.Fault, de.Detail)})
		return nil
	case errors.Is(err, streams.ErrDocumentName):
		v.problem(api.VerifyProblem{Seq: seq, Subject: subject, Kind: api.ProblemDocument,
			Detail: fmt.Sprintf("document %.64q: %s: a manifest under a name that is no SHA-256", sha, streams.FaultManifestName)})
		return nil
	case err != nil:
		return fmt.Errorf("auditor: %w", err)
	}
	v.rep.Documents.Objects++
	v.rep.Documents.Bytes += uint64(n)
	return nil
}

// readDocument reads the document sha whole, checking it: its length.
func readDocument(ctx context.Context, js jetstream.JetStream, sha string) (int64, error) {
	r, err := streams.OpenDocument(ctx, js, sha)
	if err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, r)
}
