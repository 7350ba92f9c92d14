// Package pipeline tests the validator and the quarantiner together on a real
// embedded server: what reaches the logs, and what reaches the quarantine.
package pipeline
