package redriver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/redriver/selection"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// testEnv is a provisioned server with a running redriver (no validator or
// quarantiner: these tests never replay).
type testEnv struct {
	srv *natstest.Server
	js  jetstream.JetStream
	nc  *nats.Conn
}

func newTestEnv(tb testing.TB) *testEnv {
	tb.Helper()
	return newTestEnvWith(tb, func(cfg *Config) {
		cfg.AllowAnonymous = true // one account: no caller is ever attached
	})
}

// newTestEnvWith is newTestEnv with the redriver's configuration changed by
// edit (from DefaultConfig without provisioning).
func newTestEnvWith(tb testing.TB, edit func(*Config)) *testEnv {
	tb.Helper()
	srv := natstest.Start(tb)
	srv.Provision(tb, streams.DefaultOptions())
	nc := srv.Connect(tb)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Provision = false
	edit(&cfg)
	runRedriver(tb, srv.Connect(tb), cfg)
	waitRedriver(tb, nc)
	return &testEnv{srv: srv, js: js, nc: nc}
}

// runRedriver runs a redriver on nc until cleanup.
func runRedriver(tb testing.TB, nc *nats.Conn, cfg Config) *Service {
	tb.Helper()
	s, err := New(nc, cfg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
	return s
}

// waitRedriver waits until the redriver serves every endpoint on nc.
func waitRedriver(tb testing.TB, nc *nats.Conn) {
	tb.Helper()
	natstest.WaitServing(tb, nc, access.Redriver)
}

// spec describes a chain to write directly into QUARANTINE.
type spec struct {
	n        int
	domain   string
	class    record.Class
	code     codes.Code
	party    string
	okey     string
	at       string // event time
	kinds    []record.Kind
	firstDay int // first_seen = 2025-01-<firstDay>
	payload  string
}

// write seals and stores the chain of sp (as the quarantiner would) and
// returns its dlq id.
func (e *testEnv) write(tb testing.TB, sp spec) string {
	tb.Helper()
	id := domain.Key(sp.domain, "test", strconv.Itoa(sp.n))
	first := time.Date(2025, 1, max(1, sp.firstDay), 0, 0, 0, 0, time.UTC)
	r := record.Record{
		DLQID: id, Kind: record.KindQuarantined, Domain: sp.domain, Class: sp.class, ErrorCode: sp.code,
		Payload: record.NewPayload([]byte(cmp.Or(sp.payload, `{"n":`+strconv.Itoa(sp.n)+`}`))), SourceSubject: "events." + sp.domain + ".x",
		SourceStream: subjects.EventsStream, SourceSeq: uint64(sp.n), IdempotencyKey: id, OrderingKey: sp.okey, PartyID: sp.party,
		FirstSeen: first, QuarantinedAt: first,
	}
	if sp.at != "" {
		t, _ := time.Parse(time.RFC3339, sp.at)
		r.EventTime = &t
	}
	prev, seq := "", uint64(0)
	for i, kind := range append([]record.Kind{record.KindQuarantined}, sp.kinds...) {
		r.Kind, r.Index, r.PrevHash, r.SchemaVersion = kind, i, prev, record.SchemaVersion
		if i > 0 {
			r.Payload = nil
		}
		switch kind {
		case record.KindPoisoned:
			r.Class = record.ClassPoison
		case record.KindReleased:
			r.Class = sp.class
		case record.KindResolved:
			r.Actor, r.Reason = "op", "done"
		}
		if err := record.Seal(&r); err != nil {
			tb.Fatal(err)
		}
		b, err := record.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		ack, err := e.js.Publish(context.Background(), subjects.Quarantine(sp.domain, id), b, jetstream.WithExpectLastSequencePerSubject(seq))
		if err != nil {
			tb.Fatal(err)
		}
		prev, seq = r.AuditHash, ack.Sequence
	}
	return id
}

func (e *testEnv) request(tb testing.TB, subject string, body string) ([]byte, string) {
	tb.Helper()
	m, err := e.nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		tb.Fatalf("%s: %v", subject, err)
	}
	return m.Data, m.Header.Get(micro.ErrorCodeHeader)
}

// TestBadRequests: every malformed request gets a coded error, and the
// service keeps answering.
func TestBadRequests(t *testing.T) {
	e := newTestEnv(t)
	unknown := domain.Key("pharmacy", "nothing")
	for _, tc := range []struct {
		name, subject, body, code string
	}{
		{"malformed JSON", api.DrainStart, `{"filter":`, api.ErrBadRequest},
		{"not JSON", api.DrainStart, `hello`, api.ErrBadRequest},
		{"trailing data", api.DrainStart, `{} {}`, api.ErrBadRequest},
		{"unknown field", api.DrainStart, `{"filter":{},"rate":5}`, api.ErrBadRequest},
		{"unknown filter field", api.DrainStart, `{"filter":{"domains":["dscsa"]}}`, api.ErrBadRequest},
		{"negative rate", api.DrainStart, `{"rate_per_second":-1}`, api.ErrBadRequest},
		{"negative burst", api.DrainStart, `{"burst":-1}`, api.ErrBadRequest},
		{"negative limit", api.DrainStart, `{"filter":{"limit":-5}}`, api.ErrBadRequest},
		{"concurrency too high", api.DrainStart, `{"max_concurrency":100000}`, api.ErrBadRequest},
		{"poison class", api.DrainStart, `{"filter":{"classes":["poison"]}}`, api.ErrBadRequest},
		{"unknown class", api.DrainStart, `{"filter":{"classes":["weird"]}}`, api.ErrBadRequest},
		{"unknown domain", api.DrainStart, `{"filter":{"domain":"bank"}}`, api.ErrBadRequest},
		{"since after until", api.DrainStart, `{"filter":{"since":"2025-02-01T00:00:00Z","until":"2025-01-01T00:00:00Z"}}`, api.ErrBadRequest},
		{"bad dlq id in filter", api.DrainStart, `{"filter":{"dlq_ids":["quarantine.>"]}}`, api.ErrBadRequest},
		{"status without id", api.DrainStatus, `{}`, api.ErrBadRequest},
		{"status unsafe id", api.DrainStatus, `{"drain_id":"a.b"}`, api.ErrBadRequest},
		{"status unknown drain", api.DrainStatus, `{"drain_id":"drain-nope"}`, api.ErrNotFound},
		{"cancel unknown drain", api.DrainCancel, `{"drain_id":"drain-nope"}`, api.ErrNotFound},
		{"list with junk", api.DrainList, `{"x":1}`, api.ErrBadRequest},
		{"redrive malformed", api.Redrive, `{"dlq_id":`, api.ErrBadRequest},
		{"redrive without id", api.Redrive, `{}`, api.ErrBadRequest},
		{"redrive bad id", api.Redrive, `{"dlq_id":"../x"}`, api.ErrBadRequest},
		{"redrive unknown id", api.Redrive, `{"dlq_id":"` + unknown + `"}`, api.ErrNotFound},
		{"correction without actor", api.Redrive, `{"dlq_id":"` + unknown + `","payload":{"a":1}}`, api.ErrBadRequest},
		{"release without reason", api.Release, `{"dlq_id":"` + unknown + `","actor":"x"}`, api.ErrBadRequest},
		{"release bad class", api.Release, `{"dlq_id":"` + unknown + `","actor":"x","reason":"y","class":"poison"}`, api.ErrBadRequest},
		{"release unknown id", api.Release, `{"dlq_id":"` + unknown + `","actor":"x","reason":"y"}`, api.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, code := e.request(t, tc.subject, tc.body)
			if code != tc.code {
				t.Errorf("code %q (%s), want %s", code, data, tc.code)
			}
		})
	}
	if _, code := e.request(t, api.DrainList, ``); code != "" {
		t.Errorf("drain.list after bad requests: %s", code)
	}
}

// TestReleaseNeedsPoison: release of an event that is not poison is an
// invalid transition; a drain over poison, resolved or uncorrected
// validation events selects nothing.
func TestReleaseNeedsPoison(t *testing.T) {
	e := newTestEnv(t)
	open := e.write(t, spec{n: 1, domain: "dscsa", class: record.ClassExhausted, code: codes.DownstreamUnavailable})
	if _, code := e.request(t, api.Release, `{"dlq_id":"`+open+`","actor":"a","reason":"r"}`); code != api.ErrInvalidTransition {
		t.Errorf("release of an open event: %q", code)
	}
}

// TestSelection: filters, exclusions with reasons, and the order of lanes
// (event time within an ordering key; an unselected unresolved event holds
// the later ones).
func TestSelection(t *testing.T) {
	e := newTestEnv(t)
	ex, va := record.ClassExhausted, record.ClassValidation
	du, nd := codes.DownstreamUnavailable, pharmacy.InvalidNDC
	ids := map[string]string{}
	for name, sp := range map[string]spec{
		"k1-late":        {n: 1, domain: "dscsa", class: ex, code: du, okey: "K1", at: "2024-02-07T00:00:00Z", firstDay: 2},
		"k1-early":       {n: 2, domain: "dscsa", class: ex, code: du, okey: "K1", at: "2024-02-05T00:00:00Z", firstDay: 2},
		"k2-poison":      {n: 3, domain: "dscsa", class: ex, code: du, okey: "K2", at: "2024-02-01T00:00:00Z", kinds: []record.Kind{record.KindPoisoned}},
		"k2-after":       {n: 4, domain: "dscsa", class: ex, code: du, okey: "K2", at: "2024-02-02T00:00:00Z"},
		"validation":     {n: 5, domain: "pharmacy", class: va, code: nd, party: "P1", okey: "K3", at: "2024-02-01T00:00:00Z"},
		"resolved":       {n: 6, domain: "pharmacy", class: ex, code: du, kinds: []record.Kind{record.KindResolved}},
		"pharmacy-P1":    {n: 7, domain: "pharmacy", class: ex, code: du, party: "P1", firstDay: 10},
		"pharmacy-P2":    {n: 8, domain: "pharmacy", class: ex, code: codes.StoreUnavailable, party: "P2", firstDay: 20},
		"redriving":      {n: 9, domain: "fsma", class: ex, code: du, kinds: []record.Kind{record.KindRedriveRequested}},
		"released":       {n: 10, domain: "fsma", class: ex, code: du, kinds: []record.Kind{record.KindPoisoned, record.KindReleased}},
		"replay-failed":  {n: 11, domain: "fsma", class: ex, code: du, kinds: []record.Kind{record.KindRedriveRequested, record.KindReplayFailed}},
		"validation-fix": {n: 12, domain: "fsma", class: va, code: fsma.MissingTLC, kinds: []record.Kind{record.KindCorrected}},
	} {
		ids[name] = e.write(t, sp)
	}
	day := func(d int) *time.Time { t := time.Date(2025, 1, d, 0, 0, 0, 0, time.UTC); return &t }
	for _, tc := range []struct {
		name     string
		f        api.DrainFilter
		want     []string // selected, in replay order within lanes
		excluded map[string]int
	}{
		{"dscsa default", api.DrainFilter{Domain: "dscsa"},
			[]string{"k1-early", "k1-late", "k2-after"}, map[string]int{"poison": 1}},
		{"pharmacy default", api.DrainFilter{Domain: "pharmacy"},
			[]string{"pharmacy-P1", "pharmacy-P2"}, map[string]int{"class_validation": 1, "resolved": 1}},
		{"include validation", api.DrainFilter{Domain: "pharmacy", IncludeValidation: true},
			[]string{"validation", "pharmacy-P1", "pharmacy-P2"}, map[string]int{"resolved": 1}},
		{"party", api.DrainFilter{Domain: "pharmacy", PartyID: "P2"},
			[]string{"pharmacy-P2"}, map[string]int{"party_id": 3}},
		{"error code", api.DrainFilter{Domain: "pharmacy", ErrorCodes: []string{string(codes.StoreUnavailable)}},
			[]string{"pharmacy-P2"}, map[string]int{"error_code": 3}},
		{"time range", api.DrainFilter{Domain: "pharmacy", Since: day(5), Until: day(15)},
			[]string{"pharmacy-P1"}, map[string]int{"first_seen": 3}},
		{"fsma states", api.DrainFilter{Domain: "fsma", Classes: []string{string(ex), string(va)}},
			[]string{"redriving", "released", "replay-failed", "validation-fix"}, map[string]int{}},
		{"dlq ids", api.DrainFilter{DLQIDs: []string{"k1-late", "pharmacy-P2"}},
			[]string{"k1-late", "pharmacy-P2"}, map[string]int{}},
		{"limit", api.DrainFilter{Domain: "pharmacy", Limit: 1}, // the first in stream order
			[]string{"pharmacy-P1|pharmacy-P2"}, map[string]int{"limit": 1, "class_validation": 1, "resolved": 1}},
		{"validation listed, uncorrected", api.DrainFilter{Domain: "pharmacy", Classes: []string{string(va)}},
			nil, map[string]int{"validation_uncorrected": 1, "class_exhausted": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			for i, n := range f.DLQIDs {
				f.DLQIDs[i] = ids[n]
			}
			sl := &selection.Selector{JS: e.js, Seed: maphash.MakeSeed()}
			sel, err := sl.Run(context.Background(), f, time.Time{}, f.Limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			held := 0
			sel.Lanes(func(lane []selection.Item) bool {
				blocked := false
				for _, it := range lane {
					if it.Blocker() {
						blocked = true
						continue
					}
					if blocked {
						held++
					}
					_, id := sel.IDOf(it)
					got = append(got, nameOf(ids, id))
				}
				return true
			})
			if sel.Selected != len(tc.want) || !sameOrderWithinKeys(got, tc.want) {
				t.Errorf("selected %v, want %v", got, tc.want)
			}
			for k, v := range tc.excluded {
				if sel.Excluded[k] != v {
					t.Errorf("excluded %v, want %s=%d", sel.Excluded, k, v)
				}
			}
			if tc.name == "dscsa default" && held != 1 {
				t.Errorf("k2-after held %d times, want 1 (behind the poison event of its key)", held)
			}
		})
	}
}

func nameOf(ids map[string]string, id string) string {
	for n, v := range ids {
		if v == id {
			return n
		}
	}
	return id
}

// sameOrderWithinKeys compares selections as sets, and checks that the
// order of k1-early before k1-late (one key) is kept.
func sameOrderWithinKeys(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if !slices.Contains(strings.Split(w, "|"), got[i]) && !slices.Contains(got, w) {
			return false
		}
	}
	i, j := slices.Index(got, "k1-early"), slices.Index(got, "k1-late")
	return i < 0 || j < 0 || i < j
}

// TestDryRunWritesNothing: a dry run answers the plan and stores nothing.
func TestDryRunWritesNothing(t *testing.T) {
	e := newTestEnv(t)
	for i := range 5 {
		e.write(t, spec{n: i, domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable, okey: fmt.Sprint("K", i%2)})
	}
	q, _ := e.js.Stream(context.Background(), subjects.QuarantineStream)
	before, _ := q.Info(context.Background())
	data, code := e.request(t, api.DrainStart, `{"dry_run":true,"filter":{"domain":"pharmacy"}}`)
	if code != "" {
		t.Fatalf("dry run: %s %s", code, data)
	}
	var rep api.DrainStartReply
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	p := rep.Plan
	if rep.DrainID != "" || p == nil || p.Selected != 5 || p.Keys != 2 || p.ByClass["exhausted"] != 5 ||
		p.ByCode[string(codes.DownstreamUnavailable)] != 5 || p.Checked != 5 || p.WouldSkipDuplicate != 0 || len(p.TopKeys) != 2 || p.TopKeys[0].Events != 3 {
		t.Errorf("plan %+v", p)
	}
	after, _ := q.Info(context.Background())
	kv, _ := e.js.KeyValue(context.Background(), subjects.DrainsBucket)
	kst, _ := kv.Status(context.Background())
	if after.State.Msgs != before.State.Msgs || kst.Values() != 0 {
		t.Errorf("dry run wrote: QUARANTINE %d → %d, DRAINS %d values", before.State.Msgs, after.State.Msgs, kst.Values())
	}
}
