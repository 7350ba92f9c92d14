package validator

import (
	"bytes"
	"testing"

	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestValidationFailureIdentity: a payload that parsed but failed validation
// is reported with the identity its domain's rules can derive (issue 15,
// bug 3: every validation failure had no party id, ordering key or
// idempotency key), and the same bytes published twice get the same dlq id
// while different bytes never share one.
func TestValidationFailureIdentity(t *testing.T) {
	g, err := gate.New(0)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		party, ordering string
		// fixOld replaced by fixNew makes the example valid: the
		// failure must carry that valid event's identity. noKey: no
		// idempotency key can be derived.
		fixOld, fixNew string
		noKey          bool
	}
	cases := []struct {
		name, domain, file string
		want               want
	}{
		{name: "pharmacy missing lot", domain: "pharmacy", file: "MISSING_LOT--schedule-ii-without-lot.json",
			want: want{party: "BW4829137", ordering: "BW4829137.00406051201.",
				fixOld: `"dea_schedule": "II"`, fixNew: `"dea_schedule": "II", "lot": "L1"`}},
		{name: "fsma time without offset", domain: "fsma", file: "UNPARSEABLE_EVENT_TIME--no-offset.json",
			want: want{party: "SUP-00417", ordering: "SUP-00417.00860001000030-RL250312A", noKey: true}},
		{name: "dscsa commissioning without lot", domain: "dscsa", file: "MISSING_LOT--commissioning-without-lot.json",
			want: want{party: "0614141007776", ordering: "00614141123452.10016550749981",
				fixOld: `"ilmd": {`, fixNew: `"ilmd": {"cbvmda:lotNumber": "L1",`}},
	}
	srv := natstest.Start(t)
	js := srv.JetStream(t)
	startValidator(t, srv, testConfig(), nil)
	bySeq := map[uint64]int{}
	for i, c := range cases {
		subject, data := example(t, c.domain, "invalid", c.file)
		bySeq[publish(t, js, subject, data, "")] = i
		bySeq[publish(t, js, subject, data, "")] = i // the same bytes again
	}
	malformed := []byte(`{"transaction_id": "TX-1",`)
	mseq := publish(t, js, "events.pharmacy.dispense", malformed, "")
	mseq2 := publish(t, js, "events.pharmacy.dispense", malformed, "")
	other := publish(t, js, "events.pharmacy.dispense", append(bytes.Clone(malformed), ' '), "")
	waitMsgs(t, js, subjects.FailuresStream, uint64(2*len(cases)+3))

	dlqIDs := map[uint64]string{}
	for _, f := range failures(t, js) {
		dlqIDs[f.Seq] = record.DLQIDFor(f)
		i, ok := bySeq[f.Seq]
		if !ok {
			if f.Envelope == nil || !f.Envelope.Partial || f.Envelope.Domain != "pharmacy" || f.Envelope.PartyID != "" {
				t.Errorf("malformed JSON's failure envelope %+v", f.Envelope)
			}
			continue
		}
		c := cases[i]
		t.Run(c.name, func(t *testing.T) {
			e := f.Envelope
			if e == nil {
				t.Fatal("failure carries no envelope")
			}
			if e.PartyID != c.want.party || e.OrderingKey != c.want.ordering || !e.Partial || e.Domain != c.domain {
				t.Errorf("envelope %+v, want party %q, ordering key %q", e, c.want.party, c.want.ordering)
			}
			if c.want.noKey {
				if e.IdempotencyKey != "" {
					t.Errorf("idempotency key %q derived from an unparseable time", e.IdempotencyKey)
				}
				return
			}
			subject, data := example(t, c.domain, "invalid", c.file)
			fixed := bytes.Replace(data, []byte(c.want.fixOld), []byte(c.want.fixNew), 1)
			valid, err := g.Check(subject, fixed)
			if err != nil {
				t.Fatalf("fixed example: %v", err)
			}
			if e.IdempotencyKey != valid.IdempotencyKey || e.KeySource != valid.KeySource ||
				e.PartyID != valid.PartyID || !e.EventTime.Equal(valid.EventTime) {
				t.Errorf("idempotency key %q (%s), the fixed event's is %q (%s)", e.IdempotencyKey, e.KeySource, valid.IdempotencyKey, valid.KeySource)
			}
			if f.Domain != c.domain || record.DLQIDFor(f) == e.IdempotencyKey {
				t.Errorf("dlq id %q: a validation failure is named by its bytes, not its key", record.DLQIDFor(f))
			}
		})
	}
	// The same bytes: one dlq id; other bytes: another.
	for seq, i := range bySeq {
		for seq2, j := range bySeq {
			if (i == j) != (dlqIDs[seq] == dlqIDs[seq2]) {
				t.Errorf("seq %d (%s) and %d (%s): same bytes %v, same dlq id %v", seq, dlqIDs[seq], seq2, dlqIDs[seq2], i == j, dlqIDs[seq] == dlqIDs[seq2])
			}
		}
	}
	if dlqIDs[mseq] == "" || dlqIDs[mseq] != dlqIDs[mseq2] || dlqIDs[mseq] == dlqIDs[other] {
		t.Errorf("malformed JSON dlq ids %q, %q (same bytes), %q (other bytes)", dlqIDs[mseq], dlqIDs[mseq2], dlqIDs[other])
	}
}
