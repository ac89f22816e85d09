// Package crashloop is the process-level restart policy of supervise: when to
// relaunch a child that died, how long to back off, when to give up, and when a
// chain of dirty deaths should hold automatic resumes (the crash-loop guard).
//
// Everything here is pure: no goroutines, no I/O, no clock. Callers pass the
// current time and a random number in, and persist the returned state
// themselves (the guard state must survive kill -9 of the supervisor, so the
// caller journals it before acting on a decision).
package crashloop

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Restart is the --restart mode: which deaths are followed by a relaunch.
type Restart int

const (
	// OnFailure relaunches after a dirty death and ends with a clean exit.
	OnFailure Restart = iota
	// Always relaunches after every exit, clean or not.
	Always
	// Never relaunches; supervise ends when the child ends.
	Never
)

// ErrBadRestart is returned by ParseRestart for an unknown mode.
var ErrBadRestart = errors.New("restart mode must be on-failure, always or never")

// ParseRestart parses a --restart value.
func ParseRestart(s string) (Restart, error) {
	switch s {
	case "on-failure":
		return OnFailure, nil
	case "always":
		return Always, nil
	case "never":
		return Never, nil
	}
	return OnFailure, fmt.Errorf("%q: %w", s, ErrBadRestart)
}

// Run is what the policy needs to know about one ended child run.
type Run struct {
	Started, Ended time.Time
	// Dirty is true for a death that needs attention: non-zero exit, a
	// signal, a watchdog or memory kill, or exit 0 with a turn still open.
	Dirty bool
	// ExecFailed is true when the agent binary could not be started at all
	// (exit code 126/127). Such a run is never healthy, however long the
	// attempt took, so a missing binary cannot hot-loop.
	ExecFailed bool
	// Proven is true when the run completed a turn: it proved the agent
	// works, so it is healthy whatever its uptime.
	Proven bool
}

// Uptime is how long the run lived.
func (r Run) Uptime() time.Duration { return r.Ended.Sub(r.Started) }

// Policy decides what follows a child's death. The zero value is not useful;
// start from DefaultPolicy.
type Policy struct {
	Restart Restart
	// Healthy is the uptime from which a run counts as healthy (as does a
	// run that completed a turn): the restart after it is immediate and the
	// backoff starts over. runit, s6 and supervisord use one second, which
	// suits daemons that fail at start; an agent that fails its first API
	// call dies after a second or two, so the default is ten.
	Healthy time.Duration
	// Initial is the first backoff after a quick death; it doubles with each
	// further quick death up to Max.
	Initial, Max time.Duration
	// Jitter spreads each delay uniformly over ±Jitter/2 of its value, so a
	// fleet of supervisors does not relaunch in lockstep. 0 disables it.
	Jitter float64
	// GiveUp ends supervision after this many consecutive quick deaths, so an
	// outer service manager can take over. 0 means never give up.
	GiveUp int
}

// DefaultPolicy returns the documented defaults: on-failure, healthy after
// 10s (or a completed turn), backoff 250ms doubling to 30s with 20% jitter,
// never give up.
func DefaultPolicy() Policy {
	return Policy{
		Restart: OnFailure,
		Healthy: 10 * time.Second,
		Initial: 250 * time.Millisecond,
		Max:     30 * time.Second,
		Jitter:  0.2,
	}
}

// State is the policy's memory between deaths.
type State struct {
	// Failures counts consecutive quick deaths (runs shorter than Healthy
	// that completed no turn).
	Failures int `json:"failures"`
}

// Action is what the supervisor does next.
type Action int

const (
	// Relaunch starts the child again after Decision.Delay.
	Relaunch Action = iota
	// Exit ends supervision normally: the restart mode says this death is
	// final (a clean exit under on-failure, anything under never).
	Exit
	// GiveUp ends supervision because the give-up limit was reached.
	GiveUp
)

// String names the action for logs.
func (a Action) String() string {
	switch a {
	case Exit:
		return "exit"
	case GiveUp:
		return "give-up"
	}
	return "relaunch"
}

// Decision is the policy's answer for one death.
type Decision struct {
	Action Action
	// Delay is the backoff before a relaunch; 0 means at once.
	Delay time.Duration
	// Failures is the consecutive quick-death count after this death.
	Failures int
}

// Next decides what follows run, given the state after the previous death.
// rnd is a uniform random number in [0, 1) used for jitter. It returns the
// decision and the state to keep for the next death.
func (p Policy) Next(s State, run Run, rnd float64) (Decision, State) {
	quick := run.ExecFailed || (!run.Proven && run.Uptime() < p.Healthy)
	if quick {
		s.Failures++
	} else {
		s.Failures = 0
	}
	d := Decision{Failures: s.Failures}
	switch {
	case p.Restart == Never, p.Restart == OnFailure && !run.Dirty:
		d.Action = Exit
		return d, s
	case p.GiveUp > 0 && s.Failures >= p.GiveUp:
		d.Action = GiveUp
		return d, s
	}
	d.Action = Relaunch
	if quick {
		d.Delay = p.backoff(s.Failures, rnd)
	}
	return d, s
}

// backoff is Initial·2^(n-1), capped at Max, with jitter applied.
func (p Policy) backoff(n int, rnd float64) time.Duration {
	if n < 1 || p.Initial <= 0 {
		return 0
	}
	d := float64(p.Initial) * math.Pow(2, float64(n-1))
	if p.Max > 0 && d > float64(p.Max) {
		d = float64(p.Max)
	}
	if p.Jitter > 0 {
		d *= 1 - p.Jitter/2 + p.Jitter*rnd
	}
	return time.Duration(d)
}

// Reset forgets earlier quick deaths, as after a completed turn: the next
// quick death starts the backoff at Initial again.
func (s State) Reset() State { return State{} }
