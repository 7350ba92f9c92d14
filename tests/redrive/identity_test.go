package redrive

import (
	"fmt"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/natstest"
)

// TestRestartedRedriverResumesAtOnce: a redriver process configured from
// the environment alone (no DEADLETTER_INSTANCE_ID) gets the same instance
// id on every start, so after a crash its successor on the same host takes
// its running drain back at once, well under DrainLease, instead of
// waiting for the lease of a stranger's drain to run out (issue 16: the
// default id was random).
func TestRestartedRedriverResumesAtOnce(t *testing.T) {
	const lease = 10 * time.Second
	fromEnv := func(t *testing.T) redriver.Config {
		cfg := redriverConfig()
		cfg.InstanceID = "" // as in the redriver's main: DefaultConfig, then LoadEnv
		env := config.NewEnv(func(name string) (string, bool) {
			v, ok := map[string]string{"DEADLETTER_DRAIN_LEASE": lease.String()}[name]
			return v, ok
		})
		cfg.LoadEnv(env)
		if err := env.Err(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	e := newEnv(t)
	var events []event
	for i := range 200 {
		events = append(events, e.pharmacyEvent(t, 5000+i))
	}
	e.quarantineOutage(t, events)
	cfg := fromEnv(t)
	r := e.startRedriver(t, cfg)
	e.down.down.Store(false)
	id := e.startDrain(t, api.DrainStartRequest{RatePerSecond: ptr(40.0), Burst: 1, MaxConcurrency: 4})
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if st, ok := r.Status(id); !ok || st.Replayed < 20 {
			return fmt.Errorf("%d replayed so far", st.Replayed)
		}
		return nil
	})
	r.nc.Close() // killed: no more heartbeats
	r.stop()

	restarted := fromEnv(t)
	if restarted.InstanceID != cfg.InstanceID || restarted.InstanceID == "" {
		t.Errorf("instance id %q after a restart, %q before", restarted.InstanceID, cfg.InstanceID)
	}
	begin := time.Now()
	r2 := e.startRedriver(t, restarted)
	natstest.CheckFor(t, 2*lease, 20*time.Millisecond, func() error {
		if _, ok := r2.Status(id); !ok {
			return fmt.Errorf("drain %s not resumed", id)
		}
		return nil
	})
	took := time.Since(begin)
	t.Logf("restarted redriver %s resumed its drain after %s (lease %s)", restarted.InstanceID, took.Round(time.Millisecond), lease)
	if took > lease/4 {
		t.Errorf("resumed after %s, want well under the lease %s", took, lease)
	}
	if st := e.waitDrain(t, id, time.Minute); st.Status != api.DrainCompleted {
		t.Errorf("drain %+v", st)
	}
	e.committedOnce(t, events)
}
