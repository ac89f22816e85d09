//go:build !linux

package demo

import (
	"os/exec"

	"golang.org/x/sys/unix"
)

// ioctlGetTermios reads a terminal's attributes.
const ioctlGetTermios = unix.TIOCGETA

// dieWithParent is a no-op without a parent-death signal: the demo's
// close stops supervise on every way out but a kill -9 of the demo.
func dieWithParent(*exec.Cmd) {}
