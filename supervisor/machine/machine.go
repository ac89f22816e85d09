// Package machine is the run loop of supervise as a pure transition
// function: Machine.Step takes one event (the child started or exited, a
// marker arrived, a timer fired, a stop or a control request) and the time,
// changes the loop state, and returns the effects the runner must perform,
// in order: commit, launch, signal, arm a timer, reply, log, publish, end.
//
// Step does no I/O, reads no clock, starts no goroutine and logs nothing
// itself (the shape of etcd-io/raft's Step and Ready). The runner
// (package supervisor) owns the journal, the child, the sockets and the
// timers; it feeds events in and performs what comes out. Commit before
// launch is an ordering of effects: every effect list that holds a Launch
// holds the Commit it depends on before it.
package machine

import (
	"sort"
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// Config is what Step needs to know of the run flags. It never changes
// while the machine runs.
type Config struct {
	Policy crashloop.Policy
	Guard  crashloop.Guard
	Resume resume.Policy
	// ResumeOff computes and shows decisions but dispatches no automatic
	// resume (--resume off).
	ResumeOff bool
	// StopSignal asks the child to stop; StopTimeout is the grace period.
	StopSignal  int
	StopTimeout time.Duration
	// Watchdog is the period within which the agent must ping; 0: off.
	Watchdog  time.Duration
	Deadlines Deadlines
	// Foreground: the child shares supervise's process group, so a
	// terminal's Ctrl-C reaches it directly.
	Foreground bool
	// LiveResume: resumes that become dispatchable while the child runs
	// are delivered to it (--resume-signal).
	LiveResume bool
	// Argv is the agent command line; Task, when Task.On, makes it a task
	// (resolved into Machine.Policy).
	Argv []string
	Task TaskConfig
	// StateDir names the state dir in the commands a person is told.
	StateDir string
	// Fingerprint: the agent's fingerprint is recorded on breaker parks,
	// and a changed agent lifts them once.
	Fingerprint bool
	// StopSignalName names StopSignal in the log.
	StopSignalName string
	// MaxOpenSessions caps the open sessions (mid-turn, waiting, owed a
	// resume, parked, stopped): a turn-begin that would open one more is
	// refused (--max-open-sessions). 0: DefaultMaxOpenSessions.
	MaxOpenSessions int
	// MaxTokens is a session's token budget (input plus output, across
	// its resumes, as the API proxy counts them): past it the agent is
	// stopped and the session parked. 0: no budget (--max-tokens).
	MaxTokens int64
	// MaxTokensTotal is the state dir's token budget: input plus output of
	// every session, across runs and restarts of supervise (State.Budget,
	// journaled). Past it no model call is forwarded and the session whose
	// answer crossed it is parked. 0: none (--max-tokens-total).
	MaxTokensTotal int64
	// Limit is how usage and rate limits are waited out (limit.go).
	Limit LimitConfig
	// StartTimeout and SilenceTimeout are the hang deadlines (hang.go);
	// 0: off.
	StartTimeout, SilenceTimeout time.Duration
}

// DefaultMaxOpenSessions is --max-open-sessions' default.
const DefaultMaxOpenSessions = 1000

// Exit codes Step ends with (the values of internal/exitcode).
const (
	ExitOK     = exitcode.OK
	ExitGaveUp = exitcode.GaveUp
	ExitParked = exitcode.Parked
)

// State is everything the loop remembers, as parts that own their fields:
// the session book, the child's lifecycle, the ending of a run, the hang
// watch, the budgets, and the task's memory. The runner reads it (status,
// metrics, the commit batches) and never writes it: only Step does.
type State struct {
	Book    // the sessions (book.go)
	Proc    // the child's lifecycle (phase.go)
	Ending  // a stop or an abort under way (stop.go)
	Watch   // the watchdog, the turn deadlines, the hang deadlines (guards.go)
	Budgets // the token budgets (budget.go)
	Task    TaskState
	Backoff crashloop.State
	Guard   crashloop.GuardState
	// Verifying: the background journal check runs; VerifyFailed: it failed.
	Verifying    bool
	VerifyFailed bool
	Delivery     // which run each resume is handed to (delivery.go)
}

// Machine is the loop state with its configuration.
type Machine struct {
	Config Config
	// Policy is Config's task mode resolved (policyFor): what every rule
	// that differs between a service and a task asks.
	Policy Policy
	State
}

// New returns a machine in its boot state.
func New(cfg Config) *Machine {
	if cfg.StopSignal == 0 {
		cfg.StopSignal = sigTERM
	}
	if cfg.MaxOpenSessions <= 0 {
		cfg.MaxOpenSessions = DefaultMaxOpenSessions
	}
	policy := policyFor(cfg)
	return &Machine{Config: cfg, Policy: policy, State: State{Book: Book{Sessions: map[string]*record.Session{},
		open: map[string]bool{}}, Task: TaskState{remember: policy.Remember},
		Budgets: Budgets{maxTotal: cfg.MaxTokensTotal, stateDir: cfg.StateDir}}}
}

// Signal numbers Step needs, as Linux and macOS number them.
const (
	sigINT  = 2
	sigKILL = 9
	sigABRT = 6
	sigTERM = 15
)

// Step applies ev, which happened at now, and returns what the runner
// must do, in order.
func (m *Machine) Step(ev Event, now time.Time) []Effect {
	var o out
	m.Book.now = now
	switch e := ev.(type) {
	case Booted:
		m.booted(&o, e, now)
	case LaunchDue:
		m.launchDue(&o, e, now)
	case Delivered:
		m.delivered(&o, e, m.Sessions, &m.Task)
	case Started:
		m.started(&o, e)
	case Exited:
		m.exited(&o, e, now)
	case Marker:
		if e.Msg.Session != "" && e.Msg.Event != marker.EventNone {
			m.hooked = e.Msg.Session // the agent names its own session
		}
		m.lifeSign(now, m.Running())
		m.marker(&o, e, now)
	case Beats:
		m.beats(&o, e, now)
	case StopRequested:
		m.stopAsked(&o, e, now)
	case RestartRequested:
		m.restartAsked(&o, now)
	case TimerFired:
		m.timerFired(&o, e, now)
	case Fingerprinted:
		m.fingerprinted(&o, e)
	case Verified:
		m.verified(&o, e)
	case ManualResume:
		m.manualResume(&o, e, now)
	case Evict:
		m.evict(e)
	case Traffic:
		m.lifeSign(now, m.Running())
		m.traffic(&o, e, now)
	}
	return append(o.fx, m.trackOpen(o.fx)...)
}

// trackOpen keeps the set of open sessions, and tells (Notice) what a
// person may want to hear of: every session a step changed is among the
// ones its effects save.
func (m *Machine) trackOpen(fx []Effect) []Effect {
	var notices []Effect
	for _, e := range fx {
		if s, ok := e.(Save); ok {
			for _, id := range s.IDs {
				sess := m.Sessions[id]
				m.Book.track(id, sess)
				m.Budgets.track(id, sess)
				for _, n := range m.announce(id, sess, m.Config.StateDir) {
					notices = append(notices, n)
				}
			}
		}
	}
	return notices
}

// pending returns the sessions owed a resume that may be dispatched now
// (Book.dispatchable), at most --max-open-sessions of them.
func (m *Machine) pending() []*record.Session {
	return m.dispatchable(m.Hold() != "", m.Config.MaxOpenSessions)
}

// limitWaiters returns the sessions waiting out a limit, soonest first
// (Book.waiters).
func (m *Machine) limitWaiters() []*record.Session { return m.waiters(m.Hold() != "") }

// heldSessions lists the sessions whose resume is held back.
func (m *Machine) heldSessions() []string {
	if m.Hold() == "" {
		return nil
	}
	return m.heldBack()
}

// sortedKeys returns the keys of a map, sorted.
func sortedKeys[V any](set map[string]V) []string {
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
