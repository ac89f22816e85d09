//go:build darwin || (linux && supervise_portable)

package child

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The portable backend uses only what macOS has: fork and exec into a new
// process group, wait4 driven by SIGCHLD from the one reaper, and killpg.
// There is no child subreaper, so descendants that leave the process group
// are re-parented to init (launchd) and found instead by Spec.Tag in their
// environment; there is no parent-death signal, so an agent orphaned by a
// kill -9 of supervise runs on until the next supervise finds it (KillTagged,
// KillRecorded). Built on Linux with -tags supervise_portable, the same code
// runs under the integration suite.

// becomeReaper does nothing: the portable backend has no subreaper.
func becomeReaper() error { return nil }

// sysProcAttr puts the child in its own process group unless it stays in
// the terminal's foreground.
func sysProcAttr(spec Spec) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: !spec.Foreground}
}

// reap collects every child that exited. A registered leader that is a
// zombie has its process group killed first, while the unreaped zombie
// still pins the group id, and is reaped after. It returns the leaders that
// ended, and none = true when wait4 reported ECHILD.
func (r *Reaper) reap() (ended []*Process, none bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, p := range r.procs {
		// No waitid(WNOWAIT) on macOS: the process table's state is the
		// peek that leaves the zombie in place.
		if st, err := readStat(pid); err != nil || st.state != 'Z' {
			continue
		}
		if p.pgid > 0 {
			_ = unix.Kill(-p.pgid, unix.SIGKILL)
		}
		var ws unix.WaitStatus
		if wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && wpid == pid {
			ended = append(ended, r.ended(p, ws))
		}
	}
	// A registered child reaped here was reaped by the sweep below the
	// peek: its group was not killed while pinned. Members carrying the
	// tag are still swept.
	return r.reapAny(ended, "reaped a child")
}

// sweep kills what is left of the dead leaders' trees: every process still
// in their process groups and every process whose environment holds one of
// their tags (descendants that left the group, re-parented to init), until
// none is alive
// or sweepTimeout passes. It returns any registered leader it happened to
// reap on the way. A descendant that cleared its environment and left the
// process group is out of reach: the documented limit of this backend.
func (r *Reaper) sweep(dead []*Process, _ bool) []*Process {
	var tags []string
	groups := map[int]bool{}
	for _, p := range dead {
		if p.tag != "" {
			tags = append(tags, p.tag)
		}
		if p.pgid > 0 {
			groups[p.pgid] = true
		}
	}
	if len(tags) == 0 && len(groups) == 0 {
		return nil
	}
	var match func([]byte) bool
	if len(tags) > 0 {
		match = func(env []byte) bool {
			for _, t := range tags {
				if hasEnvEntry(env, t) {
					return true
				}
			}
			return false
		}
	}
	deadline := time.Now().Add(sweepTimeout)
	var ended []*Process
	logged := map[int]bool{} // each pid said once, however many passes it takes to die
	for {
		killed := killMatching(groups, match)
		for _, k := range killed {
			if !groups[k.pgrp] && !logged[k.pid] {
				logged[k.pid] = true
				r.log.Info("killed a descendant left behind by the agent", "pid", k.pid)
			}
		}
		reaped, _ := r.reap()
		ended = append(ended, reaped...)
		if len(killed) == 0 {
			return ended
		}
		if time.Now().After(deadline) {
			r.log.Warn("descendants survived SIGKILL", "count", len(killed))
			return ended
		}
		time.Sleep(5 * time.Millisecond)
	}
}
