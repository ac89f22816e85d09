//go:build linux && !supervise_portable

package child

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ownChildren lists the children of this process: the ones it started and
// the orphans re-parented to it as a subreaper. It reads the per-thread
// children lists (cheap) and falls back to a scan of /proc.
func ownChildren() []int {
	self := os.Getpid()
	tasks, err := os.ReadDir("/proc/self/task")
	if err == nil {
		var out []int
		ok := true
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
			if err != nil {
				if errors.Is(err, os.ErrNotExist) && t.Name() == strconv.Itoa(self) {
					ok = false // kernel without CONFIG_PROC_CHILDREN
					break
				}
				continue // thread exited meanwhile
			}
			for _, f := range bytes.Fields(b) {
				if pid, err := strconv.Atoi(string(f)); err == nil {
					out = append(out, pid)
				}
			}
		}
		if ok {
			return out
		}
	}
	var out []int
	for pid, st := range scanProc() {
		if st.ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// KillTagged sends SIGKILL to every process (other than this one) whose
// environment contains an entry starting with tag, for example
// "SUPERVISE_TREE=3f2a9c.": the way a supervisor finds what is left of a
// previous instance's trees after its own kill -9, including descendants that
// left the process group or were re-parented to init. Each match is pinned
// with a pidfd before it is signalled, so a pid reused between the scan and
// the kill is never hit. It returns the pids it killed.
//
// This process and its ancestors are never killed, even when tagged: a
// shell left from an old tree may be the one starting the new supervisor.
func KillTagged(tag string) []int {
	needle := []byte(tag)
	spare := spared()
	ents, _ := os.ReadDir("/proc")
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || spare[pid] {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		// Read the environment after the pidfd pins the process: if the pid
		// was reused before the open, we read the new owner's environment.
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && hasEnvPrefix(env, needle) {
			if unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
				killed = append(killed, pid)
			}
		}
		unix.Close(fd)
	}
	return killed
}

// KillRecorded kills the process recorded as (pid, start) and its process
// group and descendants, if it is still alive and still the same process. It
// is for a child of a previous supervisor instance: not our child, so we
// cannot reap it, but we wait up to timeout for it to disappear. It reports
// whether it found the process alive.
func KillRecorded(ctx context.Context, pid int, start int64, timeout time.Duration) (bool, error) {
	if pid <= 0 {
		return false, nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false, nil // no such process
	}
	defer unix.Close(fd)
	// Verify identity after pinning: a pidfd cannot follow a reused pid.
	if !Alive(ctx, pid, start) {
		return false, nil
	}
	victims := descendants(pid)
	if st, err := readStat(pid); err == nil && st.pgrp == pid {
		// The live leader pins its group id, so this cannot hit a stranger.
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return true, err
	}
	for _, d := range victims {
		killPinned(ctx, d)
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return true, errors.New("recorded process did not die after SIGKILL")
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return true, err
		}
		if n > 0 {
			return true, nil
		}
	}
}

// killPinned sends SIGKILL to pid through a pidfd, checking that the process
// still has the start time it had when the pidfd was opened.
func killPinned(ctx context.Context, pid int) {
	start, err := StartTime(ctx, pid)
	if err != nil {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if t, err := StartTime(ctx, pid); err == nil && t == start {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
}
