//go:build !linux

package benchenv

import (
	"os/exec"
	"time"
)

// DieWithParent does nothing here: only Linux has a parent-death signal.
// Children of a failed run may have to be stopped by hand.
func DieWithParent(cmd *exec.Cmd) {}

// ChildCPUTime is not measured here: it returns 0.
func ChildCPUTime(pid int) time.Duration { return 0 }
