package jaeger

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills Jaeger if the test binary dies without cleanup.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
