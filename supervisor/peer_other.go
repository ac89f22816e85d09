//go:build !linux || supervise_portable

package supervisor

import (
	"net"

	"github.com/supervise-dev/supervise/child"
)

// takePeer cannot tell which process connected off Linux: the portable
// backend (docs/macos.md) does not refuse a mutating request from the
// agent's tree (child.OriginUnchecked); --user is the boundary there.
func takePeer(net.Conn) *child.Peer { return child.PeerOf(-1) }
