package quarantiner

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
)

// TestReplayFailureTakesItsOwnClass: a replay_failed record carries the
// class of the replay's failure, not the class the event was first
// quarantined with: a corrected validation event whose replay fails at
// the downstream is exhausted (a default drain takes it), and an
// exhausted event whose replay fails the gate is validation.
func TestReplayFailureTakesItsOwnClass(t *testing.T) {
	e := newEnv(t)
	e.start(t, testConfig(), nil)
	records := 0
	for i, tc := range []struct {
		name        string
		first       record.Class
		firstCode   codes.Code
		replay      record.Class
		replayCode  codes.Code
		want        record.Class
		defaultable bool // a drain of the default class (exhausted) selects it
	}{
		{"validation (a correction), then the downstream fails", record.ClassValidation, codes.MissingLot, record.ClassExhausted, codes.DownstreamUnavailable, record.ClassExhausted, true},
		{"validation (a correction), then the gate refuses again", record.ClassValidation, codes.MissingLot, record.ClassValidation, pharmacy.InvalidNDC, record.ClassValidation, false},
		{"exhausted, then the downstream fails again", record.ClassExhausted, codes.DownstreamUnavailable, record.ClassExhausted, codes.DownstreamUnavailable, record.ClassExhausted, true},
		{"exhausted, then the gate refuses", record.ClassExhausted, codes.DownstreamUnavailable, record.ClassValidation, codes.SchemaValidation, record.ClassValidation, false},
		{"a report without a class keeps the event's", record.ClassExhausted, codes.DownstreamUnavailable, "", codes.DownstreamUnavailable, record.ClassExhausted, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := fmt.Appendf(nil, `{"supplier":"Müller & Söhne <Großhandel>","n":%d}`, i)
			seq := e.publishEvent(t, "events.pharmacy.receive", data, nil)
			f := structural("events.pharmacy.receive", seq, data, tc.firstCode)
			f.Class = tc.first
			e.reportFailure(t, f)
			records++
			e.waitRecords(t, records)
			dlqID := record.DLQIDFor(f)
			hdr := nats.Header{envelope.DLQID: {dlqID}, envelope.RedriveCount: {"1"}}
			rseq := e.publishEvent(t, "events.pharmacy.receive", data, hdr)
			rf := structural("events.pharmacy.receive", rseq, data, tc.replayCode)
			rf.Class, rf.DLQID, rf.RedriveCount = tc.replay, dlqID, 1
			e.reportFailure(t, rf)
			records++
			e.waitRecords(t, records)
			var chain []record.Record
			for _, raw := range e.chainOf(t, "pharmacy", dlqID) {
				var r record.Record
				if err := json.Unmarshal(raw, &r); err != nil {
					t.Fatal(err)
				}
				chain = append(chain, r)
			}
			if len(chain) != 2 || chain[1].Kind != record.KindReplayFailed {
				t.Fatalf("chain = %d records, want quarantined + replay_failed", len(chain))
			}
			if chain[1].Class != tc.want || chain[1].ErrorCode != tc.replayCode {
				t.Errorf("replay_failed class %q code %s, want %q %s", chain[1].Class, chain[1].ErrorCode, tc.want, tc.replayCode)
			}
			st, err := record.Fold(chain)
			if err != nil {
				t.Fatal(err)
			}
			if st.Class != tc.want || st.Redrivable(false) != tc.defaultable {
				t.Errorf("state class %q, redrivable by a default drain %v; want %q, %v", st.Class, st.Redrivable(false), tc.want, tc.defaultable)
			}
		})
	}
}
