package demo

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// ioctlGetTermios reads a terminal's attributes.
const ioctlGetTermios = unix.TCGETS

// dieWithParent makes cmd get SIGTERM when the demo dies, so that
// supervise stops the agent and exits.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
