package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/deadletter/deadletter/tests/internal/chaos"
	"github.com/deadletter/deadletter/tests/internal/tools"
)

// TestReducedChaos is the chaos run of every make test: about 5,000 events,
// every service killed once, the server stopped with SIGTERM and with
// SIGKILL, then the independent accounting and the auditor's must agree.
func TestReducedChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bins, err := chaos.Build(ctx, tools.Root(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := chaos.DefaultOptions()
	o.Events, o.Kills, o.Dir, o.Bins, o.Logf = 5000, 1, t.TempDir(), bins, t.Logf
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
	if len(rep.ServerStops) != 2 {
		t.Errorf("server stops %v, want SIGTERM and SIGKILL", rep.ServerStops)
	}
	if rep.Malformed == 0 || rep.Republished == 0 || rep.Exhausting == 0 || rep.Transient == 0 {
		t.Errorf("the workload lacks a kind of event: %+v", rep)
	}
}
