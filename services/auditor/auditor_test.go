package auditor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

func TestVerify(t *testing.T) {
	f := func(n int) fixture {
		return fixture{id: id(n), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC,
			party: "AB1234563", firstSeen: t0, quarantined: t0.Add(time.Second)}
	}
	tests := []struct {
		name  string
		write func(t *testing.T, e *env) // writes the store; returns nothing
		kinds []string                   // problem kinds expected, in order
		seqs  string                     // record sequences reported
	}{
		{
			name: "untouched store",
			write: func(t *testing.T, e *env) {
				e.chainOf(t, f(1), record.KindRedriveRequested, record.KindPoisoned)
				e.chainOf(t, f(2))
				e.chainOf(t, f(3), record.KindResolved)
			},
		},
		{
			name: "fork: two records with the same prev_hash",
			write: func(t *testing.T, e *env) {
				rs := e.chainOf(t, f(1), record.KindRedriveRequested)
				fork := next(t, rs[0], record.KindResolved, t0.Add(time.Hour))
				e.publish(t, fork) // seq 3, same prev_hash and index as seq 2
			},
			kinds: []string{record.ProblemFork}, seqs: "3",
		},
		{
			name: "altered record keeps its old seal",
			write: func(t *testing.T, e *env) {
				e.chainOf(t, f(1))
				r := first(t, f(2))
				raw, err := record.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				raw = bytes.Replace(raw, []byte("rule failed"), []byte("rule passed"), 1)
				e.publishRaw(t, subjects.Quarantine(r.Domain, r.DLQID), raw)
			},
			kinds: []string{record.ProblemSealMismatch}, seqs: "2",
		},
		{
			name: "record stored on another chain's subject",
			write: func(t *testing.T, e *env) {
				r := first(t, f(1))
				raw, _ := record.Marshal(r)
				e.publishRaw(t, subjects.Quarantine("pharmacy", id(9)), raw)
			},
			kinds: []string{api.ProblemSubjectMismatch}, seqs: "1",
		},
		{
			name: "not a record",
			write: func(t *testing.T, e *env) {
				e.chainOf(t, f(1))
				e.publishRaw(t, subjects.Quarantine("pharmacy", id(2)), []byte(`{"hello":`))
			},
			kinds: []string{record.ProblemUnparseable}, seqs: "2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.write(t, e)
			a := e.startAuditor(t, testConfig(), nil)
			var rep api.VerifyReply
			request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &rep)
			var kinds []string
			for _, p := range rep.Problems {
				kinds = append(kinds, p.Kind)
			}
			if rep.OK != (len(tt.kinds) == 0) || fmt.Sprint(kinds) != fmt.Sprint(tt.kinds) || seqs(rep.Problems) != tt.seqs {
				t.Fatalf("verify: ok=%v problems %+v; want kinds %v at seqs %q", rep.OK, rep.Problems, tt.kinds, tt.seqs)
			}
			if len(tt.kinds) > 0 && !strings.Contains(a.logs.String(), "AUDIT_VERIFY_FAILED") {
				t.Errorf("no AUDIT_VERIFY_FAILED log line")
			}
		})
	}
}

// recompute is the checkpoint algorithm written independently: SHA-256 of
// "<seq> <audit_hash>\n" per record.
func recompute(hashes []string) string {
	var b strings.Builder
	for i, h := range hashes {
		fmt.Fprintf(&b, "%d %s\n", i+1, h)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

func TestCheckpoint(t *testing.T) {
	e := newEnv(t)
	base := fixture{domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable, firstSeen: t0, quarantined: t0}
	var hashes []string
	for i := range 3 {
		f := base
		f.id = id(i)
		for _, r := range e.chainOf(t, f) {
			hashes = append(hashes, r.AuditHash)
		}
	}
	a := e.startAuditor(t, testConfig(), nil)
	var c1, c2, c3 api.CheckpointReply
	request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &c1)
	if c1.Checkpoint.LastSeq != 3 || c1.Checkpoint.Count != 3 || c1.Checkpoint.Digest != recompute(hashes) ||
		c1.Checkpoint.Prev != "" || c1.Checkpoint.Algorithm != api.CheckpointAlgorithm {
		t.Fatalf("first checkpoint %+v; want last_seq 3, count 3, digest %s", c1, recompute(hashes))
	}
	request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &c2)
	if !c2.Unchanged || c2.Seq != c1.Seq {
		t.Fatalf("second checkpoint with nothing new: %+v, want the first unchanged", c2)
	}
	f := base
	f.id = id(7)
	hashes = append(hashes, e.chainOf(t, f)[0].AuditHash)
	request(t, e.nc, api.AuditCheckpoint, api.CheckpointRequest{}, &c3)
	stored, err := e.js.Stream(t.Context(), subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stored.GetMsg(t.Context(), c1.Seq)
	if err != nil {
		t.Fatal(err)
	}
	prev := sha256.Sum256(m.Data)
	if c3.Checkpoint.LastSeq != 4 || c3.Checkpoint.Digest != recompute(hashes) || c3.Checkpoint.Prev != hex.EncodeToString(prev[:]) {
		t.Fatalf("third checkpoint %+v; want last_seq 4, digest %s, prev %x", c3.Checkpoint, recompute(hashes), prev)
	}
	var rep api.VerifyReply
	request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &rep)
	if !rep.OK || rep.Checkpoints != 2 || rep.Records != 4 {
		t.Fatalf("verify after checkpoints: %+v", rep)
	}
	if !strings.Contains(a.logs.String(), `"msg":"AUDIT_CHECKPOINT"`) {
		t.Errorf("no AUDIT_CHECKPOINT log line")
	}
}

// TestGroups checks counts, first/last seen and the oldest open age
// against a hand-computed fixture, with a fixed clock.
func TestGroups(t *testing.T) {
	e := newEnv(t)
	ndc := func(n int, party string, seen, quarantined time.Duration) fixture {
		return fixture{id: id(n), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC, party: party,
			firstSeen: t0.Add(seen), quarantined: t0.Add(quarantined)}
	}
	e.chainOf(t, ndc(1, "AB1234563", 0, time.Minute))                                      // open
	e.chainOf(t, ndc(2, "AB1234563", 10*time.Minute, 11*time.Minute))                      // open
	e.chainOf(t, ndc(3, "CD7654321", 20*time.Minute, 21*time.Minute), record.KindResolved) // resolved
	e.chainOf(t, fixture{id: id(4), domain: "fsma", class: record.ClassExhausted, code: codes.DownstreamUnavailable,
		party: "SUP-1", firstSeen: t0.Add(5 * time.Minute), quarantined: t0.Add(30 * time.Minute)}) // open
	now := t0.Add(time.Hour)
	e.startAuditor(t, testConfig(), func() time.Time { return now })

	var rep api.GroupsReply
	request(t, e.nc, api.AuditGroups, api.GroupsRequest{}, &rep)
	type row struct {
		fp               string
		total, open      int
		first, last      time.Time
		oldest           float64
		samples, parties string
	}
	got := []row{}
	for _, g := range rep.Groups {
		var ps []string
		for _, p := range g.Parties {
			ps = append(ps, fmt.Sprintf("%s:%d/%d/%.0f", p.Party, p.Open, p.Total, p.OldestOpenSeconds))
		}
		got = append(got, row{g.Fingerprint, g.Total, g.Open, g.FirstSeen, g.LastSeen, g.OldestOpenSeconds,
			strings.Join(g.Samples, ","), strings.Join(ps, " ")})
	}
	want := []row{
		{"pharmacy:INVALID_NDC:validation", 3, 2, t0, t0.Add(20 * time.Minute), 59 * 60,
			id(2) + "," + id(1) + "," + id(3), "AB1234563:2/2/3540 CD7654321:0/1/0"},
		{"fsma:DOWNSTREAM_UNAVAILABLE:exhausted", 1, 1, t0.Add(5 * time.Minute), t0.Add(5 * time.Minute), 30 * 60,
			id(4), "SUP-1:1/1/1800"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("groups\n got %+v\nwant %+v", got, want)
	}
}

func TestGetAndList(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.chainOf(t, fixture{id: id(i), domain: "pharmacy", class: record.ClassValidation, code: pharmacy.InvalidNDC,
			firstSeen: t0, quarantined: t0.Add(time.Duration(i) * time.Minute)})
	}
	rs := e.chainOf(t, fixture{id: id(9), domain: "dscsa", class: record.ClassExhausted, code: codes.DownstreamUnavailable,
		firstSeen: t0, quarantined: t0.Add(time.Hour)}, record.KindRedriveRequested)
	e.startAuditor(t, testConfig(), nil)

	tests := []struct {
		name    string
		req     api.GetRequest
		payload bool
		status  record.Status
	}{
		{"payload omitted", api.GetRequest{DLQID: id(9)}, false, record.StatusRedriving},
		{"payload included", api.GetRequest{DLQID: id(9), IncludePayload: true, Reason: "test"}, true, record.StatusRedriving},
		{"domain given", api.GetRequest{DLQID: id(1), Domain: "pharmacy"}, false, record.StatusOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rep api.GetReply
			request(t, e.nc, api.AuditGet, tt.req, &rep)
			hasPayload := bytes.Contains(rep.Records[0].Record, []byte("TX-SECRET-PHI")) && rep.State.Payload != nil
			if rep.State.Status != tt.status || hasPayload != tt.payload || len(rep.Problems) != 0 {
				t.Fatalf("get: status %s payload %v problems %v", rep.State.Status, hasPayload, rep.Problems)
			}
		})
	}
	var rep api.GetReply
	request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: id(9)}, &rep)
	if len(rep.Records) != 2 || rep.State.LastHash != rs[1].AuditHash {
		t.Fatalf("get: %d records, last hash %s", len(rep.Records), rep.State.LastHash)
	}
	m, err := e.nc.Request(api.AuditGet, []byte(`{"dlq_id":"pharmacy_nothing"}`), 5*time.Second)
	if err != nil || m.Header.Get("Nats-Service-Error-Code") != api.ErrNotFound {
		t.Fatalf("get of an unknown id: %v %v", err, m.Header)
	}

	// Pages of 2, newest first, over the pharmacy domain.
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		var l api.ListReply
		request(t, e.nc, api.AuditList, api.ListRequest{Domain: "pharmacy", Limit: 2, Cursor: cursor}, &l)
		for _, it := range l.Items {
			ids = append(ids, it.DLQID)
		}
		if cursor = l.NextCursor; cursor == "" || page > 5 {
			break
		}
	}
	if want := []string{id(4), id(3), id(2), id(1), id(0)}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("list pages: %v, want %v", ids, want)
	}
	var l api.ListReply
	request(t, e.nc, api.AuditList, api.ListRequest{Status: string(record.StatusRedriving)}, &l)
	if l.Total != 1 || l.Items[0].DLQID != id(9) {
		t.Fatalf("list by status: %+v", l)
	}
}

// TestMetricsScrape serves the registry over HTTP and watches the depth
// and oldest-age gauges move as a record is quarantined and resolved.
func TestMetricsScrape(t *testing.T) {
	e := newEnv(t)
	now := t0.Add(time.Hour)
	a := e.startAuditor(t, testConfig(), func() time.Time { return now })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	scrape := func() string {
		res, err := http.Get("http://" + ln.Addr().String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	waitFor := func(lines ...string) {
		t.Helper()
		natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
			body := scrape()
			for _, l := range lines {
				if !strings.Contains(body, l+"\n") {
					return fmt.Errorf("no line %q in /metrics", l)
				}
			}
			return nil
		})
	}
	rs := e.chainOf(t, fixture{id: id(1), domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable,
		firstSeen: t0, quarantined: t0.Add(30 * time.Minute)})
	waitFor(`deadletter_quarantine_open_records{class="exhausted",domain="pharmacy"} 1`,
		`deadletter_quarantine_oldest_open_age_seconds{domain="pharmacy"} 1800`,
		`deadletter_quarantine_poison_records{domain="pharmacy"} 0`,
		`deadletter_quarantine_stored_records_total{kind="quarantined"} 1`)
	e.publish(t, next(t, rs[0], record.KindResolved, t0.Add(40*time.Minute)))
	waitFor(`deadletter_quarantine_open_records{class="exhausted",domain="pharmacy"} 0`,
		`deadletter_quarantine_oldest_open_age_seconds{domain="pharmacy"} 0`,
		`deadletter_quarantine_stored_records_total{kind="resolved"} 1`)
	var rep api.VerifyReply
	request(t, e.nc, api.AuditVerify, api.VerifyRequest{}, &rep)
	waitFor(`deadletter_audit_verify_runs_total{result="ok"} 1`)
}

// TestAuditLogIsNotRepeated: the auditor writes no audit-log line of its
// own for a record (the quarantiner writes the one line as it stores it;
// tests/audit checks the two services' logs together).
func TestAuditLogIsNotRepeated(t *testing.T) {
	e := newEnv(t)
	a := e.startAuditor(t, testConfig(), nil)
	rs := e.chainOf(t, fixture{id: id(1), domain: "pharmacy", class: record.ClassExhausted, code: codes.DownstreamUnavailable,
		party: "AB1234563", firstSeen: t0, quarantined: t0}, record.KindRedriveRequested, record.KindPoisoned, record.KindResolved)
	var rep api.GetReply
	natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if n := a.index.applied(); n < uint64(len(rs)) {
			return fmt.Errorf("applied %d of %d", n, len(rs))
		}
		return nil
	})
	request(t, e.nc, api.AuditGet, api.GetRequest{DLQID: rs[0].DLQID}, &rep)
	for _, k := range record.Kinds() {
		if strings.Contains(a.logs.String(), k.Event()) {
			t.Errorf("the auditor logged %s:\n%s", k.Event(), a.logs.String())
		}
	}
	if strings.Contains(a.logs.String(), "TX-SECRET-PHI") {
		t.Fatal("a payload value reached the log")
	}
}
