//go:build !supervise_portable

package supervisor

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerPID is the pid of the process at the other end of a unix socket
// connection (SO_PEERCRED), 0 when it cannot be told.
func peerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}
