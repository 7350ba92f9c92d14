// Package e2e drives deadletter as its users do: the all-in-one binary that
// `make run` starts, the real nats CLI, and signals.
package e2e
