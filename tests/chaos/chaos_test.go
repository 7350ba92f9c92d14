package chaos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/failpoint"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/tests/internal/chaos"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// TestReducedChaos is the chaos run of every make test, on one server and
// on a 3-node cluster from the deployment kit's generated files: every
// service killed once; the server stopped with SIGTERM and with SIGKILL, or
// the node leading EVENTS killed and brought back; then the independent
// accounting and the auditor's must agree.
func TestReducedChaos(t *testing.T) {
	natstest.Long(t, "a cluster of processes killed and restarted, minutes")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bins, err := chaos.Build(ctx, tools.Root(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		nodes, events int
		stops         int
	}{
		{"server", 1, 5000, 2},
		{"cluster", 3, 3000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := chaos.DefaultOptions()
			o.Nodes, o.Events, o.Kills, o.Dir, o.Bins, o.Logf = tc.nodes, tc.events, 1, t.TempDir(), bins, t.Logf
			check(t, ctx, o, tc.stops)
		})
	}
}

func check(t *testing.T, ctx context.Context, o chaos.Options, stops int) {
	rep, err := chaos.Run(ctx, o)
	if rep != nil {
		t.Logf("figures:\n%s", rep.Table())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems() {
		t.Error(p)
	}
	for _, name := range []string{"validator", "quarantiner", "redriver", "auditor"} {
		if rep.Kills[name] < 1 {
			t.Errorf("%s was never killed", name)
		}
	}
	if len(rep.ServerStops) != stops {
		t.Errorf("server stops %v, want %d", rep.ServerStops, stops)
	}
	if rep.Malformed == 0 || rep.Republished == 0 || rep.Exhausting == 0 || rep.Transient == 0 {
		t.Errorf("the workload lacks a kind of event: %+v", rep)
	}
}

// TestTargetedWindows kills a service exactly where a crash is hardest to
// recover from (package failpoint): after the downstream accepted an event
// and before its LEDGER write; after a record is stored and before its
// intake is acknowledged; between a redrive's claim and its replay, and
// between the replay and its outcome (the redriver's points fire during
// the final drain). Each ends exactly once: the downstream's accepted keys
// equal LEDGER's, nothing unaccounted, nothing committed twice.
func TestTargetedWindows(t *testing.T) {
	natstest.Long(t, "a cluster of processes killed and restarted, minutes")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bins, err := chaos.Build(ctx, tools.Root(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range failpoint.Points() {
		t.Run(string(p), func(t *testing.T) {
			o := chaos.DefaultOptions()
			o.Events, o.Kills, o.ServerRestarts, o.Exhausting = 300, 0, false, 0.05
			o.Failpoint, o.Dir, o.Bins, o.Logf = string(p), t.TempDir(), bins, t.Logf
			rep, err := chaos.Run(ctx, o)
			if rep != nil {
				t.Logf("figures:\n%s", rep.Table())
			}
			if err != nil {
				t.Fatal(err)
			}
			svc, _, _ := strings.Cut(string(p), ".")
			if rep.Restarts[svc] != 1 {
				t.Errorf("%s restarted %d times after exiting by itself, want 1 (the failpoint's kill)", svc, rep.Restarts[svc])
			}
			for _, pr := range rep.Problems() {
				t.Error(pr)
			}
		})
	}
}
