//go:build linux && !supervise_portable

package child

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// becomeReaper makes this process a child subreaper: descendants orphaned
// by the agent are re-parented here, where the reaper finds and kills them.
func becomeReaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// sysProcAttr puts the child in its own process group (unless it stays in
// the terminal's foreground) and has the kernel SIGKILL it when the
// spawner thread dies with the supervisor.
func sysProcAttr(spec Spec) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:   !spec.Foreground,
		Pdeathsig: syscall.SIGKILL,
	}
}

// reap collects every child that exited. For a registered leader it first
// kills the leader's process group, while the zombie still pins the group
// id, then reaps it. It returns the leaders that ended, and none = true when
// wait4 reported ECHILD: this process has no child left at all, alive or
// zombie. A dead leader's orphans are re-parented here before its exit is
// reported, so with none there is nothing left to sweep.
func (r *Reaper) reap() (ended []*Process, none bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, p := range r.procs {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err != nil || info.Signo == 0 {
			continue
		}
		innerSig := p.inner.killedBy() // before the sweep's own SIGKILL
		if p.pgid > 0 {
			_ = unix.Kill(-p.pgid, unix.SIGKILL)
		}
		var ws unix.WaitStatus
		if wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && wpid == pid {
			if p.trace != nil {
				p.trace(TraceReaped)
			}
			e := r.ended(p, ws)
			e.exit.InnerSignal = innerSig
			ended = append(ended, e)
		}
	}
	return r.reapAny(ended, "reaped orphaned descendant")
}

// sweep kills every unregistered child of the supervisor (descendants of a
// dead leader, re-parented here because the supervisor is a subreaper) and
// repeats until none is alive: killing one may orphan its own children,
// which are re-parented here only once it has died. It returns any
// registered leader it happened to reap on the way. none is reap's report
// that no child at all is left: then there is nothing to sweep.
func (r *Reaper) sweep(dead []*Process, none bool) []*Process {
	if none {
		return nil
	}
	deadline := time.Now().Add(sweepTimeout)
	groups := map[int]bool{}
	for _, p := range dead {
		if p.pgid > 0 {
			groups[p.pgid] = true
		}
	}
	var ended []*Process
	logged := map[int]bool{} // each pid said once, however many passes it takes to die
	for {
		alive := r.sweepOnce(groups, logged)
		reaped, none := r.reap()
		ended = append(ended, reaped...)
		if alive == 0 || none {
			return ended
		}
		if time.Now().After(deadline) {
			r.log.Warn("descendants survived SIGKILL", "count", alive)
			return ended
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// sweepOnce kills the live unregistered children once. Members of groups
// already killed as a whole are dying anyway; only escapees are logged.
func (r *Reaper) sweepOnce(groups map[int]bool, logged map[int]bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	alive := 0
	for _, pid := range ownChildren() {
		if _, ok := r.procs[pid]; ok {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.state == 'Z' || st.state == 'X' {
			continue
		}
		// Our unreaped child, and mu blocks reaping: the pid cannot be reused.
		_ = unix.Kill(pid, unix.SIGKILL)
		if !groups[st.pgrp] && !logged[pid] {
			logged[pid] = true
			r.log.Info("killed a descendant left behind by the agent", "pid", pid)
		}
		alive++
	}
	return alive
}
