package auditor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/record"
)

// TestListRecords pages through QUARANTINE's records with after_seq:
// oldest first, filtered, without payloads, and from the stream's end.
func TestListRecords(t *testing.T) {
	e := newEnv(t)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// Sequences 1..3: chain 0 (quarantined, redrive_requested, resolved);
	// 4: chain 1 in dscsa.
	e.chainOf(t, fixture{id: id(0), domain: "pharmacy", class: record.ClassExhausted, code: codes.Code("DOWNSTREAM_UNAVAILABLE"),
		firstSeen: at, quarantined: at}, record.KindRedriveRequested, record.KindResolved)
	e.chainOf(t, fixture{id: "dscsa_1", domain: "dscsa", class: record.ClassValidation, code: codes.Code("INVALID_GLN"),
		firstSeen: at, quarantined: at})
	e.startAuditor(t, testConfig(), nil)

	cases := []struct {
		name string
		req  api.ListRequest
		seqs string
		next uint64
	}{
		{name: "all", req: api.ListRequest{}, seqs: "[1 2 3 4]", next: 4},
		{name: "after a sequence", req: api.ListRequest{AfterSeq: 2}, seqs: "[3 4]", next: 4},
		{name: "a page", req: api.ListRequest{Limit: 2}, seqs: "[1 2]", next: 2},
		{name: "next page", req: api.ListRequest{AfterSeq: 2, Limit: 1}, seqs: "[3]", next: 3},
		{name: "domain", req: api.ListRequest{Domain: "dscsa"}, seqs: "[4]", next: 4},
		{name: "chain", req: api.ListRequest{DLQID: id(0), AfterSeq: 1}, seqs: "[2 3]", next: 4},
		{name: "nothing matches", req: api.ListRequest{Domain: "fsma"}, seqs: "[]", next: 4},
		{name: "from the end", req: api.ListRequest{AfterSeq: math.MaxUint64}, seqs: "[]", next: 4},
		{name: "from a time to come", req: api.ListRequest{From: time.Now().Add(time.Hour)}, seqs: "[]", next: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Records = true
			b, _ := json.Marshal(c.req)
			m, err := e.nc.Request(api.AuditList, b, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
				t.Fatalf("%s: %s", code, m.Header.Get("Nats-Service-Error"))
			}
			if bytes.Contains(m.Data, []byte("TX-SECRET-PHI")) || bytes.Contains(m.Data, []byte("rule failed")) {
				t.Errorf("a records list holds payload or detail bytes: %s", m.Data)
			}
			var rep api.ListReply
			if err := json.Unmarshal(m.Data, &rep); err != nil {
				t.Fatal(err)
			}
			seqs := make([]uint64, len(rep.Records))
			for i, r := range rep.Records {
				seqs[i] = r.Seq
			}
			if fmt.Sprint(seqs) != c.seqs || rep.NextAfterSeq != c.next {
				t.Errorf("records %v next %d, want %s next %d", seqs, rep.NextAfterSeq, c.seqs, c.next)
			}
		})
	}

	var rep api.ListReply
	request(t, e.nc, api.AuditList, api.ListRequest{Records: true, AfterSeq: 1, Limit: 1}, &rep)
	if r := rep.Records[0]; r.DLQID != id(0) || r.Index != 1 || r.Kind != string(record.KindRedriveRequested) || r.DrainID != "drain-1" ||
		r.Domain != "pharmacy" || r.Class != string(record.ClassExhausted) || r.ErrorCode != "DOWNSTREAM_UNAVAILABLE" || len(r.AuditHash) != 64 {
		t.Errorf("record summary %+v", r)
	}
	request(t, e.nc, api.AuditList, api.ListRequest{Records: true, AfterSeq: 2, Limit: 1}, &rep)
	if r := rep.Records[0]; r.Kind != string(record.KindResolved) || r.Actor != "alice" {
		t.Errorf("resolved record summary %+v", r)
	}
	m, err := e.nc.Request(api.AuditList, []byte(`{"records":true,"dlq_id":"a.b"}`), 5*time.Second)
	if err != nil || m.Header.Get("Nats-Service-Error-Code") != api.ErrBadRequest {
		t.Errorf("a dlq id that is no token: %v %v", err, m.Header)
	}
}
