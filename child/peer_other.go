//go:build !linux || supervise_portable

package child

// Peer is the process that connected a unix socket; this backend cannot
// tell which process that is (docs/macos.md), and --user is the boundary.
type Peer struct{}

// PeerOf returns a Peer whose Origin is OriginUnchecked.
func PeerOf(sockfd int) *Peer { return &Peer{} }

// PID returns 0: unknown.
func (p *Peer) PID() int { return 0 }

// Close does nothing.
func (p *Peer) Close() {}

// Origin returns OriginUnchecked.
func (p *Peer) Origin(root int, cgroupDir string) (Origin, string) {
	return OriginUnchecked, "this build cannot tell which process connected (portable backend)"
}

// AgentCgroupDir returns "": no cgroups on this backend.
func AgentCgroupDir(name, id string) string { return "" }
