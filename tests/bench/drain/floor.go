package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// seeded is one quarantined event: its dlq id and idempotency key (what a
// drain's selection knows of it).
type seeded struct {
	id, key string
}

// floor measures the store-bound ceiling of a drain on this machine: the
// stores and reads the drain's semantics require, in the same processes'
// places, with none of deadletter's code. The drainer (its own connection)
// first scans QUARANTINE as a selection does (an ordered consumer
// delivering the last record of every chain: a key's events must all be
// known before its first is replayed), then runs concurrency workers over
// the records in storage order; per record a worker:
//
//  1. reads the chain's last record (a direct get by subject);
//  2. reads the event's IDEMPOTENCY entry (not committed);
//  3. writes a claim record to the chain, conditional on its last sequence
//     (what makes two redrivers never replay one event at once), by a
//     request to the writer;
//  4. subscribes to the key's IDEMPOTENCY subject and publishes the payload
//     to EVENTS with a Nats-Msg-Id;
//  5. waits for the commit, unsubscribes, and writes the outcome record to
//     the chain, conditional on the claim's sequence, by a request to the
//     writer.
//
// The writer stands for the quarantiner, the only user allowed to publish
// to quarantine.> (the WORM store's rule): its own connection and the
// quarantiner's worker count; per request one publish to QUARANTINE
// conditional on the sequence the request names, and a reply. With direct
// set, the drainer publishes its records itself instead (what the WORM
// rule forbids: a reference figure).
//
// With compute set, the floor also does the computations the issues make
// every drain do, and nothing else: the drainer parses the chain's record
// and verifies its seal, the committer runs the validation gate, the writer
// builds and seals each record it writes (index and prev_hash from the
// request, the other fields from a lifecycle record of the same size).
//
// The committer (its own connection, the validator's consumer settings and
// worker count) writes LEDGER conditional on the key's subject, creates the
// IDEMPOTENCY entry, and acks. Left out, so not charged to the floor: JSON,
// folding chains, ordering per key, the quarantiner's tail reads, drain
// state, observing outcomes beyond the commit, tracing and logs (and without
// compute: the seal check, validation and sealing). It returns records per
// second.
func floor(ctx context.Context, url string, js jetstream.JetStream, recs []seeded, payload []byte, concurrency int, direct, compute bool) (float64, error) {
	vcfg := validator.DefaultConfig()
	_, err := js.CreateOrUpdateConsumer(ctx, subjects.EventsStream, benchenv.ValidatorConsumer("floor"))
	if err != nil {
		return 0, err
	}
	var g *gate.Gate
	var tmpl *record.Record
	if compute {
		if g, err = gate.New(0); err != nil {
			return 0, err
		}
		if tmpl, err = lifecycleTemplate(ctx, js, recs[0]); err != nil {
			return 0, err
		}
	}
	// The committer commits each event by its Floor-Key header (after the
	// gate passes it, with compute).
	fc, err := benchenv.StartFloorCommitter(ctx, benchenv.FloorCommit{
		URL: url, Stream: subjects.EventsStream, Consumer: "floor", Bucket: subjects.IdempotencyBucket,
		Ledger:  func(key string) string { return subjects.Ledger(pharmacy.Name, key) },
		Workers: vcfg.Workers,
		Batch:   floorBatch,
		Key: func(m jetstream.Msg) (string, error) {
			if g != nil {
				if _, err := g.Check(m.Subject(), m.Data()); err != nil {
					return "", err
				}
			}
			return m.Headers().Get("Floor-Key"), nil
		},
	})
	if err != nil {
		return 0, err
	}
	defer fc.Stop()
	stopWriter, err := floorWriter(ctx, url, quarantiner.DefaultConfig().Workers, tmpl)
	if err != nil {
		return 0, err
	}
	defer stopWriter()

	nc, err := nats.Connect(url, nats.Name("floor-drainer"))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	djs, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	qs, err := djs.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		return 0, err
	}
	idem, err := djs.KeyValue(ctx, subjects.IdempotencyBucket)
	if err != nil {
		return 0, err
	}
	// A claim and an outcome record are about the size of a sealed
	// redrive_requested or replayed record.
	claim := bytes.Repeat([]byte("c"), 560)
	outcome := bytes.Repeat([]byte("o"), 520)

	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	// write appends data (with compute: the record of kind for dlq id at
	// index after prevHash, which the writer seals) to the chain on subj if
	// its last sequence is seq; it returns the sequence and the written
	// record's audit hash (with compute).
	write := func(subj string, data []byte, seq uint64, id string, kind record.Kind, index int, prevHash string) (uint64, string, error) {
		if direct {
			ack, err := djs.Publish(ctx, subj, data, jetstream.WithExpectLastSequencePerSubject(seq))
			if err != nil {
				return 0, "", err
			}
			return ack.Sequence, "", nil
		}
		m := nats.NewMsg(floorWriteSubject)
		m.Data = data
		m.Header.Set("Chain", subj)
		m.Header.Set("Expect-Seq", strconv.FormatUint(seq, 10))
		if compute {
			m.Data = nil
			m.Header.Set("DLQ-ID", id)
			m.Header.Set("Kind", string(kind))
			m.Header.Set("Index", strconv.Itoa(index))
			m.Header.Set("Prev-Hash", prevHash)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rep, err := nc.RequestMsgWithContext(rctx, m)
		cancel()
		if err != nil {
			return 0, "", err
		}
		if e := rep.Header.Get("Error"); e != "" {
			return 0, "", errors.New(e)
		}
		seqText, hash, _ := strings.Cut(string(rep.Data), " ")
		n, err := strconv.ParseUint(seqText, 10, 64)
		return n, hash, err
	}
	// publishReplay publishes a replay: by itself, or (with floorReplays
	// and floorBatch) with the replays published at about the same moment
	// as one atomic batch to REPLAYS, as the redriver's replay batcher did.
	publishReplay := func(m *nats.Msg) error {
		_, err := djs.PublishMsg(ctx, m)
		return err
	}
	if floorReplays && floorBatch > 1 {
		type req struct {
			m    *nats.Msg
			done chan error
		}
		reqs := make(chan req, concurrency)
		defer close(reqs)
		go func() {
			for r := range reqs {
				group := benchenv.Gather(r, reqs, floorBatch)
				msgs := make([]*nats.Msg, len(group))
				for i, q := range group {
					msgs[i] = q.m
				}
				var err error
				if len(msgs) == 1 {
					_, err = djs.PublishMsg(ctx, msgs[0])
				} else {
					_, err = batch.Publish(ctx, djs, msgs)
				}
				for _, q := range group {
					q.done <- err
				}
			}
		}()
		publishReplay = func(m *nats.Msg) error {
			done := make(chan error, 1)
			reqs <- req{m, done}
			return <-done
		}
	}
	one := func(r seeded) error {
		subj := subjects.Quarantine(pharmacy.Name, r.id)
		last, err := qs.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			return fmt.Errorf("read chain: %w", err)
		}
		if _, err := idem.Get(ctx, r.key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("idempotency lookup: %v", err)
		}
		var prevHash string
		if compute {
			r0, err := record.Parse(last.Data)
			if err != nil {
				return fmt.Errorf("read chain: %w", err)
			}
			prevHash = r0.AuditHash
		}
		claimSeq, claimHash, err := write(subj, claim, last.Sequence, r.id, record.KindRedriveRequested, 1, prevHash)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		wake := make(chan *nats.Msg, 4)
		sub, err := nc.ChanSubscribe("$KV."+subjects.IdempotencyBucket+"."+r.key, wake)
		if err != nil {
			return err
		}
		m := nats.NewMsg(subjects.Event(pharmacy.Name, pharmacy.Dispense))
		if floorReplays {
			// As the redriver did: into REPLAYS, which EVENTS sources.
			m.Subject = subjects.Replay(pharmacy.Name, pharmacy.Dispense)
		}
		m.Data = payload
		m.Header.Set("Floor-Key", r.key)
		m.Header.Set(jetstream.MsgIDHeader, r.id+"-1")
		if err := publishReplay(m); err != nil {
			_ = sub.Unsubscribe()
			return fmt.Errorf("replay: %w", err)
		}
		select {
		case <-wake:
		case <-time.After(time.Minute):
			_ = sub.Unsubscribe()
			return fmt.Errorf("no commit for %s", r.id)
		}
		_ = sub.Unsubscribe()
		if _, _, err := write(subj, outcome, claimSeq, r.id, record.KindReplayed, 2, claimHash); err != nil {
			return fmt.Errorf("outcome: %w", err)
		}
		return nil
	}
	start := time.Now()
	if err := benchenv.ReadQuarantine(ctx, djs, len(recs), true); err != nil {
		return 0, err
	}
	for range concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(recs)) {
					return
				}
				if err := one(recs[i]); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rate := float64(len(recs)) / time.Since(start).Seconds()
	if firstErr != nil {
		return 0, fmt.Errorf("floor: %w", firstErr)
	}
	if err := fc.Err(); err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	return rate, nil
}

// floorWriteSubject is the writer's request subject.
const floorWriteSubject = "floor.write"

// floorWriter serves append requests with workers at once: each publishes
// the request's data (with tmpl set: tmpl with the request's dlq id, kind,
// index and prev_hash, sealed) to its Chain header's subject, conditional on
// its Expect-Seq header, and replies with the sequence stored and the
// record's audit hash (or an Error header).
func floorWriter(ctx context.Context, url string, workers int, tmpl *record.Record) (stop func(), err error) {
	nc, err := nats.Connect(url, nats.Name("floor-writer"))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	// Room for every request of the drainer's workers: a channel
	// subscription drops what finds its channel full.
	in := make(chan *nats.Msg, 1<<16)
	sub, err := nc.ChanSubscribe(floorWriteSubject, in)
	if err != nil {
		nc.Close()
		return nil, err
	}
	// build makes the record a request asks for (with tmpl set: tmpl with
	// the request's dlq id, kind, index and prev_hash, sealed).
	build := func(m *nats.Msg) (*nats.Msg, string, error) {
		data, hash, err := m.Data, "", error(nil)
		if tmpl != nil {
			r := *tmpl
			r.DLQID, r.Kind, r.PrevHash = m.Header.Get("DLQ-ID"), record.Kind(m.Header.Get("Kind")), m.Header.Get("Prev-Hash")
			r.Index, _ = strconv.Atoi(m.Header.Get("Index"))
			r.QuarantinedAt = time.Now().UTC()
			data, err = record.SealMarshal(&r)
			hash = r.AuditHash
		}
		out := nats.NewMsg(m.Header.Get("Chain"))
		out.Data = data
		out.Header.Set(jetstream.ExpectedLastSubjSeqHeader, m.Header.Get("Expect-Seq"))
		return out, hash, err
	}
	respond := func(m *nats.Msg, seq uint64, hash string, err error) {
		rep := nats.NewMsg(m.Reply)
		if err != nil {
			rep.Header.Set("Error", err.Error())
		} else {
			rep.Data = fmt.Appendf(nil, "%d %s", seq, hash)
		}
		_ = m.RespondMsg(rep)
	}
	var wg sync.WaitGroup
	if floorBatch > 1 {
		// Batched: what is queued when a writer is free (distinct chains:
		// a drainer's worker has one request in flight), up to floorBatch,
		// as one atomic batch; two writers, as the quarantiner's.
		for range 2 {
			wg.Go(func() {
				for m := range in {
					group := benchenv.Gather(m, in, floorBatch)
					msgs := make([]*nats.Msg, len(group))
					hashes := make([]string, len(group))
					var err error
					for i, q := range group {
						if msgs[i], hashes[i], err = build(q); err != nil {
							break
						}
					}
					var seqs []uint64
					if err == nil {
						if len(msgs) == 1 {
							var ack *jetstream.PubAck
							if ack, err = js.PublishMsg(ctx, msgs[0]); err == nil {
								seqs = []uint64{ack.Sequence}
							}
						} else {
							seqs, err = batch.Publish(ctx, js, msgs)
						}
					}
					for i, q := range group {
						var seq uint64
						if err == nil {
							seq = seqs[i]
						}
						respond(q, seq, hashes[i], err)
					}
				}
			})
		}
	} else {
		for range workers {
			wg.Go(func() {
				for m := range in {
					out, hash, err := build(m)
					var ack *jetstream.PubAck
					if err == nil {
						ack, err = js.PublishMsg(ctx, out)
					}
					var seq uint64
					if ack != nil {
						seq = ack.Sequence
					}
					respond(m, seq, hash, err)
				}
			})
		}
	}
	return func() {
		_ = sub.Unsubscribe()
		close(in)
		wg.Wait()
		nc.Close()
	}, nil
}

// lifecycleTemplate is a redrive_requested record as the quarantiner would
// write after r's first record: the fields a lifecycle record copies.
func lifecycleTemplate(ctx context.Context, js jetstream.JetStream, r seeded) (*record.Record, error) {
	qs, err := js.Stream(ctx, subjects.QuarantineStream)
	if err != nil {
		return nil, err
	}
	m, err := qs.GetLastMsgForSubject(ctx, subjects.Quarantine(pharmacy.Name, r.id))
	if err != nil {
		return nil, err
	}
	first, err := record.Parse(m.Data)
	if err != nil {
		return nil, err
	}
	st, err := record.Fold([]record.Record{first})
	if err != nil {
		return nil, err
	}
	return &record.Record{
		Kind: record.KindRedriveRequested, Domain: st.Domain, Class: st.Class, ErrorCode: st.ErrorCode,
		ErrorDetail: st.ErrorDetail, SourceSubject: st.SourceSubject, SourceStream: st.SourceStream,
		SourceSeq: st.SourceSeq, IdempotencyKey: st.IdempotencyKey, OrderingKey: st.OrderingKey,
		PartyID: st.PartyID, EventTime: st.EventTime, RedriveCount: 1, FirstSeen: st.FirstSeen,
		DrainID: "drain_0123456789abcdef",
	}, nil
}
