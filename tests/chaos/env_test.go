package chaos_test

import (
	"github.com/deadletter/deadletter/shared/natstest"
	"testing"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/config"
)

// TestServicesReadProvision: every service that can create streams reads
// DEADLETTER_PROVISION, which the deployment guide (and the chaos run)
// sets to false: under the trust boundary no service may create a stream,
// so a service that ignored it could not start (the standalone redriver
// did, failing on REPLAYS' stream info).
func TestServicesReadProvision(t *testing.T) {
	natstest.Long(t, "a cluster of processes killed and restarted, minutes")
	env := func() *config.Env {
		return config.NewEnv(func(k string) (string, bool) {
			if k == "DEADLETTER_PROVISION" {
				return "false", true
			}
			return "", false
		})
	}
	for _, tc := range []struct {
		name      string
		provision func(*config.Env) bool
	}{
		{"validator", func(e *config.Env) bool { c := validator.DefaultConfig(); c.LoadEnv(e); return c.Provision }},
		{"quarantiner", func(e *config.Env) bool { c := quarantiner.DefaultConfig(); c.LoadEnv(e); return c.Provision }},
		{"redriver", func(e *config.Env) bool { c := redriver.DefaultConfig(); c.LoadEnv(e); return c.Provision }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := env()
			if tc.provision(e) {
				t.Errorf("%s ignores DEADLETTER_PROVISION=false", tc.name)
			}
			if err := e.Err(); err != nil {
				t.Error(err)
			}
		})
	}
}
