//go:build !linux

package benchenv

import "os/exec"

// DieWithParent does nothing here: only Linux has a parent-death signal.
// Children of a failed run may have to be stopped by hand.
func DieWithParent(cmd *exec.Cmd) {}
