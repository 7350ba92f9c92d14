package benchenv

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the child process cmd (not yet started) receive
// SIGKILL when the benchmark that starts it exits, however it exits: a
// failed run leaves no redriver, server or trace sink behind.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
