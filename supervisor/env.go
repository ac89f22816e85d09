package supervisor

import (
	"os"
	"strconv"
)

// childEnv builds the child's environment: supervise's own, minus what
// belongs to supervise's own service manager, plus the contract variables.
func (s *Supervisor) childEnv(run uint64) []string {
	base := s.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	drop := []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=", "LISTEN_FDS=",
		"LISTEN_PID=", "LISTEN_FDNAMES=", "SUPERVISE_RUN=", "SUPERVISE_RESUME_FILE=",
		"SUPERVISE_TREE=", "SUPERVISE_STATE_DIR=", "SUPERVISE_USER="}
	env := make([]string, 0, len(base)+5)
	for _, kv := range base {
		if !hasAnyPrefix(kv, drop) {
			env = append(env, kv)
		}
	}
	env = append(env,
		"NOTIFY_SOCKET="+s.notify.Path(),
		"SUPERVISE_RUN="+strconv.FormatUint(run, 10),
		"SUPERVISE_STATE_DIR="+s.cfg.StateDir,
		s.tag(run),
	)
	if s.cfg.Watchdog > 0 {
		// No WATCHDOG_PID: the pid is unknown before the fork, and a wrong
		// one switches libsystemd's watchdog off in the agent.
		env = append(env, "WATCHDOG_USEC="+strconv.FormatInt(s.cfg.Watchdog.Microseconds(), 10))
	}
	return env
}
