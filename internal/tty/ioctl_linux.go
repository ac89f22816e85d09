package tty

import "golang.org/x/sys/unix"

const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)

// startOutput is tcflow(fd, TCOON).
func startOutput(fd int) error { return unix.IoctlSetInt(fd, unix.TCXONC, unix.TCOON) }
