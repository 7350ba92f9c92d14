// Command quarantiner runs one quarantiner instance against an external NATS
// server or cluster (NATS_URL or --nats-url); see package runner for the
// flags and variables every service shares.
package main

import (
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/shared/runner"
)

func main() {
	runner.Main("quarantiner", quarantiner.Version, func(d runner.Deps) (runner.Service, error) {
		cfg := quarantiner.DefaultConfig()
		cfg.LoadEnv(d.Env)
		cfg.TracerProvider, cfg.Registerer = d.TracerProvider, d.Registerer
		return quarantiner.New(d.NC, cfg, d.Log)
	})
}
