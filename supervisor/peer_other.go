//go:build !linux || supervise_portable

package supervisor

import "net"

// peerPID is 0 off Linux: the portable backend cannot tell which process a
// control connection comes from (docs/macos.md), so a mutating request from
// the agent's tree is not refused there; --user is the boundary.
func peerPID(net.Conn) int { return 0 }
