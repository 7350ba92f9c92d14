package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// store is a QUARANTINE on a real server and a writer of chains into it.
type store struct {
	js jetstream.JetStream
	rd *Reader
}

func newStore(tb testing.TB) *store {
	tb.Helper()
	srv := natstest.Start(tb)
	srv.Provision(tb, streams.DefaultOptions())
	js := srv.JetStream(tb)
	return &store{js: js, rd: NewReader(js)}
}

// put stores raw on the chain's subject.
func (s *store) put(tb testing.TB, domain, id string, raw []byte) uint64 {
	tb.Helper()
	ack, err := s.js.Publish(context.Background(), subjects.Quarantine(domain, id), raw)
	if err != nil {
		tb.Fatal(err)
	}
	return ack.Sequence
}

// write stores a chain of the kinds given after its first record and
// returns its records.
func (s *store) write(tb testing.TB, id string, ks ...record.Kind) []record.Record {
	tb.Helper()
	recs := build(tb, id, ks...)
	for _, r := range recs {
		raw, err := record.SealMarshal(&r)
		if err != nil {
			tb.Fatal(err)
		}
		s.put(tb, "pharmacy", id, raw)
	}
	return recs
}

// build returns the records, sealed, of a chain of the kinds given after
// its first record.
func build(tb testing.TB, id string, ks ...record.Kind) []record.Record {
	tb.Helper()
	f := record.Failure{Class: record.ClassExhausted, Code: codes.DownstreamUnavailable, Domain: "pharmacy",
		Subject: "events.pharmacy.dispense", Stream: "EVENTS", Seq: 1, Published: t0, FailedAt: t0,
		Payload: []byte(`{"a":1}`), DLQID: id}
	r := record.FromFailure(f, t0)
	var out []record.Record
	for i := 0; ; i++ {
		if _, err := record.SealMarshal(&r); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
		if i == len(ks) {
			return out
		}
		next := record.Record{SchemaVersion: record.SchemaVersion, DLQID: id, Index: i + 1, Kind: ks[i], Domain: "pharmacy",
			Class: r.Class, ErrorCode: r.ErrorCode, FirstSeen: r.FirstSeen, QuarantinedAt: t0.Add(time.Duration(i+1) * time.Second),
			PrevHash: r.AuditHash, RedriveCount: r.RedriveCount}
		switch ks[i] {
		case record.KindPoisoned:
			next.Class = record.ClassPoison
		case record.KindResolved:
			next.Actor, next.Reason = "ops", "done"
		}
		r = next
	}
}

func TestRead(t *testing.T) {
	s := newStore(t)
	s.write(t, "pharmacy_one")
	s.write(t, "pharmacy_other", record.KindRedriveRequested)
	long := s.write(t, "pharmacy_long", record.KindRedriveRequested, record.KindReplayFailed, record.KindRedriveRequested, record.KindPoisoned)
	s.write(t, "pharmacy_other2", record.KindResolved)
	tests := []struct {
		name    string
		id      string
		records int
		status  record.Status
		err     error
	}{
		{"one record", "pharmacy_one", 1, record.StatusOpen, nil},
		{"interleaved with other chains", "pharmacy_long", len(long), record.StatusPoison, nil},
		{"resolved", "pharmacy_other2", 2, record.StatusResolved, nil},
		{"none", "pharmacy_none", 0, "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := s.rd.Read(context.Background(), "pharmacy", tt.id)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Read: %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if len(ch.Records) != tt.records || ch.State.Status != tt.status || ch.FoldErr != nil {
				t.Fatalf("%d records, status %s, fold %v", len(ch.Records), ch.State.Status, ch.FoldErr)
			}
			last, err := s.rd.Last(context.Background(), "pharmacy", tt.id)
			if err != nil || last.Seq != ch.LastSeq {
				t.Fatalf("Last = %d, %v; chain's last %d", last.Seq, err, ch.LastSeq)
			}
			h, err := DecodeHead(last.Data)
			if err != nil || h.Status() != tt.status || h.Index != tt.records-1 {
				t.Errorf("Head %+v status %s, %v", h, h.Status(), err)
			}
		})
	}
}

// TestReadSnapshot: a read stops at the last record it found first, and
// a chain longer than one batch is read whole.
func TestReadLong(t *testing.T) {
	s := newStore(t)
	ks := make([]record.Kind, 0, 2*batch+3)
	for len(ks) < 2*batch+2 {
		ks = append(ks, record.KindRedriveRequested, record.KindReplayFailed)
	}
	recs := s.write(t, "pharmacy_long", ks...)
	ch, err := s.rd.Read(context.Background(), "pharmacy", "pharmacy_long")
	if err != nil || len(ch.Records) != len(recs) || ch.FoldErr != nil {
		t.Fatalf("Read: %d records, %v, fold %v; want %d", len(ch.Records), err, ch.FoldErr, len(recs))
	}
}

// TestReadVerifiesSeals: a record that fails its seal makes Read refuse
// the chain, naming its sequence; Stored returns its bytes as stored.
func TestReadVerifiesSeals(t *testing.T) {
	s := newStore(t)
	recs := s.write(t, "pharmacy_t", record.KindRedriveRequested)
	bad := recs[1]
	bad.Index, bad.PrevHash, bad.Kind = 2, recs[1].AuditHash, record.KindReplayFailed
	raw, err := record.SealMarshal(&bad)
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte(`"replay_failed"`), []byte(`"replayed"`), 1)
	seq := s.put(t, "pharmacy", "pharmacy_t", raw)
	_, err = s.rd.Read(context.Background(), "pharmacy", "pharmacy_t")
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "seq ") {
		t.Fatalf("Read = %v, want ErrUnreadable naming the sequence", err)
	}
	stored, err := s.rd.Stored(context.Background(), "pharmacy", "pharmacy_t")
	if err != nil || len(stored) != 3 || stored[2].Seq != seq || !bytes.Equal(stored[2].Data, raw) {
		t.Fatalf("Stored = %d records, %v", len(stored), err)
	}
	if _, _, err := s.rd.LastRecord(context.Background(), "pharmacy", "pharmacy_t"); !errors.Is(err, ErrUnreadable) {
		t.Errorf("LastRecord = %v, want ErrUnreadable", err)
	}
}

func TestHeadStatus(t *testing.T) {
	tests := []struct {
		name string
		h    Head
		want record.Status
	}{
		{"first", Head{Kind: record.KindQuarantined, Class: record.ClassValidation}, record.StatusOpen},
		{"correction while open", Head{Kind: record.KindCorrected, Class: record.ClassExhausted}, record.StatusOpen},
		{"correction while poison", Head{Kind: record.KindCorrected, Class: record.ClassPoison}, record.StatusPoison},
		{"redriving", Head{Kind: record.KindRedriveRequested, Class: record.ClassExhausted}, record.StatusRedriving},
		{"poisoned", Head{Kind: record.KindPoisoned, Class: record.ClassPoison}, record.StatusPoison},
		{"released", Head{Kind: record.KindReleased, Class: record.ClassExhausted}, record.StatusOpen},
		{"replayed", Head{Kind: record.KindReplayed, Class: record.ClassExhausted}, record.StatusResolved},
		{"unknown kind", Head{Kind: "archived", Class: record.ClassExhausted}, record.StatusOpen},
		{"hold on a resolved event", Head{Kind: record.KindHoldPlaced, Class: record.ClassExhausted, Hold: &record.HoldMark{Status: record.StatusResolved}}, record.StatusResolved},
		{"hold lifted while redriving", Head{Kind: record.KindHoldLifted, Class: record.ClassExhausted, Hold: &record.HoldMark{Status: record.StatusRedriving}}, record.StatusRedriving},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.Status(); got != tt.want {
				t.Errorf("Status = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestLog: one line, the kind's event, the vocabulary's attributes.
func TestLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	h := Head{DLQID: "pharmacy_x", Domain: "pharmacy", Kind: record.KindReplayFailed, Class: record.ClassExhausted,
		ErrorCode: codes.DownstreamUnavailable, RedriveCount: 2, Index: 3, AuditHash: "abc"}
	Log(context.Background(), log, h, 7)
	line := buf.String()
	for _, want := range []string{`"msg":"DLQ_REPLAY_FAILED"`, `"dlq_id":"pharmacy_x"`, `"redrive_count":2`, `"seq":7`, `"audit_hash":"abc"`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %s lacks %s", line, want)
		}
	}
	if strings.Count(line, "\n") != 1 {
		t.Errorf("%d lines", strings.Count(line, "\n"))
	}
}

// TestReadNamesTheFirstUnreadable: Read parses the last record first (a
// chain of one record costs one parse) yet still reports the first record
// that fails its seal, wherever it is.
func TestReadNamesTheFirstUnreadable(t *testing.T) {
	tamper := func(tb testing.TB, r record.Record) []byte {
		raw, err := record.SealMarshal(&r)
		if err != nil {
			tb.Fatal(err)
		}
		return bytes.Replace(raw, []byte(`"pharmacy"`), []byte(`"pharmacx"`), 1)
	}
	seal := func(tb testing.TB, r record.Record) []byte {
		raw, err := record.SealMarshal(&r)
		if err != nil {
			tb.Fatal(err)
		}
		return raw
	}
	for _, tc := range []struct {
		name string
		bad  int // index of the tampered record
		n    int // records in the chain
	}{
		{"the only record", 0, 1},
		{"the first of three", 0, 3},
		{"the middle of three", 1, 3},
		{"the last of three", 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			id := "pharmacy_" + strings.ReplaceAll(tc.name, " ", "_")
			// The records a chain of n would hold, sealed; then stored,
			// the one at bad tampered after sealing.
			kinds := []record.Kind{record.KindRedriveRequested, record.KindReplayFailed}[:tc.n-1]
			recs := build(t, id, kinds...)
			var badSeq uint64
			for i, r := range recs {
				raw := seal(t, r)
				if i == tc.bad {
					raw = tamper(t, r)
				}
				seq := s.put(t, "pharmacy", id, raw)
				if i == tc.bad {
					badSeq = seq
				}
			}
			_, err := s.rd.Read(context.Background(), "pharmacy", id)
			want := fmt.Sprintf("seq %d:", badSeq)
			if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Read = %v, want ErrUnreadable naming %q", err, want)
			}
		})
	}
}
