package host

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the plugin when the host dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
