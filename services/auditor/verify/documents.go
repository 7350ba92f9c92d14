package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// The EPCIS documents the validator ingested are kept verbatim in the
// DOCUMENTS object store, each once under the hex SHA-256 of its bytes,
// never overwritten nor deleted: a record or LEDGER entry names an event's
// bytes by that SHA-256, offset and length. Verify checks both sides:
// every object's bytes hash to its name (an object overwritten or altered
// by someone who may write the bucket's stream is found), and every
// document a QUARANTINE record names is there and not deleted.

// namedCache bounds the documents whose presence verify remembers having
// checked (about 100 bytes each); one evicted is checked again when a
// record names it (a metadata read, never a wrong result).
const namedCache = 1 << 16

// metaWindow is how many objects' metadata verify holds at once.
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

// documentsNamed checks that the document each record of batch names is
// in DOCUMENTS and not deleted (its bytes are checked by documents).
func (v *verifier) documentsNamed(ctx context.Context, batch []stored) error {
	for i := range batch {
		sha := docOf(batch[i].data)
		if sha == "" || v.docs.Contains(sha) {
			continue
		}
		v.docs.Add(sha, struct{}{})
		v.rep.Documents.Named++
		if v.store == nil {
			obs, err := v.p.cfg.JS.ObjectStore(ctx, subjects.DocumentsBucket)
			if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("auditor: %s: %w", subjects.DocumentsBucket, err)
			}
			v.store = obs
		}
		why := ""
		if v.store == nil {
			why = "the DOCUMENTS object store does not exist"
		} else {
			info, err := v.store.GetInfo(ctx, sha, jetstream.GetObjectInfoShowDeleted())
			switch {
			case errors.Is(err, jetstream.ErrObjectNotFound):
				why = "DOCUMENTS holds no object of that name"
			case err != nil:
				return fmt.Errorf("auditor: %s: document %s: %w", subjects.DocumentsBucket, sha, err)
			case info.Deleted:
				why = "its DOCUMENTS object is deleted"
			}
		}
		if why != "" {
			v.problem(api.VerifyProblem{Seq: batch[i].seq, Subject: batch[i].subject, DLQID: batch[i].link.DLQID, Kind: api.ProblemDocument,
				Detail: fmt.Sprintf("the record names document %.64s: %s", sha, why)})
		}
	}
	return nil
}

// documents re-hashes every object of DOCUMENTS and reports one whose
// bytes do not hash to its name, and one deleted (a document is written
// once and never deleted). It reads the bucket's metadata with batched
// direct gets and each object chunk by chunk (streams.OpenDocument): no
// consumer, one chunk in memory at a time.
func (p *Verifier) documents(ctx context.Context, v *verifier) error {
	stream := subjects.ObjectStream(subjects.DocumentsBucket)
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
	// The metadata in windows of metaWindow objects, each window's
	// objects then re-hashed one at a time.
	for from := info.State.FirstSeq; ; {
		var metas []jetstream.ObjectInfo
		next, _, err := read.Scan(ctx, p.cfg.JS, stream, "$O."+subjects.DocumentsBucket+".M.>", from, info.State.LastSeq,
			func(m *jetstream.RawStreamMsg) bool {
				var oi jetstream.ObjectInfo
				if json.Unmarshal(m.Data, &oi) != nil {
					v.problem(api.VerifyProblem{Kind: api.ProblemDocument, Subject: m.Subject,
						Detail: fmt.Sprintf("%s sequence %d: unreadable object metadata", stream, m.Sequence)})
				} else {
					metas = append(metas, oi)
				}
				return len(metas) < metaWindow
			})
		if err != nil {
			return fmt.Errorf("auditor: read %s: %w", stream, err)
		}
		for _, oi := range metas {
			if err := p.rehash(ctx, v, oi); err != nil {
				return err
			}
		}
		if len(metas) < metaWindow || next > info.State.LastSeq {
			return nil
		}
		from = next
	}
}

// rehash reads object oi of DOCUMENTS and reports it when deleted or
// when its bytes do not hash to its name.
func (p *Verifier) rehash(ctx context.Context, v *verifier, oi jetstream.ObjectInfo) error {
	if oi.Deleted {
		v.problem(api.VerifyProblem{Kind: api.ProblemDocument,
			Detail: fmt.Sprintf("document %.64s: its DOCUMENTS object is deleted", oi.Name)})
		return nil
	}
	r, err := streams.OpenDocument(ctx, p.cfg.JS, oi.Name)
	if err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return fmt.Errorf("auditor: document %.64s: %w", oi.Name, err)
	}
	v.rep.Documents.Objects++
	v.rep.Documents.Bytes += uint64(n)
	if got := hex.EncodeToString(h.Sum(nil)); got != oi.Name {
		v.problem(api.VerifyProblem{Kind: api.ProblemDocument,
			Detail: fmt.Sprintf("document %.64s: its DOCUMENTS object's %d bytes hash to %s", oi.Name, n, got)})
	}
	return nil
}
