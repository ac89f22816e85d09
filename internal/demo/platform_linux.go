package demo

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ioctlGetTermios is the ioctl that reads a terminal's settings.
const ioctlGetTermios = unix.TCGETS

// superviseAttr makes the demo's supervise stop its agent and exit
// when the demo dies.
func superviseAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
