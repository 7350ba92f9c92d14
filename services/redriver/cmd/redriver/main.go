// Command redriver runs one redriver instance against an external NATS
// server or cluster (NATS_URL or --nats-url); see package runner for the
// flags and variables every service shares.
package main

import (
	"github.com/deadletter/deadletter/services/redriver"
	"github.com/deadletter/deadletter/shared/runner"
)

func main() {
	runner.Main("redriver", redriver.Version, func(d runner.Deps) (runner.Service, error) {
		cfg := redriver.DefaultConfig()
		cfg.LoadEnv(d.Env)
		cfg.TracerProvider, cfg.Registerer = d.TracerProvider, d.Registerer
		return redriver.New(d.NC, cfg, d.Log)
	}, runner.GCPercent(redriver.GCPercent))
}
