package machine

import (
	"time"

	"github.com/supervise-dev/supervise/record"
)

// The child's lifecycle is one Phase, moved by one table, as
// s6-supervise's actions[state][event]: a (phase, event) pair the table
// does not name leaves the phase as it is. No phase hides in a boolean:
// waiting for a limit's reset is a phase of its own, which a person's
// resume cuts short.

// Phase is where the child's lifecycle stands.
type Phase uint8

const (
	PhaseStarting  Phase = iota // booted, or a launch prepared: no child yet
	PhaseRunning                // the child runs
	PhaseStopping               // the child runs, asked to stop
	PhaseExited                 // the child ended; what follows is decided
	PhaseBackoff                // waiting to relaunch
	PhaseLimitWait              // waiting for a limit's reset to relaunch
	numPhases
)

// phaseNames are the phases as status names them (child.state): a limit's
// wait is a backoff there.
var phaseNames = [numPhases]string{"starting", "running", "stopping", "exited", "backoff", "backoff"}

func (p Phase) String() string { return phaseNames[p] }

// phaseEvent is what moves the lifecycle.
type phaseEvent uint8

const (
	onDue       phaseEvent = iota // a launch is due (the backoff ran out, or at boot)
	onLaunch                      // a launch is prepared
	onStarted                     // the child was forked
	onStop                        // supervise asked the child to stop
	onExited                      // the child ended (or could not start)
	onBackoff                     // a relaunch waits (a delay > 0)
	onLimitWait                   // a relaunch waits for a limit's reset (a delay > 0)
	onCut                         // a person's resume cuts a limit's wait short
	numPhaseEvents
)

// stay marks a (phase, event) pair that leaves the phase as it is.
const stay = numPhases

// phaseTable is the lifecycle: phaseTable[phase][event] is the next phase.
var phaseTable = func() (t [numPhases][numPhaseEvents]Phase) {
	for p := range t {
		for e := range t[p] {
			t[p][e] = stay
		}
	}
	for p := range t {
		// A launch, a fork, an exit and a wait happen from any phase.
		t[p][onLaunch] = PhaseStarting
		t[p][onStarted] = PhaseRunning
		t[p][onExited] = PhaseExited
		t[p][onBackoff] = PhaseBackoff
		t[p][onLimitWait] = PhaseLimitWait
	}
	t[PhaseRunning][onStop] = PhaseStopping
	t[PhaseStopping][onStop] = PhaseStopping
	t[PhaseLimitWait][onDue] = PhaseBackoff
	t[PhaseLimitWait][onCut] = PhaseBackoff
	return t
}()

// Proc is the child's lifecycle part: its phase, its runs and what the
// agent said of itself in the current one.
type Proc struct {
	phase Phase
	// Run is the current run, or the last one once it ended.
	Run record.Run
	// LastExit is the last run that ended, nil before the first.
	LastExit *record.Run
	Restarts uint64
	// Ready and StatusText are what the agent sent (READY=1, STATUS=).
	Ready      bool
	StatusText string
	// TurnDone: a turn completed during the current run.
	TurnDone  bool
	nextRun   uint64
	launching uint64 // the run number of the launch under way
	launches  int    // launches by this supervise
}

// on moves the lifecycle by ev, as the table says.
func (p *Proc) on(ev phaseEvent) {
	if next := phaseTable[p.phase][ev]; next != stay {
		p.phase = next
	}
}

// Child is the child's state as status names it.
func (p *Proc) Child() string { return p.phase.String() }

// Phase is where the lifecycle stands.
func (p *Proc) Phase() Phase { return p.phase }

// Running reports whether a child runs.
func (p *Proc) Running() bool { return p.phase == PhaseRunning || p.phase == PhaseStopping }

// NextRun is the number the next launch will have.
func (p *Proc) NextRun() uint64 { return p.nextRun }

// launch takes the next run number for a launch and clears what the agent
// said in the last run.
func (p *Proc) launch() uint64 {
	n := p.nextRun
	p.nextRun++
	p.launches++
	p.launching = n
	p.on(onLaunch)
	p.Ready, p.StatusText, p.TurnDone = false, "", false
	return n
}

// start records that run's child was forked.
func (p *Proc) start(e Started) (relaunch bool) {
	relaunch = p.LastExit != nil
	p.on(onStarted)
	p.Run = record.Run{Run: e.Run, PID: e.PID, StartTime: e.StartTime, Started: e.At,
		Reason: record.ReasonRunning, Argv: e.Argv}
	if relaunch {
		p.Restarts++
	}
	return relaunch
}

// wait records a relaunch delay: a backoff, or a limit's wait. A delay
// of 0 is no wait: the launch follows at once.
func (p *Proc) wait(o *out, delay time.Duration, limit bool) {
	switch {
	case delay <= 0:
	case limit:
		p.on(onLimitWait)
	default:
		p.on(onBackoff)
	}
	o.add(Backoff{Delay: delay})
}
