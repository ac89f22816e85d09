package child

import "fmt"

// Origin says where the process at the other end of a control connection
// stands relative to the supervised agent's tree, as far as the kernel can
// show it.
type Origin int

const (
	// OriginUnknown: the process is gone, or its ancestry could not be
	// read consistently; it cannot be shown to be outside the tree, so a
	// mutating request from it is refused (fail closed).
	OriginUnknown Origin = iota
	// OriginTree: it is in the agent's cgroup subtree, or it descends from
	// the agent or from supervise itself (supervise is a child subreaper:
	// the orphans of the agent's tree are re-parented to it, whatever
	// their environment).
	OriginTree
	// OriginOutside: its chain of parents reaches pid 1 (or the kernel)
	// without passing through the agent or supervise, and it is not in the
	// agent's cgroup subtree.
	OriginOutside
	// OriginUnchecked: this backend cannot tell (the portable backend has
	// no peer credentials: docs/macos.md); --user is the boundary there.
	OriginUnchecked
)

func (o Origin) String() string {
	switch o {
	case OriginTree:
		return "tree"
	case OriginOutside:
		return "outside"
	case OriginUnchecked:
		return "unchecked"
	}
	return "unknown"
}

// procReader reads a process's parent and start time (procStart).
type procReader func(pid int) (ppid int, start uint64, err error)

// maxHops bounds the walk up a chain of parents (pid_max is at most 2^22,
// but no real chain is this deep).
const maxHops = 4096

// maxRetries bounds how often a walk is started again because a process on
// it was re-parented while it was read.
const maxRetries = 8

// ancestry walks the parents of pid and reports whether the chain meets
// root (the agent, 0 for none) or self (supervise) before it reaches pid 1
// or the kernel (ppid 0). Each hop c -> p is read as: c's parent p, then p,
// then c again: if c still has parent p with the same start time, p had
// not exited when it was read (a process is re-parented when its parent
// exits, before the parent's pid can be reused), so what was read of p is
// p's. A chain that changes while it is read is walked again; one that
// keeps changing, or a process that is gone, is OriginUnknown.
//
// start, when not 0, is the start time pid must have: the process taken at
// accept, not another that got its pid since.
func ancestry(pid int, start uint64, root, self int, read procReader) (Origin, string) {
	for range maxRetries {
		o, why, again := walk(pid, start, root, self, read)
		if !again {
			return o, why
		}
	}
	return OriginUnknown, fmt.Sprintf("the parents of pid %d kept changing while they were read", pid)
}

func walk(pid int, start uint64, root, self int, read procReader) (o Origin, why string, again bool) {
	c := pid
	cpp, cst, err := read(c)
	if err != nil || (start != 0 && cst != start) {
		return OriginUnknown, fmt.Sprintf("pid %d is gone", pid), false
	}
	for hops := 0; hops < maxHops; hops++ {
		if c == self || (root > 0 && c == root) {
			by := "the agent"
			if c == self {
				by = "supervise (an orphan of the agent's tree)"
			}
			return OriginTree, fmt.Sprintf("pid %d descends from %s, pid %d", pid, by, c), false
		}
		if c == 1 || cpp == 0 {
			return OriginOutside, "", false
		}
		p := cpp
		ppp, pst, err := read(p)
		if err != nil {
			return OriginUnknown, "", true // p exited: c is being re-parented
		}
		if cpp2, cst2, err := read(c); err != nil || cpp2 != p || cst2 != cst {
			return OriginUnknown, "", true
		}
		c, cpp, cst = p, ppp, pst
	}
	return OriginUnknown, fmt.Sprintf("the chain of parents of pid %d is deeper than %d", pid, maxHops), false
}
