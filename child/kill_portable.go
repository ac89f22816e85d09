//go:build darwin || (linux && supervise_portable)

package child

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// Without pidfds, a process is identified by pid plus start time checked
// just before the signal: a pid that dies and is reused in the instant
// between the check and kill(2) could still be hit. Both Linux and macOS
// hand out pids in increasing order before wrapping, which makes that
// window practically unreachable, but it is not closed as a pidfd closes it.

// killedProc is one process killMatching signalled.
type killedProc struct{ pid, pgrp int }

// killMatching sends SIGKILL to every live process, other than this one
// and its ancestors, that is in one of groups or whose environment match
// accepts, checking its start time before and after the environment is
// read. A group id is not reused while the group has a member, so a process
// still in a dead leader's group is one of its tree. It returns what it
// signalled.
func killMatching(groups map[int]bool, match func(env []byte) bool) []killedProc {
	spare := spared()
	var killed []killedProc
	for pid, st := range scanProc() {
		if pid <= 1 || spare[pid] || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if groups[st.pgrp] {
			if unix.Kill(pid, unix.SIGKILL) == nil {
				killed = append(killed, killedProc{pid: pid, pgrp: st.pgrp})
			}
			continue
		}
		if match == nil {
			continue
		}
		_, start, err := procStart(pid)
		if err != nil {
			continue
		}
		env, err := environ(pid)
		if err != nil || !match(env) {
			continue
		}
		if _, again, err := procStart(pid); err != nil || again != start {
			continue // reused while we read: the environment was a stranger's
		}
		if unix.Kill(pid, unix.SIGKILL) == nil {
			killed = append(killed, killedProc{pid: pid, pgrp: st.pgrp})
		}
	}
	return killed
}

// KillTagged sends SIGKILL to every process (other than this one and its
// ancestors) whose environment contains an entry starting with tag, for
// example "SUPERVISE_TREE=3f2a9c.": the way a supervisor finds what is left
// of a previous instance's trees after its own kill -9, including
// descendants that left the process group or were re-parented to init. The
// start time is checked around the read of the environment (no pidfd on
// this backend). It returns the pids it killed.
func KillTagged(tag string) []int {
	needle := []byte(tag)
	var pids []int
	for _, k := range killMatching(nil, func(env []byte) bool { return hasEnvPrefix(env, needle) }) {
		pids = append(pids, k.pid)
	}
	return pids
}

// KillRecorded kills the process recorded as (pid, start) and its process
// group and descendants, if it is still alive and still the same process. It
// is for a child of a previous supervisor instance: not our child, so we
// cannot reap it, but we wait up to timeout for it to disappear. It reports
// whether it found the process alive.
func KillRecorded(ctx context.Context, pid int, start int64, timeout time.Duration) (bool, error) {
	if pid <= 0 || !Alive(ctx, pid, start) {
		return false, nil
	}
	victims := descendants(pid)
	if st, err := readStat(pid); err == nil && st.pgrp == pid {
		// The live leader pins its group id, so this cannot hit a stranger.
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
		return true, err
	}
	for _, d := range victims {
		killPinned(ctx, d)
	}
	deadline := time.Now().Add(timeout)
	for Alive(ctx, pid, start) {
		if time.Now().After(deadline) {
			return true, errors.New("recorded process did not die after SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true, nil
}

// killPinned sends SIGKILL to pid if it is alive and not a zombie. Without
// a pidfd the pin is only the liveness check just before the signal.
func killPinned(_ context.Context, pid int) {
	if _, _, err := procStart(pid); err == nil {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}
