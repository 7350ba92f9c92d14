package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// sourceExpired is what checkEntry says of an entry whose source EVENTS no
// longer holds because it is older than EVENTS' max age.
const sourceExpired = "source_expired"

// reconcileLedger walks LEDGER's entries stored in [req.From, to] (in
// req.Domain, or all) and checks that each names its source: the EVENTS
// message it was committed from (Deadletter-Source-Stream and -Seq; a
// replay's is the redriver's message in EVENTS, with the chain's dlq id),
// whose content (idempotency.CanonicalHash; the entry's content hash header is
// checked by the identity it names, idempotency.HashMatches) and idempotency
// key (the gate's, for
// its subject) are the entry's. An entry that does not is unsourced:
// counted, listed (up to maxIDs) with the reason, and it makes dlqctl
// reconcile fail. Nothing in an entry proves who wrote it (its headers are
// the writer's choice, and LEDGER is writable with the validator's
// credential): only the EVENTS message it names, which only a publisher or
// the redriver can have stored, does. A source EVENTS no longer holds is
// accepted as expired only when EVENTS' max age and the grace period say
// it can have expired (the validator commits an event within the grace
// period of its arrival); else the entry is unsourced.
func (p *Reconciler) reconcileLedger(ctx context.Context, rep *api.ReconcileReply, req api.ReconcileRequest,
	to, now time.Time, grace time.Duration, maxIDs int) error {
	if req.Domain == record.UnknownDomain {
		return nil // LEDGER holds no event of an unknown domain
	}
	filter := ""
	if req.Domain != "" {
		filter = subjects.Ledger(req.Domain, ">")
	}
	ls, err := p.cfg.JS.Stream(ctx, subjects.LedgerStream)
	if err != nil {
		return fmt.Errorf("auditor: %s: %w", subjects.LedgerStream, err)
	}
	info, err := ls.Info(ctx)
	if err != nil {
		return fmt.Errorf("auditor: %s: %w", subjects.LedgerStream, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	events, err := p.events.Info(ctx)
	if err != nil {
		return fmt.Errorf("auditor: %s: %w", subjects.EventsStream, err)
	}
	from := uint64(1)
	if !req.From.IsZero() {
		seq, found, err := read.SeqAtTime(ctx, p.cfg.JS, subjects.LedgerStream, filter, req.From)
		if err != nil {
			return fmt.Errorf("auditor: read %s: %w", subjects.LedgerStream, err)
		}
		if !found {
			return nil
		}
		from = seq
	}
	lr := &rep.Ledger
	docs := &docEntries{}
	check := func(batch []*jetstream.RawStreamMsg) error {
		reasons := make([]string, len(batch))
		current := make([]string, len(batch))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(p.cfg.LookupConcurrency)
		for i, m := range batch {
			g.Go(func() error {
				r, err := p.checkEntry(gctx, docs, m, events, now, grace)
				reasons[i] = r
				if err == nil && r != "" {
					// A sourced entry is keyed as the gate keys its
					// source now; the others are keyed from their own
					// payload.
					current[i] = p.currentKey(m)
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for i, m := range batch {
			lr.Entries++
			if k := current[i]; k != "" && subjects.Ledger(subjects.DomainOf(m.Subject, p.cfg.Gate.Domains()), k) != m.Subject {
				lr.Rekeyed++
				if len(lr.RekeyedEntries) < maxIDs {
					src, _ := strconv.ParseUint(m.Header.Get(envelope.SourceSeq), 10, 64)
					lr.RekeyedEntries = append(lr.RekeyedEntries, api.LedgerEntry{Seq: m.Sequence, Subject: m.Subject,
						SourceSeq: src, Stored: m.Time.UTC(), Reason: reasons[i], CurrentKey: k})
				}
			}
			switch reasons[i] {
			case "":
				lr.Sourced++
			case sourceExpired:
				lr.SourceExpired++
			default:
				lr.Unsourced++
				if len(lr.UnsourcedEntries) < maxIDs {
					src, _ := strconv.ParseUint(m.Header.Get(envelope.SourceSeq), 10, 64)
					lr.UnsourcedEntries = append(lr.UnsourcedEntries, api.LedgerEntry{Seq: m.Sequence, Subject: m.Subject,
						SourceSeq: src, Stored: m.Time.UTC(), Reason: reasons[i]})
				}
			}
		}
		return nil
	}
	var batch []*jetstream.RawStreamMsg
	var checkErr error
	_, _, err = read.Scan(ctx, p.cfg.JS, subjects.LedgerStream, filter, from, info.State.LastSeq, func(m *jetstream.RawStreamMsg) bool {
		if m.Time.After(to) {
			return false
		}
		if batch = append(batch, m); len(batch) == reconcileBatch {
			checkErr, batch = check(batch), nil
		}
		return checkErr == nil
	})
	if err == nil && checkErr == nil && len(batch) > 0 {
		checkErr = check(batch)
	}
	if err != nil {
		return fmt.Errorf("auditor: read %s: %w", subjects.LedgerStream, err)
	}
	return checkErr
}

// currentKey returns the idempotency key the gate derives now from the
// event a LEDGER entry holds (published on its domain's subject of the
// entry's event type), or "" when it does not pass the gate.
func (p *Reconciler) currentKey(m *jetstream.RawStreamMsg) string {
	dom := subjects.DomainOf(m.Subject, p.cfg.Gate.Domains())
	typ := m.Header.Get(envelope.EventType)
	if !subjects.ValidToken(typ) {
		return ""
	}
	env, err := p.cfg.Gate.Check(subjects.Event(dom, typ), m.Data)
	if err != nil {
		return ""
	}
	return env.IdempotencyKey
}

// checkEntry returns why the LEDGER entry m is unsourced (api.Unsourced*),
// sourceExpired, or "" when its source is the EVENTS message it names
// (events is EVENTS' info). An entry committed from an EPCIS document
// names the document's message and its position in it
// (checkDocumentEntry; docs remembers the documents read).
func (p *Reconciler) checkEntry(ctx context.Context, docs *docEntries, m *jetstream.RawStreamMsg, events *jetstream.StreamInfo, now time.Time, grace time.Duration) (string, error) {
	src, err := strconv.ParseUint(m.Header.Get(envelope.SourceSeq), 10, 64)
	if m.Header.Get(envelope.SourceStream) != subjects.EventsStream || err != nil || src == 0 {
		return api.UnsourcedNoSource, nil
	}
	// The content hash header is checked by the identity it names (an
	// entry written before the domain's content identity changed carries
	// the JCS hash, and no identity header); the entry's payload is then
	// compared with its source's byte for byte up to RFC 8785 (the LEDGER
	// entry is its source's event, whatever the content identity lets a
	// duplicate differ in).
	if h := m.Header.Get(envelope.ContentHash); h != "" &&
		!idempotency.HashMatches(subjects.DomainOf(m.Subject, p.cfg.Gate.Domains()), m.Header.Get(envelope.ContentIdentity), h, m.Data) {
		return api.UnsourcedContentMismatch, nil
	}
	hash := idempotency.CanonicalHash(m.Data)
	ev, err := p.events.GetMsg(ctx, src)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		maxAge := events.Config.MaxAge
		if src < events.State.FirstSeq && maxAge > 0 && now.Sub(m.Time) >= maxAge-grace {
			return sourceExpired, nil
		}
		return api.UnsourcedSourceMissing, nil
	}
	if err != nil {
		return "", fmt.Errorf("auditor: read the source of a LEDGER entry: %w", err)
	}
	if subjects.IsDocument(ev.Subject, dscsa.Name) && m.Header.Get(envelope.DocumentSHA256) != "" {
		return p.checkDocumentEntry(ctx, docs, m, ev, hash)
	}
	if idempotency.CanonicalHash(ev.Data) != hash {
		return api.UnsourcedContentMismatch, nil
	}
	env, err := p.cfg.Gate.Check(ev.Subject, ev.Data)
	if err != nil || subjects.Ledger(env.Domain, env.IdempotencyKey) != m.Subject {
		return api.UnsourcedKeyMismatch, nil
	}
	if dlqID, _ := envelope.RedriveOf(ev.Subject, ev.Header); m.Header.Get(envelope.DLQID) != dlqID {
		return api.UnsourcedKeyMismatch, nil
	}
	return "", nil
}
