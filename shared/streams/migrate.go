package streams

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/subjects"
)

// LegacyDocumentsBucket is the object store earlier versions kept the EPCIS
// documents in (its stream OBJ_DOCUMENTS). Its metadata needs rollups, so
// anyone allowed to write it could erase it: DOCUMENTS is now a stream
// (Documents), and MigrateDocuments copies the old store's documents
// there. The old store is left as it was, for an administrator to remove.
const LegacyDocumentsBucket = "DOCUMENTS"

// Migrated counts what MigrateDocuments did.
type Migrated struct {
	// Copied are the documents written into DOCUMENTS.
	Copied int
	// Kept are the documents DOCUMENTS held already.
	Kept int
	// Refused are the objects not copied: a deleted object, a name that
	// is no SHA-256, or bytes that do not hash to their name. Whatever
	// names such a document finds it absent from DOCUMENTS (audit.verify
	// reports it).
	Refused int
}

// MigrateDocuments copies every document of the legacy DOCUMENTS object
// store (LegacyDocumentsBucket) that the DOCUMENTS stream lacks into it,
// through PutDocument, so each is written only if its bytes hash to its
// name. No legacy store: nothing to do. It needs to list the object
// store, which creates a consumer: the administrator's provisioning (or a
// service run without the trust boundary) does it.
func MigrateDocuments(ctx context.Context, js jetstream.JetStream) (Migrated, error) {
	var out Migrated
	if _, err := js.Stream(ctx, subjects.ObjectStream(LegacyDocumentsBucket)); errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil
	} else if err != nil {
		return out, fmt.Errorf("streams: legacy documents: %w", err)
	}
	obs, err := js.ObjectStore(ctx, LegacyDocumentsBucket)
	if err != nil {
		return out, fmt.Errorf("streams: legacy documents: %w", err)
	}
	list, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("streams: legacy documents: %w", err)
	}
	for _, info := range list {
		if info.Deleted || !ValidDocumentName(info.Name) {
			out.Refused++
			continue
		}
		if _, err := DocumentInfo(ctx, js, info.Name); err == nil || errors.Is(err, ErrDocumentCorrupt) {
			out.Kept++
			continue
		} else if !errors.Is(err, ErrDocumentNotFound) {
			return out, err
		}
		r, err := obs.Get(ctx, info.Name)
		if err != nil {
			return out, fmt.Errorf("streams: legacy document %s: %w", info.Name, err)
		}
		_, err = PutDocument(ctx, js, info.Name, r)
		_ = r.Close()
		switch {
		case errors.Is(err, ErrDocumentCorrupt) || errors.Is(err, jetstream.ErrDigestMismatch):
			out.Refused++
		case err != nil:
			return out, err
		default:
			out.Copied++
		}
	}
	return out, nil
}
