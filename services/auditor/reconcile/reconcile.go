package reconcile

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/idempotency"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// defaultMaxIDs caps the events listed per category.
const defaultMaxIDs = 1000

// reconcileBatch is how many events are classified together: gate checks
// in parallel, then IDEMPOTENCY lookups with LookupConcurrency in flight.
const reconcileBatch = 512

// event is one EVENTS message being reconciled.
type event struct {
	api.ReconcileEvent
	data     []byte
	replayOf string // the dlq id a redriver replay names (envelope.RedriveOf)
	// hash is the event's idempotency.ContentHash (when it passed the gate);
	// conflictID the chain an IDEMPOTENCY_CONFLICT of it is quarantined
	// in (record.ConflictDLQID), set when its key is committed with other
	// content.
	hash       string
	conflictID string
	state      idempotency.KeyState
	found      bool
	category   string
	class      string
	// part: a part of a document published in parts (its events are
	// the manifest's).
	part bool
	// ledgerIndex is the position in its document of the event LEDGER's
	// entry of its key was committed from (-1: not read, or not from a
	// document).
	ledgerIndex int
}

// fromThis reports whether e's key is committed from this very event: its
// EVENTS message and, for an event of a document (whose events share the
// message), its position there. Another event of the same document with
// the same key is a duplicate or a conflict, never a second commit.
func (e *event) fromThis() bool {
	if !e.found || !e.state.Committed() || e.state.SourceSeq != e.Seq {
		return false
	}
	return e.DocumentIndex == nil || e.ledgerIndex == *e.DocumentIndex
}

// chainView is what reconciliation needs of the chain an event names: its
// status and class, and where its original (record 0's source) is.
type chainView struct {
	status       record.Status
	class        string
	sourceStream string
	sourceSeq    uint64
}

// Reconcile accounts for every event EVENTS received in [From, To] (in
// Domain, or all): it recomputes the idempotency key with the validation
// gate (an event that does not parse is named by its source-derived dlq
// id, as the quarantiner names it) and finds it committed from this very
// message (in IDEMPOTENCY, or in LEDGER, the system of record, when the
// key's mark is missing), quarantined (open by class, redriving, poison,
// resolved), a duplicate of a key committed or quarantined from another
// message, a conflict (its key committed with other content, and the event
// quarantined IDEMPOTENCY_CONFLICT), or a redriver replay of an existing
// chain. Anything else is
// pending within the grace period and unaccounted after it. Memory is
// bounded by the batch size plus the ids listed, not by the events read.
//
// Then it walks LEDGER the other way (reconcileLedger): every entry stored
// in the range must name the EVENTS message it was committed from, with
// the same content and key; the others are listed unsourced.
//
// With req.Repair, every unaccounted event the validator has settled is
// then given an outcome (repair), on behalf of the auditor itself.
func (p *Reconciler) Reconcile(ctx context.Context, req api.ReconcileRequest) (api.ReconcileReply, error) {
	return p.ReconcileBy(ctx, req, Actor{User: "auditor"})
}

// ReconcileBy is Reconcile, a repair recorded in AUDIT as by's.
func (p *Reconciler) ReconcileBy(ctx context.Context, req api.ReconcileRequest, by Actor) (api.ReconcileReply, error) {
	start := time.Now()
	grace := p.cfg.Grace
	if req.Grace != "" {
		d, err := time.ParseDuration(req.Grace)
		if err != nil || d < 0 {
			return api.ReconcileReply{}, api.Errorf(api.ErrBadRequest, "grace is not a duration: use 30s, 5m or 1h")
		}
		grace = d
	}
	now := p.cfg.Now().UTC()
	to := req.To.UTC()
	if req.To.IsZero() || to.After(now) {
		to = now
	}
	maxIDs := req.MaxIDs
	if maxIDs <= 0 {
		maxIDs = defaultMaxIDs
	}
	rep := api.ReconcileReply{Domain: req.Domain, From: req.From.UTC(), To: to, Grace: grace.String(),
		Counts: map[string]int{}, OpenByClass: map[string]int{}, Unaccounted: []api.ReconcileEvent{},
		Ledger: api.LedgerReconcile{UnsourcedEntries: []api.LedgerEntry{}}}
	if req.IDs {
		rep.IDs = map[string][]api.ReconcileEvent{}
	}
	if err := req.Validate(); err != nil { // requests are validated already; the background one is here
		return rep, err
	}
	if !req.From.IsZero() && req.From.After(to) {
		rep.Seconds = time.Since(start).Seconds()
		return rep, nil // an empty range (From in the future)
	}
	// EVENTS holds the publishers' events (events.>) and the redriver's
	// replays (redriven.<domain>.<type>.<dlq_id>.<n>, and the replay.> of
	// earlier redrivers, sourced from REPLAYS): the domain is the second
	// token of each, so a domain's are "*.<domain>.>".
	// A publisher's events are "events.<publisher>.<domain>.<type>"
	// (subjects.Published), so no one subject filter covers a domain: the
	// scan reads every message and keeps the domain's (subjects.DomainOf).
	filter := ">"
	if req.Domain != "" && req.Domain != record.UnknownDomain && !read.ValidToken(req.Domain) {
		return rep, api.Errorf(api.ErrBadRequest, "domain is not a subject token")
	}
	info, err := p.events.Info(ctx)
	if err != nil {
		return rep, fmt.Errorf("auditor: %w", err)
	}
	var unaccounted []event
	if info.State.Msgs > 0 {
		keep := func(e event) {
			if req.Repair && len(unaccounted) < maxRepairs {
				unaccounted = append(unaccounted, e)
			}
		}
		if err := p.reconcileStream(ctx, &rep, req, filter, info.State.LastSeq, to, now, grace, maxIDs, keep); err != nil {
			return rep, err
		}
	}
	if err := p.repair(ctx, &rep, unaccounted, by, maxIDs); err != nil {
		return rep, err
	}
	if err := p.reconcileLedger(ctx, &rep, req, to, now, grace, maxIDs); err != nil {
		return rep, err
	}
	if req.Domain == "" { // a reconciliation of every domain sets the gauges
		p.cfg.Unaccounted.Set(float64(rep.Counts[api.ReconcileUnaccounted]))
		p.cfg.Conflicts.Set(float64(rep.Counts[api.ReconcileConflict]))
		p.cfg.Unsourced.Set(float64(rep.Ledger.Unsourced))
		p.cfg.LastRun.Set(float64(now.Unix()))
	}
	for _, e := range rep.Unaccounted {
		p.cfg.Log.Warn("AUDIT_UNACCOUNTED_EVENT", "seq", e.Seq, "subject", e.Subject, "key", e.Key, "dlq_id", e.DLQID)
	}
	for _, e := range rep.Ledger.UnsourcedEntries {
		p.cfg.Log.Warn("AUDIT_UNSOURCED_LEDGER_ENTRY", "ledger_seq", e.Seq, "subject", e.Subject, "source_seq", e.SourceSeq, "reason", e.Reason)
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// reconcileStream reads EVENTS through filter from req.From up to "to",
// classifying batches while the next one is read.
func (p *Reconciler) reconcileStream(ctx context.Context, rep *api.ReconcileReply, req api.ReconcileRequest,
	filter string, lastSeq uint64, to, now time.Time, grace time.Duration, maxIDs int, unaccounted func(event)) error {
	from := uint64(1)
	if !req.From.IsZero() {
		seq, found, err := read.SeqAtTime(ctx, p.cfg.JS, subjects.EventsStream, filter, req.From)
		if err != nil {
			return fmt.Errorf("auditor: read %s: %w", subjects.EventsStream, err)
		}
		if !found {
			return nil // nothing received since From
		}
		from = seq
	}
	batches := make(chan []event, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		batch := make([]event, 0, reconcileBatch)
		var docErr error
		halted := false
		add := func(e event) bool {
			if batch = append(batch, e); len(batch) == reconcileBatch {
				select {
				case batches <- batch:
				case <-ctx.Done():
					halted = true
					return false
				}
				batch = make([]event, 0, reconcileBatch)
			}
			return true
		}
		_, _, err := read.Scan(ctx, p.cfg.JS, subjects.EventsStream, filter, from, lastSeq, func(m *jetstream.RawStreamMsg) bool {
			if m.Time.After(to) {
				return false
			}
			if req.Domain == record.UnknownDomain && registry.DomainOf(m.Subject) != record.UnknownDomain {
				return true
			}
			if req.Domain != "" && req.Domain != record.UnknownDomain && subjects.DomainOf(m.Subject, p.cfg.Gate.Domains()) != req.Domain {
				return true
			}
			// An EPCIS document is reconciled event by event.
			if handled, err := p.documentEvents(ctx, m, add); handled || err != nil {
				if err != nil {
					docErr = err
				}
				return err == nil && !halted
			}
			e := event{ReconcileEvent: api.ReconcileEvent{Seq: m.Sequence, Subject: m.Subject,
				Received: m.Time.UTC()}, data: m.Data}
			// Only a replay subject carries a redrive's dlq id; the same
			// header on an events subject comes from a publisher.
			e.replayOf, _ = envelope.RedriveOf(m.Subject, m.Header)
			return add(e)
		})
		if err == nil {
			err = docErr
		}
		if len(batch) > 0 {
			batches <- batch
		}
		readErr <- err
	}()
	var classifyErr error
	for batch := range batches {
		if classifyErr != nil {
			continue // drain the reader
		}
		if classifyErr = p.classify(ctx, batch, now, grace); classifyErr == nil {
			for i := range batch {
				tally(rep, batch[i], req.IDs, maxIDs)
				if batch[i].category == api.ReconcileUnaccounted {
					unaccounted(batch[i])
				}
			}
		}
	}
	if err := <-readErr; err != nil {
		return fmt.Errorf("auditor: read %s: %w", subjects.EventsStream, err)
	}
	return classifyErr
}

// classify names every event of batch (gate checks in parallel), looks its
// key up in IDEMPOTENCY and sets its category.
func (p *Reconciler) classify(ctx context.Context, batch []event, now time.Time, grace time.Duration) error {
	workers := max(1, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(batch); i += workers {
				if batch[i].part {
					continue
				}
				p.name(&batch[i])
			}
		}()
	}
	wg.Wait()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.LookupConcurrency)
	for i := range batch {
		e := &batch[i]
		if e.Key == "" || e.replayOf != "" {
			continue
		}
		g.Go(func() error {
			st, found, err := idempotency.Lookup(gctx, p.keys, e.Key)
			if err != nil {
				return fmt.Errorf("auditor: look up a key: %w", err)
			}
			e.state, e.found = st, found
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := p.ledgerCommits(ctx, batch); err != nil {
		return err
	}
	for i := range batch {
		e := &batch[i]
		if e.Key != "" && e.replayOf == "" && e.found && e.state.Committed() && !e.fromThis() &&
			e.state.ContentHash != "" && e.state.ContentHash != e.hash {
			e.conflictID = record.ConflictDLQID(subjects.DomainOf(e.Subject, p.cfg.Gate.Domains()), e.Key, e.hash)
		}
	}
	chains, err := p.chainsOf(ctx, batch)
	if err != nil {
		return err
	}
	for i := range batch {
		p.categorize(&batch[i], chains, now, grace)
	}
	if err := p.byBytes(ctx, batch, now, grace); err != nil {
		return err
	}
	for i := range batch {
		batch[i].data = nil
	}
	return nil
}

// byBytes looks again, under the id of its bytes, for an event that passed
// the gate but that neither a commit from it nor a chain of its key
// accounts for (categorized duplicate, pending or unaccounted), when its
// subject names a publisher: the validator quarantines an event its
// publisher may not publish (PARTY_NOT_AUTHORIZED) in a chain named by its
// subject and bytes (record.DLQIDFor of a partial envelope), never by the
// key of the party it names. A chain found there whose first record is
// this very message categorizes the event.
func (p *Reconciler) byBytes(ctx context.Context, batch []event, now time.Time, grace time.Duration) error {
	var again []event
	var at []int
	for i := range batch {
		e := &batch[i]
		switch e.category {
		case api.ReconcileDuplicate, api.ReconcilePending, api.ReconcileUnaccounted:
		default:
			continue
		}
		if e.Key == "" || e.replayOf != "" || subjects.PublisherOf(e.Subject) == "" {
			continue
		}
		c := *e
		c.DLQID = record.PayloadDLQID(subjects.DomainOf(e.Subject, p.cfg.Gate.Domains()), e.Subject, e.data)
		again, at = append(again, c), append(at, i)
	}
	if len(again) == 0 {
		return nil
	}
	chains, err := p.chainsOf(ctx, again)
	if err != nil {
		return err
	}
	for j, c := range again {
		if v, ok := chains[c.DLQID]; ok && v.sourceStream == subjects.EventsStream && v.sourceSeq == c.Seq {
			e := &batch[at[j]]
			e.DLQID = c.DLQID
			p.categorize(e, chains, now, grace)
		}
	}
	return nil
}

// ledgerCommits reads from LEDGER, the system of record, the commits of
// the events of batch whose key IDEMPOTENCY does not show committed: the
// validator writes the committed mark after the LEDGER write (in batches),
// so a validator that died in between leaves a committed event without its
// mark until the event's redelivery adopts the LEDGER message. One
// multi_last direct get per 1,024 keys; the LEDGER message's source
// headers say which EVENTS message it was committed from, and its payload
// the committed content (also read for committed states written before
// the content hash was recorded in them, or recorded by another content
// identity than their domain's current one: so a key committed before the
// identity changed is compared by the current one, idempotency.CommittedHash).
func (p *Reconciler) ledgerCommits(ctx context.Context, batch []event) error {
	bySubject := map[string][]*event{}
	domOf := map[string]string{}
	var todo []string
	for i := range batch {
		e := &batch[i]
		dom := subjects.DomainOf(e.Subject, p.cfg.Gate.Domains())
		e.ledgerIndex = -1
		if e.Key == "" || e.replayOf != "" || (e.found && e.state.Committed() && e.state.ContentHash != "" &&
			idempotency.RecordedIdentity(e.state.ContentIdentity) == idempotency.Identity(dom) &&
			(e.DocumentIndex == nil || e.state.SourceSeq != e.Seq)) {
			continue
		}
		subj := subjects.Ledger(dom, e.Key)
		if _, ok := bySubject[subj]; !ok {
			todo = append(todo, subj)
			domOf[subj] = dom
		}
		bySubject[subj] = append(bySubject[subj], e)
	}
	for len(todo) > 0 {
		chunk := todo[:min(len(todo), streams.MaxMultiLast)]
		got := map[string]bool{}
		pending, err := streams.DirectGet(ctx, p.cfg.JS, subjects.LedgerStream,
			streams.DirectRequest{MultiLast: chunk, MaxBytes: maxBytes}, func(m *jetstream.RawStreamMsg) error {
				got[m.Subject] = true
				src, _ := strconv.ParseUint(m.Header.Get(envelope.SourceSeq), 10, 64)
				index := -1
				if v := m.Header.Get(envelope.DocumentIndex); v != "" {
					if n, err := strconv.Atoi(v); err == nil && n >= 0 {
						index = n
					}
				}
				dom := domOf[m.Subject]
				h, id := idempotency.ContentHash(dom, m.Data), idempotency.StoredIdentity(dom)
				for _, e := range bySubject[m.Subject] {
					e.ledgerIndex = index
					if e.found && e.state.Committed() {
						e.state.ContentHash, e.state.ContentIdentity = h, id
						continue
					}
					e.found, e.state = true, idempotency.KeyState{State: idempotency.StateCommitted, Domain: dom, SourceSeq: src, LedgerSeq: m.Sequence,
						ContentHash: h, ContentIdentity: id}
				}
				return nil
			})
		if err != nil {
			return fmt.Errorf("auditor: read %s: %w", subjects.LedgerStream, err)
		}
		rest := todo[len(chunk):]
		if pending > 0 {
			if len(got) == 0 {
				return fmt.Errorf("%w: %s: a multi_last reply holds nothing but %d are pending", streams.ErrDirectGet, subjects.LedgerStream, pending)
			}
			for _, subj := range chunk {
				if !got[subj] {
					rest = append(rest, subj)
				}
			}
		}
		todo = rest
	}
	return nil
}

// chainsOf returns the chains the events of batch name (a replay's, or
// the event's own dlq id), by dlq id: unresolved ones from the index,
// the others (resolved, which the index no longer holds, or not applied
// yet) from the server: one multi_last request for the batch gives each
// chain's last record (its status and class), and for the chains found
// whose events are not replays, the first record (the original's source)
// is read with up to LookupConcurrency requests in flight. Ids that name
// no chain are absent.
func (p *Reconciler) chainsOf(ctx context.Context, batch []event) (map[string]chainView, error) {
	chains := make(map[string]chainView, len(batch))
	var lookups []string
	needFirst := map[string]bool{}
	var lookup func(string) (Chain, bool) // the live view's, under its lock
	// want notes chain id; first: its first record (the original's
	// source) is needed too.
	want := func(id string, first bool) {
		if _, ok := chains[id]; ok || id == "" {
			return
		}
		if c, ok := lookup(id); ok {
			chains[id] = chainView{status: c.Status, class: c.Class, sourceStream: c.SourceStream, sourceSeq: c.SourceSeq}
			return
		}
		if _, ok := needFirst[id]; !ok {
			lookups = append(lookups, id)
		}
		needFirst[id] = needFirst[id] || first
	}
	p.cfg.View.Chains(func(get func(string) (Chain, bool)) {
		lookup = get
		for i := range batch {
			e := &batch[i]
			if e.replayOf != "" {
				want(e.replayOf, false)
			} else {
				want(e.DLQID, true)
			}
			want(e.conflictID, false) // its existence is enough
		}
	})
	if len(lookups) == 0 {
		return chains, nil
	}
	type found struct {
		subject string
		view    chainView
	}
	var lasts []found
	err := p.cfg.Reader.EachLastRecord(ctx, lookups, 0, func(id string, m read.Msg) {
		last, _ := chain.DecodeHead(m.Data) // an unreadable record reads as an open chain
		v := chainView{status: last.Status(), class: string(last.Class)}
		if needFirst[id] {
			lasts = append(lasts, found{m.Subject, v})
		} else {
			chains[id] = v
		}
	})
	if err != nil {
		return nil, fmt.Errorf("auditor: read the last records of %d chains: %w", len(lookups), err)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.LookupConcurrency)
	for _, f := range lasts {
		g.Go(func() error {
			v := f.view
			first, ok, err := p.cfg.Reader.FirstRecord(gctx, f.subject)
			if err != nil {
				return fmt.Errorf("auditor: read the first record of a chain: %w", err)
			}
			if ok {
				if r, err := chain.DecodeHead(first.Data); err == nil {
					v.sourceStream, v.sourceSeq = r.SourceStream, r.SourceSeq
				}
			}
			mu.Lock()
			chains[read.LastToken(f.subject)] = v
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return chains, nil
}

// name sets the event's key (when it passes the gate) and dlq id, as the
// validator names its chain (record.DLQIDFor).
func (p *Reconciler) name(e *event) {
	if env, err := p.cfg.Gate.Check(e.Subject, e.data); err == nil {
		e.Key, e.DLQID, e.hash = env.IdempotencyKey, env.IdempotencyKey, idempotency.CheckedContentHash(env, e.data)
		return
	}
	d := subjects.DomainOf(e.Subject, p.cfg.Gate.Domains())
	e.DLQID = record.PayloadDLQID(d, e.Subject, e.data)
}

// categorize decides the event's category from the chains of its batch.
func (p *Reconciler) categorize(e *event, chains map[string]chainView, now time.Time, grace time.Duration) {
	if e.part {
		e.category = api.ReconcileDocumentPart
		return
	}
	if e.replayOf != "" {
		if _, ok := chains[e.replayOf]; ok {
			e.category, e.DLQID = api.ReconcileReplay, e.replayOf
			return
		}
	} else if c, ok := chains[e.DLQID]; ok && c.sourceStream == subjects.EventsStream && c.sourceSeq == e.Seq {
		switch c.status {
		case record.StatusOpen:
			e.category, e.class = api.ReconcileOpen, c.class
		case record.StatusRedriving:
			e.category = api.ReconcileRedriving
		case record.StatusPoison:
			e.category = api.ReconcilePoison
		default:
			e.category = api.ReconcileResolved
		}
		return
	} else if e.conflictID != "" {
		// Committed with other content: accounted for only as a
		// quarantined conflict, never as a duplicate.
		if _, ok := chains[e.conflictID]; ok {
			e.category, e.DLQID = api.ReconcileConflict, e.conflictID
			return
		}
	} else if e.fromThis() {
		e.category = api.ReconcileCommitted
		return
	} else if (e.found && e.state.Committed()) || ok {
		e.category = api.ReconcileDuplicate
		return
	}
	if now.Sub(e.Received) < grace {
		e.category = api.ReconcilePending
		return
	}
	e.category = api.ReconcileUnaccounted
}

// tally counts e in rep.
func tally(rep *api.ReconcileReply, e event, ids bool, maxIDs int) {
	rep.Events++
	rep.Counts[e.category]++
	if e.category == api.ReconcileOpen {
		rep.OpenByClass[e.class]++
	}
	if e.category == api.ReconcileUnaccounted && len(rep.Unaccounted) < maxIDs {
		rep.Unaccounted = append(rep.Unaccounted, e.ReconcileEvent)
	}
	if ids && len(rep.IDs[e.category]) < maxIDs {
		rep.IDs[e.category] = append(rep.IDs[e.category], e.ReconcileEvent)
	}
}
