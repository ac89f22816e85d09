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

// State is everything the loop remembers. The runner reads it (status,
// metrics, the commit batches) and never writes it: only Step does.
type State struct {
	// Sessions are the sessions held in memory: every open one, and
	// settled ones until evicted.
	Sessions map[string]*record.Session
	// Run is the current run, or the last one once it ended.
	Run record.Run
	// LastExit is the last run that ended, nil before the first.
	LastExit *record.Run
	// Child is the child's state as status names it.
	Child    string
	Restarts uint64
	// Ready and StatusText are what the agent sent (READY=1, STATUS=).
	Ready      bool
	StatusText string
	Backoff    crashloop.State
	Guard      crashloop.GuardState
	// Stop is a stop asked of supervise; Abort a kill supervise started
	// on its own (watchdog, memory guard, deadline).
	Stop  *Stop
	Abort *Abort
	// Grace is the SIGKILL deadline of a stop or an abort.
	Grace Grace
	// Watchdog is the hang detector's state.
	Watchdog WatchdogState
	// DeadlineDeferred counts deadline looks postponed for queued datagrams.
	DeadlineDeferred int
	// TurnDone: a turn completed during the current run.
	TurnDone bool
	// Verifying: the background journal check runs; VerifyFailed: it failed.
	Verifying    bool
	VerifyFailed bool
	// OutOfSequence counts markers that contradicted their session's turn.
	OutOfSequence uint64
	seqLog        rateLimit
	refusedLog    rateLimit
	// open holds the ids of the open sessions (State.Open), kept by Step
	// from the sessions its effects save: every change of a session is saved.
	open map[string]bool
	// folded holds the sessions whose delivery to the run about to start
	// was recorded in the death's commit (fold), with the run each had
	// been handed before; nil when none.
	folded map[string]uint64
	// hooked is the session the agent's own markers last named in this
	// run: traffic that names none is taken for it (Traffic.Invented).
	hooked string
	// Refused counts turn-begins refused at --max-open-sessions.
	Refused uint64
	// beatBorn counts the sessions a heartbeat brought into being in this
	// run (a heartbeat naming an id never seen): at most beatCap, so a
	// flood of fresh ids grows neither memory nor the journal; BeatsDropped
	// counts those past it, beatLog rate-limits saying so.
	beatBorn     int
	BeatsDropped uint64
	beatLog      rateLimit
	// RefusedParked counts markers and model traffic refused because
	// their session is parked; parkSaid holds the parked sessions whose
	// refusal was logged (once per session and park).
	RefusedParked uint64
	parkSaid      map[string]bool
	lastInterrupt time.Time
	Task          TaskState
	// Budget is the state dir's token spend, journaled with the policy
	// state (Save{Policy: true}).
	Budget Budget
	// budgetParked holds the sessions parked for a token budget, whose
	// model calls the proxy answers itself (Refusal), kept like open.
	budgetParked map[string]bool
	// RefusalsChanged counts the changes of what Refusal answers: the
	// runner republishes its snapshot for the proxy when it moves.
	RefusalsChanged uint64
	badUsageSaid    bool
	nextRun         uint64
	launching       uint64 // the run number of the launch under way
	launches        int    // launches by this supervise
	deadlineArmed   bool
	limitWaiting    bool // the backoff is a wait for a limit's reset
	hang            hangState
	deadlineDue     time.Time
	// now is the time of the event being stepped: what is due (a journaled
	// retry_at) is judged against it.
	now time.Time
}

// Stop is a stop asked of supervise.
type Stop struct {
	Signal  int // what asked for it; 0 for Shutdown
	At      time.Time
	Forced  bool // a second signal: kill at once, exit 128+N
	FromTTY bool // a terminal Ctrl-C the child received itself
}

// Abort is a kill supervise started on its own.
type Abort struct {
	Reason string
	At     time.Time
}

// Grace is the SIGKILL deadline of an ending that began at Start.
type Grace struct {
	Armed           bool
	Start, Deadline time.Time
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
	return &Machine{Config: cfg, Policy: policyFor(cfg), State: State{Sessions: map[string]*record.Session{}, Child: "starting",
		open: map[string]bool{}}}
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
	m.now = now
	switch e := ev.(type) {
	case Booted:
		m.booted(&o, e, now)
	case LaunchDue:
		m.launchDue(&o, e, now)
	case Delivered:
		m.delivered(&o, e)
	case Started:
		m.started(&o, e)
	case Exited:
		m.exited(&o, e, now)
	case Marker:
		if e.Msg.Session != "" && e.Msg.Event != marker.EventNone {
			m.hooked = e.Msg.Session // the agent names its own session
		}
		m.lifeSign(now)
		m.marker(&o, e, now)
	case Beats:
		m.beats(&o, e, now)
	case StopRequested:
		m.stopAsked(&o, e, now)
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
		m.lifeSign(now)
		m.traffic(&o, e, now)
	}
	m.trackOpen(o.fx)
	return o.fx
}

// trackOpen keeps the set of open sessions: every session a step changed
// is among the ones its effects save.
func (m *Machine) trackOpen(fx []Effect) {
	for _, e := range fx {
		if s, ok := e.(Save); ok {
			for _, id := range s.IDs {
				sess := m.Sessions[id]
				if sess != nil && sess.State.Open() {
					m.open[id] = true
				} else {
					delete(m.open, id)
				}
				if sess == nil || sess.State != record.Parked {
					delete(m.parkSaid, id) // a new park is said again
				}
				m.trackBudgetPark(id, sess)
			}
		}
	}
}

// sessionIDs returns the ids of the sessions held, sorted: Step visits
// sessions in this fixed order wherever the visit has effects, so the same
// state and event give the same effects in the same order (and a seed
// replays a bug).
func (m *Machine) sessionIDs() []string { return sortedKeys(m.Sessions) }

// sortedKeys returns the keys of a map, sorted.
func sortedKeys[V any](set map[string]V) []string {
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// OpenSessions is how many sessions are open.
func (m *Machine) OpenSessions() int { return len(m.open) }

// Running reports whether a child runs.
func (m *Machine) Running() bool { return m.Child == "running" || m.Child == "stopping" }

// NextRun is the number the next launch will have.
func (m *Machine) NextRun() uint64 { return m.nextRun }
