// Command auditor runs one auditor instance against an external NATS server
// or cluster (NATS_URL or --nats-url), serving /metrics on --metrics-addr;
// see package runner for the flags and variables every service shares.
package main

import (
	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/runner"
)

func main() {
	runner.Main("auditor", auditor.Version, func(d runner.Deps) (runner.Service, error) {
		cfg := auditor.DefaultConfig()
		cfg.LoadEnv(d.Env)
		cfg.Registerer = d.Registerer
		return auditor.New(d.NC, cfg, d.Log)
	})
}
