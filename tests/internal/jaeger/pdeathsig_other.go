//go:build !linux

package jaeger

import "os/exec"

// setParentDeathSignal is a no-op where the OS has no parent-death signal.
func setParentDeathSignal(*exec.Cmd) {}
