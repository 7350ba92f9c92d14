package quarantiner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Errors of a repair, answered with their codes.
var (
	// errNotSettled: the validator's consumer may still deliver the event.
	errNotSettled = errors.New("the validator's consumer has not settled this event: it may still be delivered")
	// errNoSuchEvent: the document holds no event at the index named.
	errNoSuchEvent = errors.New("the document holds no event at that index")
	// errCommitted: LEDGER holds the event's commit from this very
	// message (and position): it has its outcome.
	errCommitted = errors.New("the event is committed in LEDGER from this message: it has its outcome")
	// errPartsNotRepaired: a document published in parts is read from
	// DOCUMENTS, which the quarantiner does not read.
	errPartsNotRepaired = errors.New("an event of a document published in parts is not repaired by the quarantiner")
)

// handleRepair seals the record of an event left without an outcome
// (quarantiner.repair, the auditor's reconciliation): the advisory that
// never came, issued again. The quarantiner reads the original from
// EVENTS itself (the caller names only where it is) and seals it only
// once the validator's consumer has settled the message, so that no later
// commit can sit beside it; like every other path, ingest writes one
// record per chain, whoever came first.
func (s *Service) handleRepair(r micro.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx, span := s.tr.StartRequest(ctx, r.Subject(), nats.Header(r.Headers()), telemetry.Operation("repair"))
	defer span.End()
	var req api.RepairRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil || req.Stream != subjects.EventsStream || req.Seq == 0 ||
		(req.DocumentIndex != nil && *req.DocumentIndex < 0) {
		telemetry.Error(span, api.ErrBadRequest)
		_ = r.Error(api.ErrBadRequest, "a repair names an EVENTS sequence (and, for an event of a document, its index)", nil)
		return
	}
	rep, code, err := s.repair(ctx, req)
	if err != nil {
		telemetry.Error(span, code)
		s.log.Warn("repair refused", "seq", req.Seq, "code", code, "err", err)
		_ = r.Error(code, err.Error(), nil)
		return
	}
	_ = r.RespondJSON(rep)
}

// repair builds the exhausted failure of the event req names and ingests
// it.
func (s *Service) repair(ctx context.Context, req api.RepairRequest) (api.RepairReply, string, error) {
	c, err := s.js.Consumer(ctx, subjects.EventsStream, subjects.ValidatorConsumer)
	if err != nil {
		return api.RepairReply{}, api.ErrUnavailable, fmt.Errorf("the validator's consumer: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return api.RepairReply{}, api.ErrUnavailable, fmt.Errorf("the validator's consumer: %w", err)
	}
	if !streams.Settled(info, req.Seq) {
		return api.RepairReply{}, api.ErrConflict, errNotSettled
	}
	deliveries := uint64(max(info.Config.MaxDeliver, 0))
	f, err := s.original(ctx, advisory{Stream: req.Stream, StreamSeq: req.Seq, Deliveries: deliveries, Consumer: info.Name,
		Timestamp: s.now().UTC()})
	if err != nil {
		return api.RepairReply{}, api.ErrUnavailable, err
	}
	why := fmt.Sprintf("no outcome after %d deliveries: %s (%s)", deliveries, api.RepairedBy, req.By)
	if req.DocumentIndex != nil {
		if f, err = s.documentEvent(f, *req.DocumentIndex); err != nil {
			return api.RepairReply{}, api.ErrBadRequest, err
		}
	}
	if committed, err := s.committedFrom(ctx, f, req); err != nil {
		return api.RepairReply{}, api.ErrUnavailable, err
	} else if committed {
		return api.RepairReply{}, api.ErrConflict, errCommitted
	}
	f.Class = record.ClassExhausted
	switch n := len(f.Attempts); {
	case f.Code != "": // the gate refuses it, or the original is gone
		f.Detail += "; " + why
	case n > 0 && req.DocumentIndex == nil:
		f.Code, f.Detail = f.Attempts[n-1].Code, f.Attempts[n-1].Reason+"; "+why
	default:
		f.Code, f.Detail = codes.MaxDeliveriesExceeded, why
	}
	out, err := s.ingest(ctx, f)
	if err != nil {
		return api.RepairReply{}, api.ErrUnavailable, err
	}
	rep := api.RepairReply{DLQID: record.DLQIDFor(f), Written: out.written != nil, Duplicate: out.duplicate}
	if out.written != nil {
		s.metrics.writeSeconds.Observe(since(f.FailedAt))
		s.logRecord(ctx, out.written, out.seq)
	}
	return rep, "", nil
}

// documentEvent narrows the failure of an EVENTS message carrying a whole
// EPCIS document to its event index: the event's own bytes, subject (its
// bizStep's, under the document's publisher), envelope and provenance, as
// the validator reports an event of a document.
func (s *Service) documentEvent(f record.Failure, index int) (record.Failure, error) {
	if !subjects.IsDocument(f.Subject, dscsa.Name) {
		return f, errNoSuchEvent
	}
	if h := nats.Header(f.Headers); h.Get(envelope.DocumentManifest) != "" || h.Get(envelope.DocumentPart) != "" {
		return f, errPartsNotRepaired
	}
	var doc envelope.Document
	var found *document.Event
	begin := func(info *document.Info) {
		doc = envelope.Document{ID: info.ID, SHA256: info.SHA256, Format: info.Format, Count: info.Count, Sender: info.Sender,
			Receiver: info.Receiver, Stream: f.Stream, Seq: f.Seq}
		if doc.ID == "" {
			doc.ID = info.SHA256
		}
		if !info.Created.IsZero() {
			doc.Created = info.Created.Format(time.RFC3339Nano)
		}
	}
	stop := errors.New("found")
	_, err := document.ScanSourceWith(document.Bytes(f.Payload), begin, func(ev document.Event) error {
		if ev.Index == index {
			e := ev
			e.Data = append([]byte(nil), ev.Data...)
			found = &e
			return stop
		}
		return nil
	})
	if found == nil {
		if err != nil && !errors.Is(err, stop) {
			return f, fmt.Errorf("%w: %w", errNoSuchEvent, err)
		}
		return f, errNoSuchEvent
	}
	publisher := subjects.PublisherOf(f.Subject)
	f.Subject = document.EventSubject(publisher, found.Data)
	f.Payload = found.Data
	f.DLQID, f.RedriveCount = "", 0
	f.Code, f.Detail = "", ""
	env, err := s.gate.Check(f.Subject, found.Data)
	if err != nil {
		f.Code, f.Detail = codes.Of(err), codes.DetailOf(err)
		env = s.gate.Identify(f.Subject, found.Data)
	}
	env.Publisher = publisher
	d := doc
	d.Index, d.Offset, d.Length = found.Index, found.Offset, found.Length
	env.Document = &d
	f.Envelope = &env
	f.Attempts = nil
	return f, nil
}

// committedFrom reports whether LEDGER holds the commit of f's event from
// the very message (and, for an event of a document, the position) the
// repair names: such an event has its outcome, and a record beside it
// would say it failed (a stolen auditor credential asking would forge
// one).
func (s *Service) committedFrom(ctx context.Context, f record.Failure, req api.RepairRequest) (bool, error) {
	if f.Envelope == nil || f.Envelope.IdempotencyKey == "" || f.Envelope.Partial {
		return false, nil
	}
	ledger, err := s.js.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", subjects.LedgerStream, err)
	}
	m, err := ledger.GetLastMsgForSubject(ctx, subjects.Ledger(f.Domain, f.Envelope.IdempotencyKey))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", subjects.LedgerStream, err)
	}
	if m.Header.Get(envelope.SourceSeq) != strconv.FormatUint(req.Seq, 10) {
		return false, nil
	}
	if req.DocumentIndex != nil {
		return m.Header.Get(envelope.DocumentIndex) == strconv.Itoa(*req.DocumentIndex), nil
	}
	return true, nil
}
