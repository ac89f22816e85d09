//go:build !supervise_portable

package supervisor

import (
	"net"

	"github.com/supervise-dev/supervise/child"
)

// takePeer takes the process at the other end of an accepted unix socket
// connection (child.PeerOf: its pidfd, from SO_PEERPIDFD or SO_PEERCRED).
func takePeer(c net.Conn) *child.Peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return child.PeerOf(-1)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return child.PeerOf(-1)
	}
	var p *child.Peer
	if err := raw.Control(func(fd uintptr) { p = child.PeerOf(int(fd)) }); err != nil || p == nil {
		return child.PeerOf(-1)
	}
	return p
}
