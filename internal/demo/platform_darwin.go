package demo

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ioctlGetTermios is the ioctl that reads a terminal's settings.
const ioctlGetTermios = unix.TIOCGETA

// superviseAttr has nothing to add on macOS, which has no parent-death
// signal: a demo killed outright leaves its supervise running until the
// demo's own cleanup or a kill.
func superviseAttr() *syscall.SysProcAttr { return nil }
