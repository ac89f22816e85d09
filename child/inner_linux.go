//go:build linux && !supervise_portable

package child

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A wrapper CLI (Gemini CLI re-spawns itself: an outer node waits for an
// inner one) turns a signal death of its inner process into an exit status
// of its own: a kill -9 of the inner becomes exit 1, with no words. The
// wrapper reaps the inner itself, so neither wait4 nor the subreaper sees
// that death. A pidfd held on the inner while it lives does: once the inner
// is reaped, PIDFD_GET_INFO with PIDFD_INFO_EXIT (Linux 6.15) gives its wait
// status. So the runner asks WatchInner, about once a second, to hold
// pidfds on the leader's direct children, and when the leader exits by
// itself (before the group is killed) a direct child found dead by a signal
// is the death's cause: Exit.InnerSignal. Where the kernel lacks the ioctl
// nothing is known and nothing is claimed.

// innerMax bounds the pidfds held on one leader's children: a tree's tools
// are grandchildren, and a wrapper has one inner process.
const innerMax = 8

// pidfdInfo is struct pidfd_info of linux/pidfd.h, version 0 (64 bytes).
type pidfdInfo struct {
	Mask, CgroupID                                                    uint64
	PID, TGID, PPID, RUID, RGID, EUID, EGID, SUID, SGID, FSUID, FSGID uint32
	ExitCode                                                          int32
	CoredumpMask, spare                                               uint32
}

const (
	pidfdInfoExit = 1 << 3
	pidfdGetInfo  = 0xC040FF0B // _IOWR(0xFF, 11, struct pidfd_info)
)

// inner is the pidfds held on a leader's direct children, by pid. Guarded
// by the Reaper's mutex.
type inner map[int]int

// WatchInner holds a pidfd on each direct child of the leader not yet held
// (at most innerMax), so that a signal death of one is known when the
// leader exits (Exit.InnerSignal). It reads /proc and opens pidfds outside
// the reaper's lock; cheap enough for the runner's once-a-second tick.
func (p *Process) WatchInner() {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/task/" + strconv.Itoa(p.pid) + "/children")
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			continue
		}
		p.r.mu.Lock()
		_, held := p.inner[pid]
		full := len(p.inner) >= innerMax || p.reaped
		p.r.mu.Unlock()
		if held || full {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		// The pid may have been reused between the read and the open: only
		// a process whose parent is still the leader is its child.
		if ppidOf(pid) != p.pid {
			unix.Close(fd)
			continue
		}
		p.r.mu.Lock()
		if p.inner == nil {
			p.inner = inner{}
		}
		if _, held := p.inner[pid]; held || p.reaped {
			unix.Close(fd)
		} else {
			p.inner[pid] = fd
		}
		p.r.mu.Unlock()
	}
}

// ppidOf is pid's parent as /proc says, 0 when unknown.
func ppidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// killedBy returns the signal that killed a held child already dead and
// reaped, 0 if none; and closes every pidfd. Called with the reaper's lock
// held, once, as the leader is found exited and before its group is
// killed, so the sweep's own SIGKILL is never taken for the cause.
func (in inner) killedBy() syscall.Signal {
	var sig syscall.Signal
	for pid, fd := range in {
		var info pidfdInfo
		info.Mask = pidfdInfoExit
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), pidfdGetInfo, uintptr(unsafe.Pointer(&info)))
		if errno == 0 && info.Mask&pidfdInfoExit != 0 && sig == 0 {
			if ws := unix.WaitStatus(info.ExitCode); ws.Signaled() {
				sig = ws.Signal()
			}
		}
		unix.Close(fd)
		delete(in, pid)
	}
	return sig
}

// InnerDeathsSeen reports whether this kernel lets WatchInner see a
// wrapper's inner death: PIDFD_GET_INFO (Linux 6.15).
//
// No binary calls it: integration's real-CLI tests ask it whether this
// kernel can show an inner death, and skip where it cannot.
func InnerDeathsSeen() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var info pidfdInfo
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), pidfdGetInfo, uintptr(unsafe.Pointer(&info)))
	return errno == 0
}
