package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ioctlGetTermios is the ioctl that reads a terminal's settings.
const ioctlGetTermios = unix.TCGETS

// demoSuperviseAttr makes the demo's supervise stop its agent and exit
// when the demo dies.
func demoSuperviseAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
