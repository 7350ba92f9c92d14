// Package chaos holds the reduced chaos run of make test: the services as
// processes on a real nats-server process, each killed with SIGKILL during
// the workload, the server stopped with SIGTERM and SIGKILL; nothing lost,
// nothing committed twice (package tests/internal/chaos). The full run is
// make chaos (command tests/chaos/cmd/chaos).
package chaos
