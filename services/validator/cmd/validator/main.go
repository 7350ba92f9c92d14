// Command validator runs one validator instance against an external NATS
// server or cluster (NATS_URL or --nats-url); see package runner for the
// flags and variables every service shares.
package main

import (
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/runner"
)

func main() {
	runner.Main("validator", validator.Version, func(d runner.Deps) (runner.Service, error) {
		cfg := validator.DefaultConfig()
		cfg.LoadEnv(d.Env)
		cfg.TracerProvider, cfg.Registerer = d.TracerProvider, d.Registerer
		return validator.New(d.NC, cfg, d.Log)
	})
}
