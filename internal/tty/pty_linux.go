package tty

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a new pseudo-terminal pair: the master (what a terminal
// emulator reads and writes) and the slave (the terminal a program gets).
// For tests; both are the caller's to close.
func OpenPTY() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	// Through SyscallConn, not Fd: Fd would put the master in blocking
	// mode, where a read deadline no longer works.
	var n uint32
	rc, err := m.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
				n, err = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}
