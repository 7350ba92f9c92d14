package validator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// docTally counts the outcomes of one delivery of a document.
type docTally struct {
	committed, duplicates, quarantined, transient, unreported atomic.Int64
}

// handleDocument ingests an EPCIS document published as one message
// (subjects.IsDocument): each of its events goes through the gate on its
// own and is committed to LEDGER (through the batcher, like single
// events) or reported to FAILURES on its own, under its own key, with the
// document's provenance (envelope.Document) in its envelope. The
// document's bytes are kept verbatim in the DOCUMENTS object store first
// (always: every committed or quarantined event names its exact original
// bytes there, for as long as LEDGER and QUARANTINE keep it, while EVENTS
// expires the message). A document that cannot be read is reported whole
// (MALFORMED_DOCUMENT, its bytes verbatim) and terminated, like a single
// event that fails validation.
//
// The message is acknowledged only once every event ended in a commit
// (or was found committed) or a stored failure report. Otherwise (a
// transient failure, a report not stored) it is redelivered later and
// processed again: its committed events are then duplicates by the
// content rule, and its failure reports are de-duplicated by FAILURES
// (Nats-Msg-Id "failure-doc-<sha256>-<index>") and by the quarantiner
// (one chain per dlq id). On its last delivery an event that still fails
// transiently is reported exhausted, on its own.
func (s *Service) handleDocument(ctx context.Context, d delivery, attempts jetstream.KeyValue) {
	m, meta := d.m, d.meta
	h := m.Headers()
	switch {
	case h.Get(envelope.DocumentPart) != "":
		// A part of a document published in parts: kept in EVENTS, read
		// back when its manifest comes.
		s.settle(d, acked())
		return
	case h.Get(envelope.DocumentManifest) != "":
		s.handleManifest(ctx, d, attempts)
		return
	}
	data := m.Data()
	doc, err := document.Check(document.Bytes(data))
	if err != nil {
		// Quarantined whole: named by its subject and bytes (a partial
		// envelope), so the same bytes land in the same chain.
		env := &envelope.Envelope{Domain: dscsa.Name, EventType: subjects.DocumentType, Publisher: d.publisher, Partial: true}
		s.structural(ctx, d, env, record.StageValidate, err, attempts)
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.documentTimeout(int64(len(data))))
	defer cancel()
	stop := s.keepInProgress(m)
	defer stop()
	if err := s.keepDocument(dctx, doc.Info, data); err != nil {
		s.documentRetry(ctx, d, doc.Info.SHA256, err)
		return
	}
	// Checked once above; read once more to hand its events over.
	s.ingestDocument(ctx, dctx, d, doc, meta.Sequence.Stream)
}

// documentTimeout bounds the handling of a document of size bytes: the
// delivery's ProcessTimeout, and 2 ms per KiB (about one event).
func (s *Service) documentTimeout(size int64) time.Duration {
	return s.cfg.ProcessTimeout + time.Duration(size>>10)*2*time.Millisecond
}

// documentRetry schedules a redelivery of a document whose bytes could not
// be kept (or read back): transient, with back-off.
func (s *Service) documentRetry(ctx context.Context, d delivery, sha string, err error) {
	meta := d.meta
	s.stats.transient.Add(1)
	s.metrics.outcome(outcomeTransient)
	telemetry.Fail(trace.SpanFromContext(ctx), codes.Of(err), telemetry.ClassTransient, telemetry.StageKey.String(record.StageCommit))
	s.log.Warn("document not kept; retrying", "seq", meta.Sequence.Stream, "sha256", sha, "code", codes.Of(err), "err", err)
	s.settle(d, retryAfter(backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, meta.NumDelivered)))
}

// handleManifest ingests a document published in parts: it reads the
// parts the manifest names back from EVENTS (each must be a part of this
// upload, in order, on the manifest's own subject: the same publisher),
// checks their SHA-256, keeps the document in DOCUMENTS and reads it from
// there as a stream. A manifest whose parts do not make the document it
// names, or a document that cannot be read, is quarantined whole (the
// manifest, which names the document's SHA-256; a document that was
// assembled is in DOCUMENTS).
func (s *Service) handleManifest(ctx context.Context, d delivery, attempts jetstream.KeyValue) {
	m, meta := d.m, d.meta
	man, err := document.ParseManifest(m.Data())
	whole := func(err error, doc *envelope.Document) {
		env := &envelope.Envelope{Domain: dscsa.Name, EventType: subjects.DocumentType, Publisher: d.publisher, Partial: true, Document: doc}
		s.structural(ctx, d, env, record.StageValidate, err, attempts)
	}
	if err != nil {
		whole(err, nil)
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.documentTimeout(man.Size))
	defer cancel()
	stop := s.keepInProgress(m)
	defer stop()
	if err := s.assemble(dctx, m.Subject(), man); err != nil {
		if codes.Of(err) == dscsa.MalformedDocument {
			whole(err, nil)
			return
		}
		s.documentRetry(ctx, d, man.SHA256, err)
		return
	}
	doc, err := document.Check(func() (io.Reader, error) { return s.openDocument(dctx, man.SHA256) })
	if err != nil {
		if codes.Of(err) == dscsa.MalformedDocument {
			whole(err, &envelope.Document{ID: man.SHA256, SHA256: man.SHA256, Stream: meta.Stream, Seq: man.Parts[0], Length: int(man.Size)})
			return
		}
		s.documentRetry(ctx, d, man.SHA256, codes.Wrap(codes.StoreUnavailable, err, "document read failed"))
		return
	}
	s.ingestDocument(ctx, dctx, d, doc, man.Parts[0])
}

// assemble keeps the document a manifest names in DOCUMENTS, once: read
// from its parts in EVENTS, checked (every part of this upload, in order,
// on subject; the size and SHA-256 the manifest names) before it is
// written, then written from the parts again, one part in memory at a
// time.
func (s *Service) assemble(ctx context.Context, subject string, man *document.Manifest) error {
	if obj, err := streams.DocumentInfo(ctx, s.js, man.SHA256); err == nil {
		if obj.Size != man.Size {
			return codes.Errorf(codes.Internal, "document %s kept in DOCUMENTS does not hold the document's bytes", man.SHA256)
		}
		return nil
	} else if !errors.Is(err, streams.ErrDocumentNotFound) {
		return documentStoreError(err, man.SHA256)
	}
	events, err := s.js.Stream(ctx, subjects.EventsStream)
	if err != nil {
		return codes.Wrap(codes.StoreUnavailable, err, "events stream lookup failed")
	}
	part := func(i int) ([]byte, error) {
		raw, err := events.GetMsg(ctx, man.Parts[i])
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return nil, codes.Errorf(dscsa.MalformedDocument, "document part %d of %d is not in EVENTS", i+1, len(man.Parts))
		case err != nil:
			return nil, codes.Wrap(codes.StoreUnavailable, err, "document part read failed")
		case raw.Subject != subject || raw.Header.Get(envelope.DocumentUpload) != man.Upload ||
			raw.Header.Get(envelope.DocumentPart) != document.PartHeader(i+1):
			return nil, codes.Errorf(dscsa.MalformedDocument, "document part %d of %d is not a part of this upload", i+1, len(man.Parts))
		}
		return raw.Data, nil
	}
	h := sha256.New()
	var size int64
	for i := range man.Parts {
		b, err := part(i)
		if err != nil {
			return err
		}
		h.Write(b)
		size += int64(len(b))
	}
	if size != man.Size || hex.EncodeToString(h.Sum(nil)) != man.SHA256 {
		return codes.Errorf(dscsa.MalformedDocument, "document parts do not make the document the manifest names (size or SHA-256)")
	}
	pr, pw := io.Pipe()
	go func() {
		for i := range man.Parts {
			b, err := part(i)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := pw.Write(b); err != nil {
				return
			}
		}
		pw.Close()
	}()
	// PutDocument writes the manifest only when the bytes written hash to
	// the name: parts that changed between the two reads (they cannot:
	// EVENTS is append-only) are never ingested.
	obj, err := streams.PutDocument(ctx, s.js, man.SHA256, pr)
	_ = pr.Close()
	if err != nil {
		return documentStoreError(err, man.SHA256)
	}
	if obj.Size != man.Size {
		return codes.Errorf(codes.Internal, "document %s kept in DOCUMENTS does not hold the document's bytes", man.SHA256)
	}
	return nil
}

// openDocument reads a document kept in DOCUMENTS as a stream, chunk by
// chunk, by message gets on the bucket's stream (no consumer: the
// validator may read the stream, not create consumers on it).
func (s *Service) openDocument(ctx context.Context, name string) (io.Reader, error) {
	r, err := streams.OpenDocument(ctx, s.js, name)
	if err != nil {
		return nil, codes.Wrap(codes.StoreUnavailable, err, "document open failed")
	}
	return r, nil
}

// ingestDocument runs each event of a checked document (document.Check:
// its first pass, done by the caller) through the gate and commits or
// reports it (handleDocument), then acknowledges the message, or
// schedules its redelivery.
//
// A replay of a whole-document chain (dlqID, replay number redrives: a
// document quarantined MALFORMED_DOCUMENT, corrected or redriven) has its
// events committed or quarantined on their own chains like any document's;
// before the message is acknowledged, the outcome of the replay is
// reported to FAILURES (record.Failure.Replayed, reportDocumentReplay), so
// that the document's chain gets its replayed record and the redriver its
// outcome at once, never waiting for its outcome timeout.
func (s *Service) ingestDocument(ctx, dctx context.Context, dl delivery, doc *document.Checked, firstSeq uint64) {
	meta, publisher, dlqID := dl.meta, dl.publisher, dl.dlqID
	span := trace.SpanFromContext(ctx)
	info := doc.Info
	span.SetAttributes(attribute.String("deadletter.document_sha256", info.SHA256), attribute.Int("deadletter.document_events", info.Count))
	base := envelope.Document{ID: info.ID, SHA256: info.SHA256, Format: info.Format, Count: info.Count, Sender: info.Sender,
		Receiver: info.Receiver, Stream: meta.Stream, Seq: firstSeq}
	if base.ID == "" {
		base.ID = info.SHA256
	}
	if !info.Created.IsZero() {
		base.Created = info.Created.Format(time.RFC3339Nano)
	}
	last := s.lastAttempt(meta)
	var tally docTally
	var wg sync.WaitGroup
	err := doc.Scan(func(ev document.Event) error {
		if err := dctx.Err(); err != nil {
			// Out of time: the rest is redelivered.
			return err
		}
		d := base
		d.Index, d.Offset, d.Length = ev.Index, ev.Offset, ev.Length
		// Decoded once: the gate checks the decoded event on its
		// document's domain and its own type, never a subject parsed apart.
		subject, eventType, decoded := document.DecodeEvent(publisher, ev.Data)
		gev := gate.Event{Domain: dscsa.Name, Type: eventType, Data: ev.Data, Doc: decoded, XML: info.Format == document.FormatXML}
		env, err := s.checkEvent(subject, gev)
		if err == nil {
			env.Publisher = publisher
			err = s.authorize(env)
		}
		if err != nil {
			// Identified from the bytes afresh: a failed check may have
			// left the decoded form part-way.
			id := s.gate.IdentifyEvent(gate.Event{Domain: gev.Domain, Type: gev.Type, Data: ev.Data})
			id.Publisher = publisher
			id.Document = &d
			s.documentFailure(dctx, dl, candidate{subject: subject, domain: dscsa.Name, data: ev.Data, env: &id}, record.ClassValidation, record.StageValidate, err, &tally)
			return nil
		}
		env.Document = &d
		hash := idempotency.CheckedDocHash(env, ev.Data, decoded)
		wg.Add(1)
		c := candidate{subject: subject, domain: dscsa.Name, data: ev.Data, env: &env}
		then := func(ledgerSeq uint64, err error) {
			defer wg.Done()
			switch classify(err, last) {
			case resultCommitted:
				tally.committed.Add(1)
				s.stats.committed.Add(1)
				s.metrics.outcome(outcomeCommitted)
			case resultDuplicate:
				tally.duplicates.Add(1)
				s.stats.duplicates.Add(1)
				s.metrics.outcome(outcomeDuplicate)
			case resultRetry:
				tally.transient.Add(1)
				s.stats.transient.Add(1)
				s.metrics.outcome(outcomeTransient)
				s.metrics.failure(env.Domain, codes.Of(err))
			case resultExhausted:
				s.documentFailure(dctx, dl, c, record.ClassExhausted, record.StageCommit, err, &tally)
			default:
				s.documentFailure(dctx, dl, c, record.ClassValidation, record.StageCommit, err, &tally)
			}
		}
		if s.commit.batch != nil {
			s.commit.batch.submit(dctx, env, ev.Data, hash, meta.Sequence.Stream, "", then)
			return nil
		}
		then(s.commit.commit(dctx, env, ev.Data, hash, meta.Sequence.Stream, ""))
		return nil
	})
	wg.Wait()
	if err != nil {
		// The first pass read it: a failure of the second (a store read,
		// time out) is retried, never acknowledged half-done.
		s.log.Error("document scan failed", "seq", meta.Sequence.Stream, "sha256", base.SHA256, "code", codes.Of(err))
		s.settle(dl, retryAfter(backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, meta.NumDelivered)))
		return
	}
	span.SetAttributes(attribute.Int64("deadletter.document_committed", tally.committed.Load()),
		attribute.Int64("deadletter.document_duplicates", tally.duplicates.Load()),
		attribute.Int64("deadletter.document_quarantined", tally.quarantined.Load()))
	if n := tally.transient.Load() + tally.unreported.Load(); n > 0 {
		delay := backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, meta.NumDelivered)
		telemetry.Fail(span, codes.StoreUnavailable, telemetry.ClassTransient, telemetry.StageKey.String(record.StageCommit))
		s.log.Info("document events to retry", "seq", meta.Sequence.Stream, "sha256", base.SHA256, "events", n,
			"delivery", meta.NumDelivered, "delay_ms", delay.Milliseconds())
		s.settle(dl, retryAfter(delay))
		return
	}
	if dlqID != "" {
		if err := s.reportDocumentReplay(dctx, dl, base.Count, &tally); err != nil {
			// Every event has its outcome; the next delivery finds them
			// committed or reported and reports the replay again.
			s.log.Error("document replay outcome not stored; will retry", "seq", meta.Sequence.Stream, "dlq_id", dlqID, "err", err)
			s.settle(dl, retryAfter(backoff(s.cfg.BackoffBase, s.cfg.BackoffMax, meta.NumDelivered)))
			return
		}
	}
	span.SetAttributes(telemetry.DomainKey.String(dscsa.Name), telemetry.OutcomeKey.String("document"))
	s.settle(dl, acked())
	s.log.Info("document ingested", "seq", meta.Sequence.Stream, "sha256", base.SHA256, "events", base.Count,
		"committed", tally.committed.Load(), "duplicates", tally.duplicates.Load(), "quarantined", tally.quarantined.Load())
}

// documentFailure reports one event of a document to FAILURES, de-duplicated
// by the document's SHA-256 and the event's index, and counts it reported
// (or, when the report could not be stored, to be retried).
func (s *Service) documentFailure(ctx context.Context, dl delivery, c candidate, class record.Class, stage string, err error, tally *docTally) {
	meta := dl.meta
	why, now := causeOf(err), time.Now().UTC()
	code := why.code
	f := failureOf(dl, c, class, why, []record.Attempt{dl.attempt(stage, why, now)}, now)
	d := c.env.Document
	if err := s.storeFailure(ctx, dl, f, DocumentFailureID(d.SHA256, d.Index)); err != nil {
		tally.unreported.Add(1)
		s.log.Error("document event failure not stored; will retry", "seq", meta.Sequence.Stream, "index", d.Index, "code", code, "err", err)
		return
	}
	tally.quarantined.Add(1)
	s.stats.structural.Add(1)
	if class == record.ClassExhausted {
		s.stats.exhausted.Add(1)
		s.metrics.outcome(outcomeExhausted)
	} else {
		s.metrics.outcome(outcomeStructural)
	}
	s.metrics.failure(dscsa.Name, code)
	s.log.Info("document event rejected", "seq", meta.Sequence.Stream, "index", d.Index, "code", code, "stage", stage,
		"dlq_id", record.DLQIDFor(f))
}

// reportDocumentReplay reports the outcome of replay redrives of the
// whole-document chain dlqID (the message m, of count events, tallied in
// tally) to FAILURES, for the quarantiner to append the chain's replayed
// record, de-duplicated by DocumentReplayID (and by the quarantiner: one
// record per replay message).
func (s *Service) reportDocumentReplay(ctx context.Context, d delivery, count int, tally *docTally) error {
	meta, dlqID, redrives := d.meta, d.dlqID, d.redrives
	f := d.report(time.Now().UTC())
	f.Domain, f.Subject, f.DLQID, f.RedriveCount = dscsa.Name, d.m.Subject(), dlqID, redrives
	f.Replayed = &record.DocumentReplay{Events: count, Committed: int(tally.committed.Load()), Duplicates: int(tally.duplicates.Load()),
		Quarantined: int(tally.quarantined.Load())}
	if err := s.storeFailure(ctx, d, f, DocumentReplayID(dlqID, redrives)); err != nil {
		return err
	}
	s.log.Info("document replayed", "seq", meta.Sequence.Stream, "dlq_id", dlqID, "redrive_count", redrives, "events", count,
		"committed", f.Replayed.Committed, "duplicates", f.Replayed.Duplicates, "quarantined", f.Replayed.Quarantined)
	return nil
}

// DocumentReplayID is the Nats-Msg-Id of the outcome report of replay
// redrives of the whole-document chain dlqID.
func DocumentReplayID(dlqID string, redrives int) string {
	return "replayed-doc-" + dlqID + "-" + strconv.Itoa(redrives)
}

// DocumentFailureID is the Nats-Msg-Id of the failure report of event
// index of the document whose bytes have the hex SHA-256 sha: the same on
// every delivery of the document (and every copy of it published within
// FAILURES' de-duplication window).
func DocumentFailureID(sha string, index int) string { return record.DocumentFailureMsgID(sha, index) }

// keepDocument stores the document's bytes in DOCUMENTS under their hex
// SHA-256, once: a document stored already (an earlier delivery, or copy)
// is left as it is, after checking its digest.
func (s *Service) keepDocument(ctx context.Context, info *document.Info, data []byte) error {
	obj, err := streams.DocumentInfo(ctx, s.js, info.SHA256)
	switch {
	case err == nil:
		if obj.Size != int64(len(data)) {
			return codes.Errorf(codes.Internal, "document %s kept in DOCUMENTS does not hold the document's bytes", info.SHA256)
		}
		return nil
	case !errors.Is(err, streams.ErrDocumentNotFound):
		return documentStoreError(err, info.SHA256)
	}
	if _, err := streams.PutDocument(ctx, s.js, info.SHA256, bytes.NewReader(data)); err != nil {
		return documentStoreError(err, info.SHA256)
	}
	return nil
}

// documentStoreError classifies an error of DOCUMENTS: what it holds under
// the document's name is not the document (streams.ErrDocumentCorrupt, an
// internal error: audit.verify names it), or the store did not answer.
func documentStoreError(err error, sha string) error {
	if errors.Is(err, streams.ErrDocumentCorrupt) {
		return codes.Wrap(codes.Internal, err, "document "+sha+" kept in DOCUMENTS does not hold the document's bytes")
	}
	return codes.Wrap(codes.StoreUnavailable, err, "document store failed")
}

// keepInProgress tells the server, every third of the AckWait, that the
// delivery is still being processed, until the returned stop is called.
func (s *Service) keepInProgress(m jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(max(s.cfg.AckWait/3, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}
