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
	s.endRunCgroup()
	s.cg.all.Close()
	s.cg.all = nil
}

// endRunCgroup reads the ended run's OOM kills, kills what is left in its
// cgroup and removes it.
func (s *Supervisor) endRunCgroup() {
	if s.cg.run == nil {
		return
	}
	s.cg.ooms, _ = s.cg.run.OOMKills()
	s.cg.run.Close()
	s.cg.run = nil
}

// closeCgroups removes the agent's cgroup at the end (best effort).
func (s *Supervisor) closeCgroups() {
	s.endRunCgroup()
	if s.cg.all != nil {
		s.cg.all.Close()
	}
}
