package supervisor

import (
	"github.com/supervise-dev/supervise/child"
)

// cgroupState is the agent's cgroup subtree (nil: none) and the current
// run's cgroup.
type cgroupState struct {
	all  *child.Cgroups
	run  *child.RunCgroup
	ooms uint64 // oom_kill count of the run that just ended
	// ended is the last run's cgroup, removed once the loop waits again
	// (after the next fork, on a relaunch), and next the cgroup of run
	// nextRun, made ahead at such a wait: a restart's path has neither
	// the rmdir nor the mkdir of a cgroup on it (about 0.15 ms).
	ended   *child.RunCgroup
	next    *child.RunCgroup
	nextRun uint64 // the run next was made for, or tried for (once)
}

// openCgroups gives the agent a cgroup of its own where supervise can (cgroup
// v2, root or delegated), and says once what it could not do.
func (s *Supervisor) openCgroups() {
	if s.cfg.NoCgroups {
		s.log.Info("cgroups off (--cgroup off): the agent's tree is killed by process group and descendants; an OOM kill is not named")
		return
	}
	cg, why := child.OpenCgroups(s.cfg.Name, s.id.treeID)
	s.cg.all = cg
	switch {
	case cg == nil:
		s.log.Info("the agent runs without a cgroup of its own: its tree is killed by process group and descendants, and an OOM kill is not named",
			"why", why)
	case why != "":
		s.log.Info("each run gets its own cgroup, killed whole with cgroup.kill; an OOM kill cannot be named", "cgroup", cg.Dir(), "why", why)
	default:
		s.log.Info("each run gets its own cgroup, killed whole with cgroup.kill; OOM kills are named", "cgroup", cg.Dir())
	}
}

// runCgroup creates the cgroup of run n, nil when there is none.
func (s *Supervisor) runCgroup(n uint64) *child.RunCgroup {
	s.cg.ooms = 0
	if s.cg.all == nil {
		return nil
	}
	if rc := s.cg.next; rc != nil {
		s.cg.next = nil
		if s.cg.nextRun == n {
			s.cg.run = rc
			return rc
		}
		rc.Close() // made for another number
	}
	s.cg.nextRun = 0
	rc, err := s.cg.all.Run(n)
	if err != nil {
		s.log.Warn("cannot create the run's cgroup: this run goes without", "run", n, "err", err)
		return nil
	}
	s.cg.run = rc
	return rc
}

// cgroupFailed drops cgroups for good after a launch into one failed (and
// one without worked).
func (s *Supervisor) cgroupFailed(err error) {
	s.log.Warn("launching into a cgroup failed, launching without worked: cgroups off from now on", "err", err)
	s.removeRunCgroups()
	s.cg.all.Close()
	s.cg.all = nil
}

// endRunCgroup reads the ended run's OOM kills and leaves its cgroup to
// betweenRuns, which kills what is left in it and removes it. (The
// reaper's sweep has killed the dead run's descendants already: what a
// cgroup adds is the catch of anything that got past it.)
func (s *Supervisor) endRunCgroup() {
	if s.cg.run == nil {
		return
	}
	s.cg.ooms, _ = s.cg.run.OOMKills()
	s.removeEnded()
	s.cg.ended, s.cg.run = s.cg.run, nil
}

// removeEnded kills what is left in the last run's cgroup and removes it.
func (s *Supervisor) removeEnded() {
	if s.cg.ended != nil {
		s.cg.ended.Close()
		s.cg.ended = nil
	}
}

// betweenRuns does the cgroup work kept off a restart's path, when the
// loop is about to wait: the ended run's cgroup is removed, and while a
// run is up the next one's is made.
func (s *Supervisor) betweenRuns() {
	s.removeEnded()
	n := s.m.NextRun()
	if s.cg.all == nil || s.cg.nextRun == n || s.run.proc == nil || s.m.Stop != nil {
		return
	}
	s.cg.nextRun = n // tried once per run: a failure is not retried at every event
	if rc, err := s.cg.all.Run(n); err == nil {
		s.cg.next = rc
	} // else the launch tries again, and says why
}

// removeRunCgroups removes every run cgroup: the current run's (its OOM
// kills read first), the ended one and the one made ahead.
func (s *Supervisor) removeRunCgroups() {
	s.endRunCgroup()
	s.removeEnded()
	if s.cg.next != nil {
		s.cg.next.Close()
		s.cg.next = nil
	}
}

// closeCgroups removes the agent's cgroup at the end (best effort).
func (s *Supervisor) closeCgroups() {
	s.removeRunCgroups()
	if s.cg.all != nil {
		s.cg.all.Close()
	}
}
