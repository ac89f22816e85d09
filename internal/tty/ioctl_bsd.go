//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package tty

import "golang.org/x/sys/unix"

const (
	ioctlGetTermios = unix.TIOCGETA
	ioctlSetTermios = unix.TIOCSETA
)

// startOutput is tcflow(fd, TCOON).
func startOutput(fd int) error { return unix.IoctlSetInt(fd, unix.TIOCSTART, 0) }
