//go:build linux && !supervise_portable

package child

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Peer is the process that connected a unix socket, taken when the
// connection was accepted and held by a pidfd: the pid cannot come to name
// another process unnoticed. The SUPERVISE_TREE environment tag plays no
// part in where a peer stands: a process can clear its environment (env
// -i), the kernel's records it cannot.
type Peer struct {
	mu    sync.Mutex // Origin and Close: the pidfd is not closed while it is used
	pid   int
	start uint64 // start time of pid when it was taken, clock ticks since boot
	fd    int    // pidfd, -1 when none could be had, -2 once closed
	why   string // why the peer is unknown, "" when it was taken
}

// PeerOf takes the peer of the connected unix socket sockfd: its pidfd from
// SO_PEERPIDFD (Linux 6.5), else the pid from SO_PEERCRED and pidfd_open
// (Linux 5.3). Either names the process that called connect, which may
// have exited since (and handed the socket to a child it forked): such a
// peer is gone, and Origin says OriginUnknown. The caller closes the Peer.
func PeerOf(sockfd int) *Peer {
	p := &Peer{fd: -1}
	fd, err := unix.GetsockoptInt(sockfd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	switch {
	case err == nil:
		unix.CloseOnExec(fd)
		p.fd = fd
		var info unix.PidfdInfo
		info.Mask = unix.PIDFD_INFO_PID
		if err := unix.IoctlPidfdInfo(fd, &info); err == nil && info.Mask&unix.PIDFD_INFO_PID != 0 {
			p.pid = int(info.Pid)
		} else if pid, ok := pidfdPID(fd); ok {
			p.pid = pid
		} else {
			p.why = "the process that connected is gone"
			return p
		}
	case errors.Is(err, unix.ESRCH):
		p.why = "the process that connected is gone"
		return p
	default:
		cred, err := unix.GetsockoptUcred(sockfd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil || cred.Pid <= 0 {
			p.why = fmt.Sprintf("the peer's credentials cannot be read (%v)", err)
			return p
		}
		p.pid = int(cred.Pid)
		if fd, err := unix.PidfdOpen(p.pid, 0); err == nil {
			unix.CloseOnExec(fd)
			p.fd = fd
		} else if !errors.Is(err, unix.ENOSYS) {
			p.why = "the process that connected is gone"
			return p
		}
	}
	_, start, err := procStart(p.pid)
	if err != nil || !p.alive() {
		p.why = "the process that connected is gone"
		return p
	}
	p.start = start
	return p
}

// pidfdPID reads the pid a pidfd refers to from its fdinfo (kernels
// without PIDFD_GET_INFO): "Pid:\t-1" once the process was reaped.
func pidfdPID(fd int) (int, bool) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			return pid, err == nil && pid > 0
		}
	}
	return 0, false
}

// alive reports whether the peer still runs (a zombie counts as gone:
// procStart refuses it). Without a pidfd (a kernel before 5.3) its start
// time stands for it.
func (p *Peer) alive() bool {
	if p.fd == -2 {
		return false // closed
	}
	if p.fd >= 0 {
		if unix.PidfdSendSignal(p.fd, 0, nil, 0) != nil {
			return false
		}
	}
	_, start, err := procStart(p.pid)
	return err == nil && (p.start == 0 || start == p.start)
}

// PID returns the peer's pid, 0 when none was taken.
func (p *Peer) PID() int { return p.pid }

// Close releases the pidfd.
func (p *Peer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd >= 0 {
		unix.Close(p.fd)
	}
	p.fd = -2
}

// Origin says where the peer stands now relative to the tree of the agent
// root (0 while none runs) under this supervise, whose agents run in the
// cgroup subtree cgroupDir ("" for none): OriginTree if the peer is in
// that subtree or descends from root or from this process (which the
// tree's orphans are re-parented to), OriginOutside if its parents reach
// pid 1 without either, and OriginUnknown, with the reason, if the peer is
// gone or its ancestry cannot be read consistently. The peer must still be
// the process taken at accept when the walk is over.
func (p *Peer) Origin(root int, cgroupDir string) (Origin, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.why != "" {
		return OriginUnknown, p.why
	}
	if !p.alive() {
		return OriginUnknown, "the process that connected is gone"
	}
	if cgroupDir != "" {
		if dir, err := cgroupOf(p.pid); err == nil && within(dir, cgroupDir) {
			if !p.alive() {
				return OriginUnknown, "the process that connected is gone"
			}
			return OriginTree, fmt.Sprintf("pid %d is in the agent's cgroup %s", p.pid, dir)
		}
	}
	o, why := ancestry(p.pid, p.start, root, os.Getpid(), procStart)
	if !p.alive() {
		return OriginUnknown, "the process that connected is gone"
	}
	if o == OriginUnknown && why == "" {
		why = "its ancestry could not be read"
	}
	return o, why
}

// within reports whether dir is top or below it.
func within(dir, top string) bool {
	return dir == top || strings.HasPrefix(dir, strings.TrimSuffix(top, "/")+"/")
}

// cgroupOf returns the cgroup v2 directory of pid, as a path under the
// cgroup2 mount this process sees.
func cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", ErrGone
	}
	rel := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "0::"); ok {
			rel = v
		}
	}
	if rel == "" {
		return "", errors.New("no cgroup v2 hierarchy")
	}
	mnt, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	sub, err := filepath.Rel(root, rel)
	if err != nil || strings.HasPrefix(sub, "..") {
		return "", errors.New("outside the cgroup2 mount")
	}
	return filepath.Join(mnt, sub), nil
}

// AgentCgroupDir returns the cgroup directory OpenCgroups gives the agent
// called name with id (whether or not it exists), "" when supervise has no
// cgroup v2 directory of its own: the subtree in which every process is of
// the agent's tree, whatever its parents.
func AgentCgroupDir(name, id string) string {
	self, err := ownCgroupDir()
	if err != nil {
		return ""
	}
	return agentDir(self, name, id)
}
