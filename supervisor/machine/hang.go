package machine

import (
	"time"

	"github.com/supervise-dev/supervise/record"
)

// The hang deadlines, for CLIs that send no WATCHDOG=1:
//
//   - --start-timeout: no marker and no model request since the launch
//     (claude-code #75613: `claude -p` hung four hours at start);
//   - --silence-timeout: a turn open (in_turn: not waiting for a person nor
//     a limit) with no marker, no model traffic and no output for the
//     duration. A CLI whose last words say it waits out a limit itself
//     (Codex sleeps a retry-after silently: agentsaid.Retrying) is waiting,
//     not hung, until the time it names.
//
// Both stop the agent (stop signal, grace, SIGKILL) with their own reason,
// decided as hangs: a death mid-turn resumed once and parked at the
// breaker. A task that hung at start with no session of its own is
// started again once (nothing ran, so nothing is repeated). Looked at once
// a second (TimerFlush), with the time the runner's clock gives.

// hangState is what the hang deadlines remember of the current run.
type hangState struct {
	// alive is when the run last showed life: its launch, a marker, model
	// traffic, output (Written grew), or a wait the CLI announced.
	alive time.Time
	// spoke: a marker or model request came since the launch.
	spoke   bool
	written int64
	// startRetried: this invocation started the task again once after it
	// hung at start.
	startRetried bool
}

// lifeSign records a marker or model traffic from the agent.
func (m *Machine) lifeSign(now time.Time) {
	if m.Running() {
		m.hang.spoke = true
		m.hang.alive = now
	}
}

// watchHangs applies the start and silence deadlines at a flush.
func (m *Machine) watchHangs(o *out, e TimerFired, now time.Time) {
	if !m.Running() || m.Child != "running" || m.Stop != nil || m.Abort != nil {
		return
	}
	if e.Written != m.hang.written {
		m.hang.written, m.hang.alive = e.Written, now
	}
	if e.RetryingUntil.After(now.Add(MaxWordsWait)) {
		e.RetryingUntil = time.Time{} // words naming a longer wait are not believed
	}
	if e.RetryingUntil.After(m.hang.alive) {
		// The CLI waits out a limit itself until then: not a hang; the
		// silence counts from the end of that wait.
		m.hang.alive = e.RetryingUntil
	}
	if e.RetryingUntil.After(now) {
		return
	}
	if d := m.Config.StartTimeout; d > 0 && !m.hang.spoke && now.Sub(m.Run.Started) >= d {
		m.abort(o, record.ReasonStartTimeout, "the agent sent no marker and made no model request within --start-timeout: stopping it as hung",
			m.Config.StopSignal, now, "start_timeout", d)
		return
	}
	if d := m.Config.SilenceTimeout; d > 0 && now.Sub(m.hang.alive) >= d {
		if id := m.silentTurn(); id != "" {
			m.abort(o, record.ReasonSilence, "an open turn was silent for --silence-timeout: stopping the agent as hung",
				m.Config.StopSignal, now, "session", id, "silence_timeout", d, "silent", now.Sub(m.hang.alive).Round(time.Second))
		}
	}
}

// silentTurn names a session mid-turn (in_turn: not waiting for a person
// or a limit), "" when none is.
func (m *Machine) silentTurn() string {
	for _, id := range sortedKeys(m.open) {
		if sess := m.Sessions[id]; sess != nil && sess.State == record.InTurn {
			return id
		}
	}
	return ""
}

// startHangRerun: a task whose own launch hung at start, with no session
// seen, is started again once: nothing ran.
func (m *Machine) startHangRerun(o *out, r record.Run) bool {
	if r.Reason != record.ReasonStartTimeout || !m.Policy.Task || m.hang.startRetried || len(m.pending()) > 0 {
		return false
	}
	m.hang.startRetried = true
	o.warn("task mode: the agent hung at start before any marker or model request; starting it again once")
	return true
}
