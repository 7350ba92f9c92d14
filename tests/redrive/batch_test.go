package redrive

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
)

// TestBatchedDrainLeavesTheSameChains: a drain over many keys whose
// replays go to EVENTS in atomic batches commits each event once and
// leaves, chain by chain, the records an unbatched drain leaves
// (quarantined, redrive_requested by the drain, replayed located at the
// replay's EVENTS sequence), every seal verified by shared/chain; and one
// replay per event is stored in EVENTS, none in REPLAYS.
func TestBatchedDrainLeavesTheSameChains(t *testing.T) {
	const n = 200
	for _, tc := range []struct {
		name        string
		replayBatch int
		wantBatches bool
	}{
		{"unbatched (one publish per replay)", 1, false},
		{"batched", 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.down.down.Store(false)
			events := make([]event, n)
			for i := range events {
				events[i] = e.pharmacyEvent(t, i)
			}
			e.seedExhausted(t, events)
			reg := prometheus.NewRegistry()
			cfg := redriverConfig()
			// A linger makes the batches certain on a machine of any speed.
			cfg.Registerer, cfg.ReplayBatch, cfg.ReplayLinger = reg, tc.replayBatch, 20*time.Millisecond
			e.startRedriver(t, cfg)
			id := e.startDrain(t, api.DrainStartRequest{Filter: api.DrainFilter{Domain: "pharmacy"}, RatePerSecond: ptr(0.0), MaxConcurrency: 128})
			st := e.waitDrain(t, id, 2*time.Minute)
			if st.Status != api.DrainCompleted || st.Selected != n || st.Committed != n || st.Replayed != n {
				t.Fatalf("drain %+v", st)
			}
			e.committedOnce(t, events)
			batches := counter(t, reg, "deadletter_redrive_replay_batches_total")
			if (batches > 0) != tc.wantBatches {
				t.Errorf("%v replay batches stored, want some: %v", batches, tc.wantBatches)
			}
			t.Logf("%v batches carried %v replays; %v not stored as a whole", batches,
				counter(t, reg, "deadletter_redrive_replays_batched_total"), counter(t, reg, "deadletter_redrive_replay_batches_unbatched_total"))

			ctx := context.Background()
			// Each replay is stored once, in EVENTS, on a subject of its
			// own; nothing goes through REPLAYS any more.
			rs, err := e.js.Stream(ctx, subjects.ReplaysStream)
			if err != nil {
				t.Fatal(err)
			}
			if info, err := rs.Info(ctx); err != nil || info.State.Msgs != 0 {
				t.Fatalf("REPLAYS holds %v messages (%v), want none", info.State.Msgs, err)
			}
			es, err := e.js.Stream(ctx, subjects.EventsStream)
			if err != nil {
				t.Fatal(err)
			}
			info, err := es.Info(ctx, jetstream.WithSubjectFilter(subjects.RedrivenAll))
			if err != nil {
				t.Fatal(err)
			}
			if len(info.State.Subjects) != n {
				t.Fatalf("EVENTS holds replays on %d subjects, want %d", len(info.State.Subjects), n)
			}
			for subj, c := range info.State.Subjects {
				if c != 1 {
					t.Fatalf("%d replays on %s, want 1", c, subj)
				}
			}
			rd := chain.NewReader(e.js)
			for _, ev := range events {
				ch, err := rd.Read(ctx, "pharmacy", ev.dlqID()) // every seal verified
				if err != nil || ch.FoldErr != nil {
					t.Fatalf("%s: %v %v", ev.key, err, ch.FoldErr)
				}
				kinds := []record.Kind{}
				for _, r := range ch.Records {
					kinds = append(kinds, r.Kind)
				}
				if len(kinds) != 3 || kinds[0] != record.KindQuarantined || kinds[1] != record.KindRedriveRequested || kinds[2] != record.KindReplayed {
					t.Fatalf("%s: chain %v", ev.key, kinds)
				}
				req, out := ch.Records[1], ch.Records[2]
				if req.DrainID != id || out.DrainID != id {
					t.Fatalf("%s: request %+v outcome drain %q", ev.key, req, out.DrainID)
				}
				if out.SourceStream != subjects.EventsStream || out.SourceSeq == 0 {
					t.Fatalf("%s: replayed at %s/%d", ev.key, out.SourceStream, out.SourceSeq)
				}
				m, err := es.GetMsg(ctx, out.SourceSeq)
				if err != nil {
					t.Fatalf("%s: EVENTS %d: %v", ev.key, out.SourceSeq, err)
				}
				if string(m.Data) != string(ev.data) || m.Header.Get(envelope.DLQID) != ev.dlqID() {
					t.Fatalf("%s: EVENTS %d holds another event's replay", ev.key, out.SourceSeq)
				}
			}
		})
	}
}

// gauge returns the value of the counter named name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	return 0
}
